"""The first-bytes watch's budget: it rests while its hand-overs of the GIL cost the loop too much.

Why: each wake-up of the watch thread (first_bytes.py) takes the GIL from the event loop and gives it
back, and the loop waits until the thread has been given a core to take it. On a machine with a core
to spare that is microseconds. Measured at 21.8k tokens/s (docs/benchmarks.md, "First-bytes watch: what it buys and
what it costs"), the thread waited for a core 2-8 ms in each second on a quiet box and 3-20 ms with a
CPU hog on the generator's core, but 210-460 ms beside two busy processes on 2 cores, where a
saturated generator sent 10-18 % fewer requests with the watch (the same section).
So the thread reads its own run-queue wait (the kernel's schedstat) once a second and rests while that
wait exceeds BUDGET of the second: an upper bound of what the loop lost, since the loop waits only for
the part after it handed the GIL over. Resting, it watches no new reply (their first tokens are
stamped by their reads, as with the watch off); it looks again after a pause that doubles while the
machine stays busy and starts again from FIRST_PAUSE_S after a second within budget.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadline.client.idle_clock import SCHEDSTAT, run_delay_ns

# A share of each second. Measured above: quiet 0.2-0.8 %, a hog on the core 0.3-2 %, busy cores
# 21-46 %: 5 % lies well between them, and is about the run-to-run spread of a generator's request
# count (docs/benchmarks.md), so what the watch costs while it works stays inside that noise.
BUDGET = 0.05
WINDOW_S = 1.0
FIRST_PAUSE_S = 5.0
MAX_PAUSE_S = 60.0


def thread_wait_s() -> float | None:
    """The calling thread's time spent waiting for a core so far (s): the second field of
    /proc/thread-self/schedstat (ns). None where the kernel does not say."""
    try:
        with open(SCHEDSTAT, "rb") as handle:
            return run_delay_ns(handle.read()) * 1e-9
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class WatchBudget:
    """Whether the watch may work (`resting` False), from the wait its thread reports (`observe`)."""

    budget: float = BUDGET
    resting: bool = False
    pauses: int = 0  # how often it went to rest (tests, benchmarks)
    _rest_until: float = 0.0
    _pause_s: float = FIRST_PAUSE_S
    _window_start: float | None = None
    _wait_at_start: float = 0.0

    def observe(self, now: float, waited_s: float | None) -> None:
        """The watch thread's monotonic time and its total wait so far; call at least every WINDOW_S."""
        if waited_s is None:  # its cost cannot be measured here: never on its own say-so
            self.resting, self._rest_until = True, float("inf")
            return
        if self.resting:
            if now < self._rest_until:
                return
            self.resting, self._window_start = False, None
        if self._window_start is None:
            self._window_start, self._wait_at_start = now, waited_s
            return
        span = now - self._window_start
        if span < WINDOW_S:
            return
        if (waited_s - self._wait_at_start) / span > self.budget:
            self.resting, self._rest_until = True, now + self._pause_s
            self._pause_s = min(2 * self._pause_s, MAX_PAUSE_S)
            self.pauses += 1
        else:
            self._pause_s = FIRST_PAUSE_S
        self._window_start, self._wait_at_start = now, waited_s
