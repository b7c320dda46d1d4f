"""The read timeout of the token path: "no bytes for N seconds" without a timer per read.

A gevent socket with a timeout starts and stops a `gevent.Timeout` around every wait, i.e. for
every token, a share of the generator's CPU per token that a timer per request avoids. The
connection's socket has no timeout instead; one timer per request checks, when it fires, whether
bytes came since it was armed: if so it re-arms for the time left, if the reader has been waiting
the whole time it raises ReadTimeout in the reading greenlet, exactly where a socket timeout would
have. It only ever raises into a greenlet that is blocked in a read of this connection
(`waiting`), never into a user thinking between requests.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter

from gevent import get_hub, getcurrent

MIN_REARM_S = 0.001


class StallTimer:
    """Armed for one request (send, headers, body); `last_progress` set after every read, `disarm()` at its end."""

    __slots__ = ("seconds", "make_error", "waiting", "last_progress", "_reader", "_timer")

    def __init__(self, seconds: float | None, make_error: Callable[[], BaseException]) -> None:
        self.seconds = seconds
        self.make_error = make_error
        self.waiting = False  # the reader is blocked in a read (or the request's send) of this connection
        self.last_progress = 0.0  # perf_counter() of the last read's end: set by the reader (response.py)
        self._reader = None
        self._timer = None

    def arm(self) -> None:
        self.disarm()
        if self.seconds is None:
            return
        self._reader = getcurrent()
        self.last_progress = perf_counter()
        self._start(self.seconds)

    def disarm(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.stop()
            timer.close()
        self._reader = None

    def _start(self, after: float) -> None:
        timer = self._timer = get_hub().loop.timer(max(after, MIN_REARM_S), ref=False)
        timer.start(self._fire)

    def _fire(self) -> None:
        old, self._timer = self._timer, None
        if old is not None:
            old.close()
        reader = self._reader
        if reader is None or self.seconds is None:
            return
        idle = perf_counter() - self.last_progress
        if self.waiting and idle >= self.seconds:
            self._reader = None
            reader.throw(self.make_error())
        else:
            self._start(self.seconds - idle if self.waiting else self.seconds)
