"""When this process's share of a trace starts, and which share it is.

The master picks the replay's start on its own clock and tells every worker its share (k of n) and
that start on the worker's clock (the clock probes' offset added: loadline/runtime/trace.py), so
every worker's due times are the master's schedule. A local runner sets its own. With the
master's own schedule (`--trace-file`) it also carries this process's share and the block size.
"""

from __future__ import annotations

from gevent.event import Event

from loadline.core.trace_warp import Scheduled


class TraceControl:
    def __init__(self) -> None:
        self.start_wall: float | None = None  # time.time() of the replay's start, this process's clock
        self.share, self.shares = 0, 1
        self.requests: list[Scheduled] | None = None  # this process's share, when the master sent it
        self.block_tokens = 0
        self.ready = Event()

    def set(
        self, start_wall: float, share: int, shares: int, requests: list[Scheduled] | None = None, block_tokens: int = 0
    ) -> None:
        self.start_wall, self.share, self.shares = float(start_wall), int(share), max(1, int(shares))
        self.requests, self.block_tokens = requests, int(block_tokens)
        self.ready.set()

    def reset(self) -> None:
        self.start_wall, self.requests = None, None
        self.ready = Event()


CONTROL = TraceControl()  # one per process
