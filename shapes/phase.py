"""A phase: one stretch of a load shape with a single target user count.

Shapes are planned as lists of phases in *unscaled* seconds; `scaled()` applies `--time-scale`
once, so the shapes themselves never think about demos and tests.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from loadline.shapes.drill import FaultAction

# The kinds analysis can group by (loadline.core.runfolder.PHASE_COLUMNS documents the same list).
KINDS = ("baseline", "step", "ramp", "burst", "recover", "hold", "soak-window", "stage")


@dataclass(frozen=True)
class Phase:
    label: str  # shown in the console, the web UI and phases.csv, e.g. "step-3 (40 users)"
    kind: str  # one of KINDS
    duration_s: float  # how long the phase lasts once the shape has entered it
    target_users: int
    ramp_s: float = 0.0  # reach the target over this many seconds; 0 = as fast as the runner allows
    spawn_rate: float | None = None  # explicit users/s (stages files); wins over ramp_s
    judged: bool = False  # the stepped stop rule evaluates this phase when it ends
    actions: tuple[FaultAction, ...] = ()  # drill fault actions run when the phase begins (shapes.drill)
    target_rate: float | None = None  # rate shapes: arrival rate (model requests/s; the users publish x time scale)


def users_text(n: int) -> str:
    return "1 user" if n == 1 else f"{n} users"


def scaled(phase: Phase, time_scale: float) -> Phase:
    """The same phase run `time_scale` times faster: durations shrink, explicit rates grow."""
    rate = None if phase.spawn_rate is None else phase.spawn_rate * time_scale
    actions = tuple(dataclasses.replace(a, after_s=a.after_s / time_scale) for a in phase.actions)
    return dataclasses.replace(
        phase,
        duration_s=phase.duration_s / time_scale,
        ramp_s=phase.ramp_s / time_scale,
        spawn_rate=rate,
        actions=actions,
    )


def spawn_rate_for(previous_users: int, phase: Phase) -> float:
    """Users per second that take the runner from `previous_users` to the phase's target.

    "As fast as the runner allows" is the whole change within about one second (one shape tick).
    """
    if phase.spawn_rate is not None:
        return float(phase.spawn_rate)
    delta = abs(phase.target_users - previous_users)
    if phase.ramp_s > 0 and delta:
        return delta / phase.ramp_s
    return float(max(1, delta))
