"""PhasedShape: a Locust LoadTestShape that walks a list of phases planned from options.

Why phases advance from the moment the shape *entered* them rather than from a fixed schedule:
in distributed runs `MasterRunner.start()` blocks through every ramp, so ticks arrive late. A fixed
schedule would silently shorten or skip phases; walking the list means every phase is applied and
held for its full duration, and the timeline records when each one really started and ended.
"""

from __future__ import annotations

import logging
import time
from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from locust import LoadTestShape

from loadline.core import runfolder
from loadline.core.errors import UsageError
from loadline.runtime import refusal
from loadline.runtime.timeline import Timeline, activate
from loadline.shapes import registry  # noqa: F401  (loading any shape puts every shape's options on Locust's parser)
from loadline.shapes.drill import ActionRunner
from loadline.shapes.options import ShapeOption, time_scale
from loadline.shapes.phase import Phase, scaled, spawn_rate_for

logger = logging.getLogger(__name__)

Tick = tuple[int, float] | None

# Every phased shape's: drills' stage fault actions go to this admin API (shapes/drill.py)
SIM_ADMIN_URL = ShapeOption(
    "--sim-admin-url", "", "Drills: the simulator's admin API URL for stage fault actions (loadline run sets it)"
)


class SystemClock:
    """The shape's time source; tests swap in a fake one."""

    @staticmethod
    def monotonic() -> float:
        return time.monotonic()

    @staticmethod
    def wall() -> float:
        return time.time()


@dataclass
class RunState:
    """Where one test run is in its phase list."""

    phases: list[Phase]
    timeline: Timeline
    index: int = 0
    entered_at: float = 0.0  # monotonic time the current phase was entered
    last_tick: tuple[int, float] = field(default=(0, 1.0))


class PhasedShape(LoadTestShape):
    """Base for Loadline shapes: subclasses only say which phases to run (`plan`).

    A registered subclass declares, next to its class, `shape_name = "NAME"` (`loadline run --shape
    NAME`), a docstring whose first line is its summary, and `shape_options`: see shapes/registry.py.
    """

    abstract = True
    use_common_options = False  # --users/--spawn-rate/--run-time do not apply to these shapes
    shape_options: ClassVar[tuple[ShapeOption, ...]] = (SIM_ADMIN_URL,)

    def __init__(self) -> None:
        # Shapes are instantiated in every process (workers too): keep this cheap.
        super().__init__()
        self.clock = SystemClock()
        self.state: RunState | None = None  # None until the first tick of a run
        self.actions = ActionRunner()  # drill fault actions of phases (shapes.drill)

    @abstractmethod
    def plan(self, options: Any) -> list[Phase]:
        """The phases of one run, in unscaled seconds, built from Locust's parsed options."""

    def on_phase_enter(self, phase: Phase) -> None:
        """Called when a phase begins (rate shapes publish the phase's arrival rate here)."""

    def on_phase_end(self, phase: Phase, start_wall: float, end_wall: float) -> str | None:
        """Called when a phase has run its full duration; a returned reason ends the test."""
        return None

    def entry_wall(self, index: int) -> float:
        """The wall time phase `index` is recorded to begin at: now (a schedule-driven shape says when
        its schedule's phase began, which a 1 s tick may enter late)."""
        return self.clock.wall()

    # -- plumbing ------------------------------------------------------------------------------
    @property
    def options(self) -> Any:
        environment = getattr(self.runner, "environment", None)
        return getattr(environment, "parsed_options", None)

    def users_now(self) -> int:
        return int(getattr(self.runner, "user_count", 0) or 0)

    def planned(self, options: Any) -> list[Phase]:
        """The scaled phase list for these options (raises UsageError on bad options)."""
        scale = time_scale(options)
        phases = [scaled(p, scale) for p in self.plan(options)]
        if not phases:
            raise UsageError(f"{type(self).__name__}: the options give no phases to run")
        return phases

    def tick(self) -> Tick:
        if self.state is None or self.state.timeline.closed:  # first tick of a (new) test run
            try:
                phases = self.planned(self.options)
            except UsageError as exc:
                self._fail(str(exc))
                return None
            self.state = RunState(phases, Timeline(len(phases), wall=self.clock.wall))
            activate(self.state.timeline)
            self._enter(0, previous_users=0)
            return self.state.last_tick

        state = self.state
        phase = state.phases[state.index]
        if self.clock.monotonic() - state.entered_at < phase.duration_s:
            return state.last_tick

        wall = self.clock.wall()
        start_wall = state.timeline.open.start_wall if state.timeline.open else wall
        try:
            reason = self.on_phase_end(phase, start_wall, wall)
        except Exception:  # a failing verdict must not kill the shape greenlet (and the test) mid-run
            logger.exception("judging %s failed; the shape goes on", phase.label)
            reason = None
        if reason:
            self._stop(reason)
            return None
        if state.index + 1 >= len(state.phases):
            state.timeline.close(self.users_now(), wall)
            logger.info("Shape %s finished all %d phases", type(self).__name__, len(state.phases))
            return None
        self._enter(state.index + 1, previous_users=phase.target_users)
        return state.last_tick

    def _enter(self, index: int, previous_users: int) -> None:
        state = self.state
        assert state is not None
        phase = state.phases[index]
        if index > 0 and phase.target_users == previous_users and phase.spawn_rate is None:
            rate = state.last_tick[1]  # same users: an unchanged tick avoids a pointless re-dispatch
        else:
            rate = spawn_rate_for(previous_users, phase)
        state.index, state.entered_at, state.last_tick = index, self.clock.monotonic(), (phase.target_users, rate)
        state.timeline.planned_phases = len(state.phases)  # "Phase 4/N" also for a shape that adds phases as it goes
        row = state.timeline.begin(
            index,
            phase.label,
            phase.kind,
            phase.target_users,
            rate,
            self.users_now(),
            self.entry_wall(index),
            phase.duration_s,
            phase.target_rate,
        )
        # on_phase_end reads a judged phase's whole window: the live view keeps its rows exact however long it is
        live = getattr(getattr(self.runner, "environment", None), "loadline_live", None)
        if live is not None:
            live.pin(row.start_wall if phase.judged else None)
        self.on_phase_enter(phase)
        if phase.actions:
            timeline = state.timeline
            self.actions.start(
                SIM_ADMIN_URL.read(self.options),
                phase.label,
                phase.actions,
                lambda text: timeline.annotate(row, text),
                phase_index=index,
            )

    def _stop(self, reason: str) -> None:
        """End the test because of `reason`: note it on the phase, the console and the manifest."""
        assert self.state is not None
        label = self.state.timeline.open.label if self.state.timeline.open else "?"
        logger.warning("Stopping the test after %s: %s", label, reason)
        self.state.timeline.close(self.users_now(), self.clock.wall(), note=reason)
        active = runfolder.active()
        if active is not None:
            try:
                runfolder.update_manifest(active.path, stop_reason=f"{label}: {reason}")
            except OSError as exc:
                logger.warning("could not write the stop reason to the manifest: %s", exc)

    def _fail(self, message: str) -> None:
        """Bad options: one line on the console, exit code 2, and the test ends (tick returns None)."""
        logger.error("%s: %s", type(self).__name__, message)
        environment = getattr(self.runner, "environment", None)
        if environment is not None:
            refusal.refuse(environment, f"{type(self).__name__}: {message}")
            environment.process_exit_code = 2
