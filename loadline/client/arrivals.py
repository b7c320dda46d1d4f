"""Open-loop arrivals: when requests are due, independent of how fast the server answers.

The arrival processes are those of `vllm bench serve --request-rate R --burstiness B`:
- constant: one arrival every 1/R seconds;
- poisson: exponential gaps of mean 1/R (memoryless arrivals);
- gamma: gaps ~ Gamma(shape=B, scale=1/(R*B)); mean 1/R whatever B; B < 1 is burstier than Poisson,
  B = 1 is Poisson, B > 1 is more regular (coefficient of variation 1/sqrt(B)).

The rate a process runs at is a `RateControl`: set once per test start from --arrival-rate, and again
by a rate shape at each stage (loadline/runtime/arrivals.py carries it from the master to the workers).
Rates are in model time (requests/s of the modelled service): a `--time-scale X` run sends X times
faster, as it divides think times by X.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from gevent.event import Event

from loadline.core.errors import UsageError

PROCESSES = ("constant", "poisson", "gamma")


@dataclass(frozen=True)
class ArrivalSettings:
    """The open-loop options (loadline/client/options.py registers them)."""

    rate: float  # total requests (or sessions) per second over all workers, model time; 0 = from a rate shape
    process: str  # one of PROCESSES
    burstiness: float  # gamma shape; 1 = Poisson
    max_inflight: int  # cap on arrivals in flight over all workers (requests, or sessions with --arrival-sessions)
    sessions: bool  # each arrival starts a multi-turn chat session instead of one request

    @classmethod
    def from_options(cls, o: Any) -> ArrivalSettings:
        settings = cls(
            rate=float(getattr(o, "arrival_rate", 0.0)),
            process=str(getattr(o, "arrival", "poisson")),
            burstiness=float(getattr(o, "burstiness", 1.0)),
            max_inflight=int(getattr(o, "max_inflight", 1000)),
            sessions=bool(getattr(o, "arrival_sessions", False)),
        )
        settings.validate()
        return settings

    def validate(self) -> None:
        if not (math.isfinite(self.rate) and self.rate >= 0):
            raise UsageError(f"--arrival-rate must be >= 0 requests/s (got {self.rate!r})")
        if self.process not in PROCESSES:
            raise UsageError(f"--arrival must be one of {', '.join(PROCESSES)} (got {self.process!r})")
        if not (math.isfinite(self.burstiness) and self.burstiness > 0):
            raise UsageError(f"--burstiness must be > 0 (got {self.burstiness!r})")
        if self.max_inflight < 1:
            raise UsageError(f"--max-inflight must be >= 1 (got {self.max_inflight})")


def next_gap(process: str, rate: float, burstiness: float, rng: random.Random) -> float:
    """Seconds from one arrival to the next at `rate` arrivals/s (> 0)."""
    if process == "constant":
        return 1.0 / rate
    if process == "poisson":
        return rng.expovariate(rate)
    return rng.gammavariate(burstiness, 1.0 / (rate * burstiness))


class RateControl:
    """This process's share of the target rate, and a wake-up for schedulers when it changes.

    `total` is the rate over all workers (model time); `workers` how many processes share it (the
    master says so: loadline/runtime/arrivals.py); `scale` the run's --time-scale. A scheduler's
    rate in wall time is the total times the scale, shared by the workers and this process's schedulers.
    """

    def __init__(self) -> None:
        self.total: float | None = None  # None until a test start (or a rate shape) set it
        self.workers = 1
        self.scale = 1.0
        self.changed = Event()
        self.version = 0  # counts the changes: a scheduler busy elsewhere when one came still sees it

    def set(self, total: float, workers: int = 1, scale: float | None = None) -> None:
        self.total, self.workers = float(total), max(1, int(workers))
        if scale is not None:
            self.scale = float(scale)
        self.version += 1
        changed, self.changed = self.changed, Event()
        changed.set()  # wakes every scheduler waiting for its next due time

    def reset(self) -> None:
        """Test stopped: no rate until the next start says one."""
        self.total = None

    def process_rate(self) -> float | None:
        """Arrivals per wall second this process owes (None = not set yet)."""
        if self.total is None:
            return None
        return self.total * self.scale / self.workers

    def process_cap(self, max_inflight: int) -> int:
        """This process's share of the in-flight cap (at least 1)."""
        return max(1, math.ceil(max_inflight / self.workers))

    def wait(self, timeout: float) -> bool:
        """Sleep up to `timeout` s; True when the rate changed meanwhile."""
        return self.changed.wait(max(0.0, timeout))


CONTROL = RateControl()  # one per process: users read it, the runtime sets it
