"""How people pace a conversation: think time between turns and session length.

Chat traffic is sessions with think time (DOMAIN.md §Traffic profile), not a stream of independent
requests. Think time is lognormal, parameterised the way people describe it ("about 8 s, 90 % of
people reply within 20 s"), optionally plus reading time proportional to the reply's length.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from loadline.core.errors import UsageError

Z90 = 1.2815515655446004  # standard normal quantile at 0.90


@dataclass(frozen=True)
class LogNormal:
    """A lognormal distribution given by its mean and 90th percentile (both > 0)."""

    mean: float
    p90: float

    def __post_init__(self) -> None:
        if self.mean <= 0:
            return  # a zero mean means "no wait": sample() returns 0
        if self.p90 <= 0:
            raise UsageError(f"think time p90 must be > 0 (got {self.p90})")
        # mean = exp(mu + s^2/2), p90 = exp(mu + Z90*s)  =>  s^2/2 - Z90*s + ln(p90/mean) = 0
        disc = Z90 * Z90 - 2 * math.log(self.p90 / self.mean)
        if disc < 0:
            raise UsageError(
                f"think time p90 {self.p90} is too far above its mean {self.mean} for a lognormal "
                f"(p90 must be <= {self.mean * math.exp(Z90 * Z90 / 2):.3g})"
            )

    @property
    def sigma(self) -> float:
        return Z90 - math.sqrt(Z90 * Z90 - 2 * math.log(self.p90 / self.mean))

    @property
    def mu(self) -> float:
        return math.log(self.mean) - self.sigma**2 / 2

    def sample(self, rng: random.Random) -> float:
        if self.mean <= 0:
            return 0.0
        return rng.lognormvariate(self.mu, self.sigma)


@dataclass(frozen=True)
class ThinkTime:
    """Seconds a person waits before the next turn: lognormal + reading time, divided by time_scale."""

    base: LogNormal
    reading_tokens_per_s: float = 0.0  # 0 = do not add reading time
    time_scale: float = 1.0

    def sample(self, rng: random.Random, reply_tokens: int = 0) -> float:
        seconds = self.base.sample(rng)
        if self.reading_tokens_per_s > 0:
            seconds += reply_tokens / self.reading_tokens_per_s
        return seconds / self.time_scale


@dataclass(frozen=True)
class SessionLength:
    """Turns per conversation: geometric with the given mean, capped (at least 1 turn)."""

    mean_turns: float = 4.0
    max_turns: int = 20

    def sample(self, rng: random.Random) -> int:
        if self.mean_turns <= 1:
            return 1
        p = 1.0 / self.mean_turns
        turns = 1
        while turns < self.max_turns and rng.random() > p:
            turns += 1
        return turns
