"""How late could this process have read bytes that arrived after the body reader last saw every socket empty?

Why: a read that carries several tokens has them all under the newest one's receive stamp
(kernel_clock.py). Either they waited in the socket while the generator was busy (the earlier ones
are stamped late: the generator was behind), or the server wrote them together (an engine catching
up after a stall, as the simulator does on a busy host; a proxy that buffers SSE: the stamps are
true). The reads look the same; what differs is whether the generator could have been late. Bytes
that reach a socket of the body reader's set while the process sleeps in epoll wake it at once, and
while any of them waits, the process cannot sleep there (level-triggered: libev's loop returns at
once). So from their arrival to their read the process either ran or waited for a core, and the
time it spent so since the reader last found every socket empty bounds how long they waited: its
CPU time (every thread: one holding the GIL holds up the loop) plus the run delay (Linux schedstat,
as loadline/runtime/selfcheck.py reads it) of the main thread and of the first-bytes watch's thread
(while that one waits for a core holding the GIL or its lock, the loop waits on it, off any core).
An idle generator (one user, a server that catches up) then bounds its merged reads by ~0 and keeps
them exact; a busy or starved one keeps the bound it had (the time since the socket's previous read,
connection.Response.merged).
What it cannot see: a blocking system call in the loop (a slow disk write), and time the hypervisor
stole from a running thread or the kernel spent on interrupts in it (with steal or IRQ time
accounting, neither is CPU time nor run delay). On this suite's VMs the steal counter stays at 0.

Each look costs two system calls (~2 us), so it is taken at most every SAMPLE_EVERY_S: an older
look only widens the bound, by at most the busy time between two looks.
"""

from __future__ import annotations

import os
import time

SCHEDSTAT = "/proc/thread-self/schedstat"  # "<ns on a core> <ns waiting for one> <slices>" of this thread
SAMPLE_EVERY_S = 0.0002  # the bound's slack: well under the 1-2 ms between tokens at --time-scale 20


def run_delay_ns(schedstat: bytes) -> int:
    """A schedstat line's time spent waiting for a core (ns): its second field."""
    return int(schedstat.split()[1])


class IdleClock:
    """The process's busy time (CPU + the main thread's wait for a core) at the last empty look."""

    __slots__ = ("_fd", "looks", "_at", "_busy_ns", "_threads")

    def __init__(self, threads: list[int] | None = None) -> None:
        self._threads = threads if threads is not None else []  # other threads' schedstat, filled as they start
        try:  # opened by the thread that runs the loop: thread-self is that thread from then on
            self._fd = os.open(SCHEDSTAT, os.O_RDONLY)
            self._now_ns()
        except (OSError, ValueError, IndexError):
            self._fd = -1  # not Linux, or no schedstat: no bound, the time since the previous read stands
        self.looks = 0  # how many empty looks were sampled: a reply's bound needs one after it joined
        self._at = -1.0
        self._busy_ns = 0

    def _now_ns(self) -> int:
        busy = time.process_time_ns() + run_delay_ns(os.pread(self._fd, 64, 0))
        for fd in self._threads:  # a thread that started after a look only widens the bound
            busy += run_delay_ns(os.pread(fd, 64, 0))
        return busy

    def _off(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = -1

    def empty(self, now: float) -> None:
        """Every socket the reader follows had no bytes waiting at `now` (time.time())."""
        if self._fd < 0 or now - self._at < SAMPLE_EVERY_S:
            return
        try:
            self._busy_ns = self._now_ns()
        except (OSError, ValueError, IndexError):
            self._off()
            return
        self._at = now
        self.looks += 1

    def busy_since(self, first_look: int, last_look: int) -> float | None:
        """Seconds the process was busy since the last look, if that look is the `first_look`-th or a
        later one but not past `last_look` (the reply was on the reader's set then); else None."""
        if self._fd < 0 or not first_look <= self.looks <= last_look:
            return None
        try:
            return (self._now_ns() - self._busy_ns) / 1e9
        except (OSError, ValueError, IndexError):
            return None
