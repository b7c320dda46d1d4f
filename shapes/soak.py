"""Soak shape: does anything drift over hours (leaks, fragmentation, periodic OOMs)?

Ramp to a level, then hold it for a long time (default 2 h) cut into windows (default 10 min), one
phase each, so analysis can compare latency, errors and server memory window by window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from loadline.shapes.base import PhasedShape
from loadline.shapes.options import ShapeOption, require
from loadline.shapes.phase import Phase, users_text

MAX_WINDOWS = 2000

USERS = ShapeOption("--soak-users", 20, "Soak: users to hold")
RAMP = ShapeOption("--soak-ramp", 60.0, "Soak: seconds to ramp up to the soak users")
HOLD = ShapeOption("--soak-hold", 7200.0, "Soak: seconds to hold after the ramp")
WINDOW = ShapeOption("--soak-window", 600.0, "Soak: a phase marker every this many seconds (drift per window)")


@dataclass(frozen=True)
class SoakSettings:
    users: int
    ramp_s: float
    hold_s: float
    window_s: float

    @classmethod
    def from_options(cls, options: Any) -> SoakSettings:
        settings = cls(
            users=USERS.read(options),
            ramp_s=RAMP.read(options),
            hold_s=HOLD.read(options),
            window_s=WINDOW.read(options),
        )
        require(settings.users >= 1, "--soak-users must be >= 1")
        require(settings.ramp_s >= 0, "--soak-ramp must be >= 0")
        require(settings.hold_s > 0, "--soak-hold must be > 0")
        require(settings.window_s > 0, "--soak-window must be > 0")
        require(
            math.ceil(settings.hold_s / settings.window_s) <= MAX_WINDOWS,
            f"--soak-hold / --soak-window gives more than {MAX_WINDOWS} windows",
        )
        return settings


def soak_phases(s: SoakSettings) -> list[Phase]:
    phases = []
    if s.ramp_s > 0:
        phases.append(Phase(f"ramp (to {users_text(s.users)})", "ramp", s.ramp_s, s.users, ramp_s=s.ramp_s))
    count = math.ceil(s.hold_s / s.window_s - 1e-9)
    for n in range(1, count + 1):
        length = min(s.window_s, s.hold_s - (n - 1) * s.window_s)  # the last window takes the remainder
        phases.append(Phase(f"soak-window-{n}", "soak-window", length, s.users))
    return phases


class SoakShape(PhasedShape):
    """Does anything drift over hours (leaks, fragmentation, periodic OOMs)?

    Ramp, then hold for hours in marked windows (see the module docstring).
    """

    shape_name = "soak"
    shape_options = (USERS, RAMP, HOLD, WINDOW)

    def plan(self, options: Any) -> list[Phase]:
        return soak_phases(SoakSettings.from_options(options))
