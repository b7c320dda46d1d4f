"""Pulse-burst shape: does the service recover after a sudden jump to peak?

Base users, then a jump to base x factor (default x3) as fast as the runner allows, hold, drop back
to base and watch recovery for the gap; repeated k times. The recover phases are the ones to read:
latency and errors should return to the baseline's within seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadline.shapes.base import PhasedShape
from loadline.shapes.options import BASELINE_HOLD, ShapeOption, require
from loadline.shapes.phase import Phase, users_text

MAX_REPEATS = 100

BASE_USERS = ShapeOption("--burst-base-users", 4, "Pulse: users between bursts")
FACTOR = ShapeOption("--burst-factor", 3.0, "Pulse: burst users = base users x this")
HOLD = ShapeOption("--burst-hold", 60.0, "Pulse: seconds each burst lasts")
GAP = ShapeOption("--burst-gap", 120.0, "Pulse: seconds back at base users after each burst (recovery)")
REPEATS = ShapeOption("--burst-repeats", 3, "Pulse: number of bursts")


@dataclass(frozen=True)
class PulseSettings:
    base_users: int
    factor: float
    baseline_hold_s: float
    hold_s: float
    gap_s: float
    repeats: int

    @property
    def peak_users(self) -> int:
        return max(self.base_users + 1, round(self.base_users * self.factor))

    @classmethod
    def from_options(cls, options: Any) -> PulseSettings:
        settings = cls(
            base_users=BASE_USERS.read(options),
            factor=FACTOR.read(options),
            baseline_hold_s=BASELINE_HOLD.read(options),
            hold_s=HOLD.read(options),
            gap_s=GAP.read(options),
            repeats=REPEATS.read(options),
        )
        require(settings.base_users >= 0, "--burst-base-users must be >= 0")
        require(settings.factor > 1, "--burst-factor must be > 1")
        require(settings.baseline_hold_s >= 0, "--baseline-hold must be >= 0")
        require(settings.hold_s > 0, "--burst-hold must be > 0")
        require(settings.gap_s > 0, "--burst-gap must be > 0")
        require(1 <= settings.repeats <= MAX_REPEATS, f"--burst-repeats must be between 1 and {MAX_REPEATS}")
        return settings


def pulse_phases(s: PulseSettings) -> list[Phase]:
    phases = []
    if s.baseline_hold_s > 0:
        phases.append(Phase("baseline", "baseline", s.baseline_hold_s, s.base_users))
    for n in range(1, s.repeats + 1):
        phases.append(Phase(f"burst-{n} ({users_text(s.peak_users)})", "burst", s.hold_s, s.peak_users))
        phases.append(Phase(f"recover-{n} ({users_text(s.base_users)})", "recover", s.gap_s, s.base_users))
    return phases


class PulseShape(PhasedShape):
    """Does the service recover after a sudden jump to peak?

    Base load with repeated x3 bursts, each followed by a recovery gap (see the module docstring).
    """

    shape_name = "pulse"
    shape_options = (BASELINE_HOLD, BASE_USERS, FACTOR, HOLD, GAP, REPEATS)

    def plan(self, options: Any) -> list[Phase]:
        return pulse_phases(PulseSettings.from_options(options))
