"""Rate steps: the stepped shape in requests/s for open-loop (arrival-rate) users.

Each step holds an arrival rate (model requests/s) for --rate-hold seconds; rates start at
--rate-start and grow x --rate-factor (+ --rate-add) up to --rate-max. The users are schedulers
(loadline/client/users/arrivals.py), one per process; at each step the shape tells every process
its share of the rate (loadline/runtime/arrivals.py). phases.csv carries each step's `target_rate`.

With the stop rule on (the stepped shape's options), the test ends at the first step that breaks
the SLO, passes the error threshold, or did not carry its rate (fewer completed requests than the
rate asks for, beyond the schedule's noise: loadline/core/arrival_rate.py) - the break point.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from locust.runners import MasterRunner

from loadline.client.users.arrivals import ArrivalRateUser
from loadline.core.arrival_rate import fell_short, gap_cv2
from loadline.core.errors import UsageError
from loadline.core.runsettings import model_span
from loadline.runtime import arrivals
from loadline.shapes.options import ShapeOption, require
from loadline.shapes.phase import Phase
from loadline.shapes.stepped import MAX_ERROR_RATE, MAX_STEPS, MIN_REQUESTS, SETTLE, STOP_ON_SLO, StepShape

START = ShapeOption("--rate-start", 1.0, "Rate steps: arrival rate of the first step (model requests/s)")
FACTOR = ShapeOption("--rate-factor", 2.0, "Rate steps: multiply the rate by this at each step (1 = add only)")
ADD = ShapeOption("--rate-add", 0.0, "Rate steps: then add this many requests/s at each step")
MAX_RATE = ShapeOption("--rate-max", 64.0, "Rate steps: never go above this rate (the last step)")
HOLD = ShapeOption("--rate-hold", 120.0, "Rate steps: seconds each step holds its rate")


@dataclass(frozen=True)
class RateSettings:
    start: float
    factor: float
    add: float
    max_rate: float
    hold_s: float
    stop_on_slo: bool  # the stop rule's settings: the same options and meaning as the stepped shape's
    max_error_rate: float
    min_requests: int
    settle_s: float

    @classmethod
    def from_options(cls, options: Any) -> RateSettings:
        settings = cls(
            START.read(options),
            FACTOR.read(options),
            ADD.read(options),
            MAX_RATE.read(options),
            HOLD.read(options),
            STOP_ON_SLO.read(options),
            MAX_ERROR_RATE.read(options),
            MIN_REQUESTS.read(options),
            SETTLE.read(options),
        )
        require(settings.start > 0, "--rate-start must be > 0")
        require(settings.factor >= 1 and settings.add >= 0, "--rate-factor must be >= 1 and --rate-add >= 0")
        require(settings.factor > 1 or settings.add > 0, "rate steps need --rate-factor > 1 or --rate-add > 0")
        require(settings.max_rate >= settings.start, "--rate-max must be >= --rate-start")
        require(settings.hold_s > 0, "--rate-hold must be > 0")
        require(0 <= settings.max_error_rate <= 1, "--step-max-error-rate must be between 0 and 1")
        return settings


def step_rates(start: float, factor: float, add: float, cap: float) -> list[float]:
    rates = [start]
    while rates[-1] < cap and len(rates) < MAX_STEPS:
        rates.append(min(cap, rates[-1] * factor + add))
    return rates


def rate_text(rate: float) -> str:
    return f"{rate:.3g}/s"


def refuse_closed_loop(shape_name: str, user_classes: Any) -> None:
    """UsageError when none of the users to run follows an arrival rate (an ArrivalRateUser): a rate
    shape would start one closed-loop user per process, offer nothing like its rates, and stop at its
    first step."""
    classes = list(user_classes or [])
    if classes and not any(issubclass(cls, ArrivalRateUser) for cls in classes):
        names = ", ".join(sorted(cls.__name__ for cls in classes))
        raise UsageError(
            f"--shape {shape_name} offers arrival rates, which only the open-loop users follow "
            f"(--scenario rate, locustfiles/rate.py); {names} run closed loop, so its rates would "
            f"never be offered"
        )


def refuse_rateless(shape_name: str, user_classes: Any, arrival_rate: float) -> None:
    """UsageError when every user to run follows an arrival rate and nothing sets one: no --arrival-rate
    and no rate shape. Those users would wait for a rate for the whole run (a pulse shape's minutes),
    send nothing, and end as an empty run."""
    classes = list(user_classes or [])
    if classes and arrival_rate <= 0 and all(issubclass(cls, ArrivalRateUser) for cls in classes):
        shaped = f"--shape {shape_name} sets users, not rates" if shape_name else "no shape sets one"
        raise UsageError(
            f"the open-loop users (--scenario rate) send at an arrival rate, and none is set: {shaped}; "
            f"give --rate R (locust: --arrival-rate R) or a rate shape (--shape rate-steps or rate-sweep)"
        )


class RateShape(StepShape):
    """Base of the shapes whose phases are arrival rates: one scheduler user per process, rates published."""

    abstract = True
    open_loop = True  # shapes/catalog.py reads it (or a RateShape base) to imply `loadline run --scenario rate`

    def planned(self, options: Any) -> list[Phase]:
        runner = getattr(self, "runner", None)  # none in the precheck, which checks the locustfiles' users itself
        if runner is not None:
            name = str(getattr(self, "shape_name", type(self).__name__))
            refuse_closed_loop(name, getattr(runner, "user_classes", None))
        return super().planned(options)

    def schedulers(self) -> int:
        """Users to run: one arrival scheduler per process (the rate is split between them)."""
        return max(1, self.runner.worker_count) if isinstance(self.runner, MasterRunner) else 1

    def rate_phase(self, label: str, rate: float, hold_s: float, judged: bool) -> Phase:
        return Phase(f"{label} ({rate_text(rate)})", "step", hold_s, self.schedulers(), judged=judged, target_rate=rate)

    def on_phase_enter(self, phase: Phase) -> None:
        if phase.target_rate is not None:
            assert self.runner is not None  # phases are entered in a running test
            arrivals.publish(self.runner.environment, phase.target_rate)

    def on_phase_end(self, phase: Phase, start_wall: float, end_wall: float) -> str | None:
        reason = super().on_phase_end(phase, start_wall, end_wall)
        if reason or not phase.judged or phase.target_rate is None:
            return reason
        carried = self._carried(start_wall, end_wall, phase.target_rate)
        # a live window's count is rougher than the schedule's: its edges (users spawning, requests still in
        # flight) blur even a constant schedule, so it gets at least Poisson noise
        if carried is not None and fell_short(carried[0], carried[1], max(1.0, self._cv2())):
            rate = carried[0] / max(carried[1], 1e-9) * phase.target_rate
            reason = f"carried {rate:.3g}/s of the {rate_text(phase.target_rate)} offered"
            self.verdicts[-1] = (phase.label, f"broke: {reason}")
        return reason

    def _carried(self, start_wall: float, end_wall: float, rate: float) -> tuple[float, float] | None:
        """(completed requests, expected arrivals) of the judged window, or None without live stats.

        Requests started in the window's last E2E P95 may still be in flight (not yet counted): the
        expectation leaves that stretch out."""
        assert self.settings is not None
        window_end = self.mark_judged_window(start_wall, end_wall)
        summary = self._window(start_wall, window_end)
        if summary is None:
            return None
        seconds = model_span(window_end - start_wall, self.time_scale)  # summary.rps is model /s
        in_flight_s = min(seconds / 2, (summary.e2e_p95_ms or 0.0) / 1000)
        return summary.rps * seconds, rate * (seconds - in_flight_s)

    def _cv2(self) -> float:
        options = self.options
        return gap_cv2(getattr(options, "arrival", "poisson"), getattr(options, "burstiness", 1.0))


class RateStepShape(RateShape):
    """Stepped, in requests/s: open-loop arrival rates that grow until one breaks the SLO.

    Run with arrival-rate users (`loadline run --scenario rate --shape rate-steps`); see the module docstring.
    """

    shape_name = "rate-steps"
    settings: RateSettings | None  # StepShape's, narrowed: plan() sets a RateSettings
    shape_options = (START, FACTOR, ADD, MAX_RATE, HOLD, STOP_ON_SLO, MAX_ERROR_RATE, MIN_REQUESTS, SETTLE)

    def plan(self, options: Any) -> list[Phase]:
        super().plan(options)  # the SLO, time scale and streaming the stop rule judges with
        self.settings = RateSettings.from_options(options)
        s = self.settings
        return [
            self.rate_phase(f"rate-{n}", rate, s.hold_s, s.stop_on_slo)
            for n, rate in enumerate(step_rates(s.start, s.factor, s.add, s.max_rate), start=1)
        ]
