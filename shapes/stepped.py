"""Stepped shape: where is the knee, and where is the break point?

A single-user baseline (the latency floor), then steps that multiply (default x2) and/or add users,
each held long enough to read steady-state latency. With the stop rule on, the test ends at the
first full step whose window breaks the SLO or passes the error threshold: that step is the break
point, and the reason is written on its phase row and into the manifest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, ClassVar, Protocol

from loadline.core.judge import judges_itl
from loadline.core.runsettings import model_span, streaming_of_options
from loadline.core.slo import SLO
from loadline.runtime.live_window import window as live_window
from loadline.shapes.base import PhasedShape
from loadline.shapes.options import BASELINE_HOLD, ShapeOption, require, time_scale
from loadline.shapes.phase import Phase, users_text
from loadline.shapes.stop_rule import judge_window

logger = logging.getLogger(__name__)

MAX_STEPS = 200  # bounds the plan whatever the options say

START_USERS = ShapeOption("--step-start-users", 10, "Stepped: users of the first step")
FACTOR = ShapeOption("--step-factor", 2.0, "Stepped: multiply the users by this at each step (1 = add only)")
ADD = ShapeOption("--step-add", 0, "Stepped: then add this many users at each step")
HOLD = ShapeOption("--step-hold", 180.0, "Stepped: seconds each step holds its user count")
RAMP = ShapeOption("--step-ramp", 0.0, "Stepped: seconds to ramp into each step (0 = as fast as possible)")
MAX_USERS = ShapeOption("--step-max-users", 640, "Stepped: never go above this many users (the last step)")
STOP_ON_SLO = ShapeOption("--step-stop-on-slo", True, "Stepped: end the test at the first step that breaks the SLO")
MAX_ERROR_RATE = ShapeOption(
    "--step-max-error-rate", 0.05, "Stepped: a step with more failed requests than this breaks"
)
MIN_REQUESTS = ShapeOption("--step-min-requests", 10, "Stepped: a step with fewer completed requests is not judged")
SETTLE = ShapeOption(
    "--step-settle", 5.0, "Stepped: wall seconds at the end of a step left out of its verdict (not scaled)"
)


class StopRuleSettings(Protocol):
    """What the stop rule reads of a stepped shape's settings: StepSettings, or a rate shape's own."""

    @property
    def stop_on_slo(self) -> bool: ...

    @property
    def max_error_rate(self) -> float: ...

    @property
    def min_requests(self) -> int: ...

    @property
    def settle_s(self) -> float: ...


@dataclass(frozen=True)
class StepSettings:
    baseline_hold_s: float
    start_users: int
    factor: float
    add: int
    hold_s: float
    ramp_s: float
    max_users: int
    stop_on_slo: bool
    max_error_rate: float
    min_requests: int
    settle_s: float

    @classmethod
    def from_options(cls, options: Any) -> StepSettings:
        settings = cls(
            baseline_hold_s=BASELINE_HOLD.read(options),
            start_users=START_USERS.read(options),
            factor=FACTOR.read(options),
            add=ADD.read(options),
            hold_s=HOLD.read(options),
            ramp_s=RAMP.read(options),
            max_users=MAX_USERS.read(options),
            stop_on_slo=STOP_ON_SLO.read(options),
            max_error_rate=MAX_ERROR_RATE.read(options),
            min_requests=MIN_REQUESTS.read(options),
            settle_s=SETTLE.read(options),
        )
        settings.validate()
        return settings

    def validate(self) -> None:
        require(self.baseline_hold_s >= 0, "--baseline-hold must be >= 0")
        require(self.start_users >= 1, "--step-start-users must be >= 1")
        require(self.factor >= 1, "--step-factor must be >= 1")
        require(self.add >= 0, "--step-add must be >= 0")
        require(self.factor > 1 or self.add > 0, "stepped shape needs --step-factor > 1 or --step-add > 0")
        require(self.hold_s > 0, "--step-hold must be > 0")
        require(self.ramp_s >= 0, "--step-ramp must be >= 0")
        require(self.max_users >= self.start_users, "--step-max-users must be >= --step-start-users")
        require(0 <= self.max_error_rate <= 1, "--step-max-error-rate must be between 0 and 1")
        require(self.min_requests >= 1, "--step-min-requests must be >= 1")
        require(self.settle_s >= 0, "--step-settle must be >= 0")


def step_users(start: int, factor: float, add: int, cap: int) -> list[int]:
    """User counts of the steps: start, then x factor + add each step, the last one capped at `cap`."""
    users = [start]
    while users[-1] < cap and len(users) < MAX_STEPS:
        grown = round(users[-1] * factor + add)
        users.append(min(cap, max(grown, users[-1] + 1)))
    return users


def stepped_phases(s: StepSettings) -> list[Phase]:
    phases = []
    if s.baseline_hold_s > 0:
        phases.append(Phase("baseline", "baseline", s.baseline_hold_s, 1))
    for n, users in enumerate(step_users(s.start_users, s.factor, s.add, s.max_users), start=1):
        if s.ramp_s > 0:
            phases.append(Phase(f"ramp-{n} (to {users_text(users)})", "ramp", s.ramp_s, users, ramp_s=s.ramp_s))
        phases.append(Phase(f"step-{n} ({users_text(users)})", "step", s.hold_s, users, judged=s.stop_on_slo))
    return phases


WindowFunction = Callable[[Any, float, float], Any]
NO_REQUESTS = SimpleNamespace(requests=0, errors=0, error_rate=None)  # loadline.runtime.live gives None for "none"


class StepShape(PhasedShape):
    """Where is the knee, and where is the break point?

    A single-user baseline, then x2 steps until a step breaks the SLO (see the module docstring).
    """

    shape_name = "stepped"
    shape_options: ClassVar[tuple[ShapeOption, ...]] = (
        BASELINE_HOLD,
        START_USERS,
        FACTOR,
        ADD,
        HOLD,
        RAMP,
        MAX_USERS,
        STOP_ON_SLO,
        MAX_ERROR_RATE,
        MIN_REQUESTS,
        SETTLE,
    )

    def __init__(self) -> None:
        super().__init__()
        self.window_function: WindowFunction | None = None  # tests inject a fake; default loadline.runtime.live.window
        self.settings: StopRuleSettings | None = None  # StepSettings here; subclasses narrow it
        self.slo: SLO | None = None
        self.time_scale = 1.0
        self.streaming: bool | None = None
        self.verdicts: list[tuple[str, str]] = []  # (step label, what the stop rule said): the web UI shows them

    def stop_rule_state(self) -> dict:
        """The stop rule as it stands, for the web UI: on or off, its error limit, and each judged step's verdict."""
        settings = self.settings
        return {
            "enabled": bool(settings and settings.stop_on_slo),
            "max_error_rate": settings.max_error_rate if settings else None,
            "min_requests": settings.min_requests if settings else None,
            "verdicts": [{"phase": label, "verdict": verdict} for label, verdict in self.verdicts],
        }

    def plan(self, options: Any) -> list[Phase]:
        self.settings = StepSettings.from_options(options)
        self.verdicts = []
        slo_file = getattr(options, "slo_file", "") if options is not None else ""
        self.slo = SLO.from_file(slo_file or None)
        self.time_scale = time_scale(options)
        self.streaming = streaming_of_options(options)
        return stepped_phases(self.settings)

    def on_phase_end(self, phase: Phase, start_wall: float, end_wall: float) -> str | None:
        if not phase.judged or self.settings is None or self.slo is None:
            return None
        window_end = self.mark_judged_window(start_wall, end_wall)
        summary = self._window(start_wall, window_end, judges_itl(self.slo, self.streaming))
        if summary is None and self._window(0.0, start_wall) is not None:
            summary = NO_REQUESTS  # records flow, yet none in this step: everything is stuck
        if summary is None:
            logger.warning("stop rule: no live stats for %s, step not judged", phase.label)
            self.verdicts.append((phase.label, "not judged: no live stats"))
            return None
        if 0 < summary.requests < self.settings.min_requests:
            logger.warning(
                "stop rule: %s had only %d requests (< --step-min-requests %d), not judged",
                phase.label,
                summary.requests,
                self.settings.min_requests,
            )
        # loadline.runtime.live reports a time-scaled run in model time: so is the window
        model_window_s = model_span(window_end - start_wall, self.time_scale)
        reason = judge_window(
            summary, self.slo, self.settings.max_error_rate, model_window_s, self.settings.min_requests, self.streaming
        )
        few = 0 < summary.requests < self.settings.min_requests
        self.verdicts.append(
            (
                phase.label,
                f"broke the SLO: {reason}"
                if reason
                else f"not judged: {summary.requests} requests"
                if few
                else "held the SLO",
            )
        )
        return reason

    def mark_judged_window(self, start_wall: float, end_wall: float) -> float:
        """The end of the phase's judged window, written on its phases.csv row so the report judges the same one.

        Requests are assigned to a window by start time; those of the step's last `--step-settle` seconds
        may not have finished and reached the master yet (they would bias it towards fast), and their
        replies run into the next step's load: neither the rule nor the report's row counts them."""
        assert self.settings is not None  # plan() set it before the first phase
        window_end = end_wall - min(self.settings.settle_s, (end_wall - start_wall) / 2)
        state = self.state
        if state is not None and state.timeline.open is not None and window_end < end_wall:
            state.timeline.open.judged_until_wall = window_end
        return window_end

    def _window(self, start_wall: float, end_wall: float, itl: bool = False) -> Any:
        """The live window; pooled ITL percentiles (costly) only when `itl` (the SLO judges ITL)."""
        environment = getattr(self.runner, "environment", None)
        if self.window_function is not None:
            return self.window_function(environment, start_wall, end_wall)
        return live_window(environment, start_wall, end_wall, itl)
