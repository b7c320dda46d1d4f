"""Did a phase carry the arrival rate it was offered? One rule for the live stop rule (shapes/rate_steps.py)
and the report (analysis/stats/arrivals.py).

A renewal arrival process whose gaps have coefficient of variation c sends N ~ expected +- sqrt(expected * c^2)
arrivals (c^2 = 0 constant, 1 Poisson, 1/B gamma with burstiness B). A phase fell short when it carried
fewer than 98 % of the expected arrivals (MIN_ACHIEVED: the tolerance asked of a generator keeping
its schedule) *and* fewer than the schedule's own noise explains (NOISE_SD standard deviations), so a
short Poisson phase is not blamed for its randomness.
"""

from __future__ import annotations

import math

MIN_ACHIEVED = 0.98
NOISE_SD = 3.0


def gap_cv2(process: str | None, burstiness: float | None) -> float:
    """Squared coefficient of variation of the arrival gaps (loadline/client/arrivals.py's processes)."""
    if process == "constant":
        return 0.0
    if process == "gamma" and burstiness:
        return 1.0 / float(burstiness)
    return 1.0


def fell_short(arrivals: float, expected: float, cv2: float) -> bool:
    """Fewer arrivals than 98 % of expected and than the schedule's noise explains."""
    return arrivals < min(MIN_ACHIEVED * expected, expected - NOISE_SD * math.sqrt(max(expected, 0.0) * cv2))
