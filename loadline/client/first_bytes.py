"""First tokens stamped by an OS thread that looks at them without taking them (MSG_PEEK).

Why: TCP merges a segment that waits in its socket with the next one, and the merged bytes carry the
newer segment's receive stamp (kernel_clock.py). At heavy load the body reader's greenlet sometimes
looks at a reply one token gap late (a collection, the run collector's drain, a long turn of the
hub: docs/benchmarks.md, "First-bytes watch: what it buys and what it costs"), and that reply's TTFT is then one gap
too long. A greenlet cannot be woken while another one runs; an OS thread can: this one waits on an
epoll set of the replies still waiting for their first token and, as soon as bytes arrive on one,
peeks at them (`recvmsg(MSG_PEEK)`), which gives the kernel's stamp of what has arrived so far and
leaves the bytes where they are. It needs the GIL for that, which CPython hands over within its
switch interval, whatever Python code the greenlets are running: 5 ms by default, set to 1 ms here so
that a peek comes well inside the 10-50 ms between an engine's tokens, also when another process
shares the core (docs/benchmarks.md, "First-bytes watch: what it buys and what it costs"). The main thread pays for the shorter
interval only when this thread asks for the GIL.

The body reader then reads a watched socket in the pieces the peeks saw (`next_piece`): the first
`length` bytes with the first peek's stamp, the next ones with the next, the rest with its own, so
each piece carries the stamp of the segment that completed it, as if it had been read on time.
A peek's stamp is never later than the read's own (the bytes were there when it looked), so this can
only move a stamp towards the truth. Sockets over TLS are never watched (their bytes are records).

On within a budget by default (body_reader.py): every wake-up of this thread hands the GIL over and
back, and on a machine whose cores are busy the loop then waits for this thread to get a core.
Measured (docs/benchmarks.md, "First-bytes watch: what it buys and what it costs"): no cost on a quiet box at 21k tokens/s, but
10-18 % fewer requests from a saturated generator sharing 2 cores with two busy processes. So the
thread measures its own wait for a core and rests while that exceeds its budget (watch_budget.py);
LOADLINE_FIRST_BYTES_WATCH=1 keeps it on whatever it costs, =0 turns it off.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable

from gevent.monkey import get_original

from loadline.client.idle_clock import SCHEDSTAT
from loadline.client.watch_budget import WINDOW_S, WatchBudget, thread_wait_s
from loadline.core.kernel_stamps import ANC_SPACE, stamp_of

_epoll = get_original("select", "epoll")
_allocate_lock = get_original("_thread", "allocate_lock")
_start_thread = get_original("_thread", "start_new_thread")
_monotonic = get_original("time", "monotonic")
EPOLLIN_EDGE = 0x001 | (1 << 31)  # EPOLLIN | EPOLLET: woken once per arrival, not while bytes wait
PEEK = socket.MSG_PEEK | socket.MSG_DONTWAIT
PEEK_SIZE = 65536
SWITCH_INTERVAL_S = 0.001
POLL_S = 1.0  # the thread's wait between two looks at whether it should stop


class FirstBytesWatch:
    """The thread, its epoll set and what its peeks saw, per watched file descriptor:
    [(bytes waiting, their newest stamp), ...], lengths from the oldest unread byte."""

    def __init__(self, budget: WatchBudget | None = None, waited: Callable[[], float | None] = thread_wait_s) -> None:
        self.lock = _allocate_lock()  # held by the thread while it peeks, by the body reader while it reads
        self.budget = budget  # None: on whatever it costs (LOADLINE_FIRST_BYTES_WATCH=1); else the default
        self._waited = waited  # the thread's own wait for a core so far (s), read once a window
        self._epoll = _epoll()
        self._seen: dict[int, list[tuple[int, float]]] = {}
        self._socks: dict[int, socket.socket] = {}
        self.stopped = False
        # this thread's scheduler statistics, opened by it (idle_clock.py: while it waits for a core
        # holding the GIL or the lock, the loop waits too, and neither counts as the loop's own time)
        self.schedstat_fds: list[int] = []
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))
        _start_thread(self._run, ())

    def watch(self, fd: int, raw: socket.socket) -> None:
        """Peek at `raw` (a non-blocking socket asking for receive stamps) whenever bytes arrive."""
        with self.lock:
            self._seen[fd], self._socks[fd] = [], raw
            try:
                self._epoll.register(fd, EPOLLIN_EDGE)
            except FileExistsError:  # a kept-alive connection, left on the set: armed again
                self._epoll.modify(fd, EPOLLIN_EDGE)

    def unwatch(self, fd: int) -> None:
        with self.lock:
            if self._socks.pop(fd, None) is not None:
                del self._seen[fd]
                try:
                    self._epoll.unregister(fd)
                except (OSError, ValueError):  # closed already (the socket, or this watch once stopped)
                    pass

    def next_piece(self, fd: int) -> tuple[int, float]:
        """How much of `fd` to read next, and the stamp of those bytes (0.0: the read's own): the
        oldest piece a peek saw, else everything. Call it with `lock` held and read before releasing
        it: the peeks count bytes from the oldest unread one."""
        seen = self._seen.get(fd)
        if not seen:
            return PEEK_SIZE, 0.0
        size, stamp = seen.pop(0)
        seen[:] = [(length - size, later) for length, later in seen]
        return size, stamp

    @property
    def resting(self) -> bool:
        """Over its budget for now: new replies are not watched (read on every request, so a plain attribute)."""
        return self.budget is not None and self.budget.resting

    def stop(self) -> None:
        self.stopped = True

    def _run(self) -> None:
        try:
            self.schedstat_fds.append(os.open(SCHEDSTAT, os.O_RDONLY))
        except OSError:
            pass  # not Linux, or no schedstat: the idle clock then bounds nothing (idle_clock.py)
        try:
            self._watch_forever()
        except Exception:  # noqa: BLE001  # never a traceback from a helper thread: the reads keep their own stamps
            self.stopped = True
        finally:
            with self.lock:
                self._epoll.close()

    def _watch_forever(self) -> None:
        poll, seen, socks, budget = self._epoll.poll, self._seen, self._socks, self.budget
        look_at = 0.0
        while not self.stopped:
            ready = poll(POLL_S)  # the GIL is released while it waits
            if budget is not None and (now := _monotonic()) >= look_at:
                budget.observe(now, self._waited())
                look_at = now + WINDOW_S
            if not ready:
                continue
            with self.lock:
                for fd, _ in ready:
                    raw = socks.get(fd)
                    if raw is None:  # unwatched since the wake-up
                        continue
                    try:
                        data, ancdata, _, _ = raw.recvmsg(PEEK_SIZE, ANC_SPACE, PEEK)
                    except OSError:  # nothing after all, or the connection's end: its reader will see
                        continue
                    stamp = stamp_of(ancdata)
                    peeks = seen[fd]
                    if stamp and len(data) > (peeks[-1][0] if peeks else 0):
                        peeks.append((len(data), stamp))
