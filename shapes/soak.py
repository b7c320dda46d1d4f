"""Soak shape: does anything drift over hours (leaks, fragmentation, periodic OOMs)?

Ramp to a level, then hold it for a long time (default 2 h) cut into windows (default 10 min), one
phase each, so analysis can compare latency, errors and server memory window by window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from shapes.base import PhasedShape
from shapes.options import read, require
from shapes.phase import Phase, users_text

MAX_WINDOWS = 2000


@dataclass(frozen=True)
class SoakSettings:
    users: int
    ramp_s: float
    hold_s: float
    window_s: float

    @classmethod
    def from_options(cls, options: Any) -> SoakSettings:
        settings = cls(
            users=read(options, "soak_users"),
            ramp_s=read(options, "soak_ramp"),
            hold_s=read(options, "soak_hold"),
            window_s=read(options, "soak_window"),
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
    """Ramp, then hold for hours in marked windows (see module docstring)."""

    def plan(self, options: Any) -> list[Phase]:
        return soak_phases(SoakSettings.from_options(options))
