"""How far a twin's prediction may be trusted: a stated error that widens outside what the run covered.

Inside the fitted range the error is the twin's own: the worst per-phase error of its replay of the
fitted run when that was measured (`loadline twin fit --replay`), else BASE_ERROR, the bound the
simulator-as-truth validation holds (docs/twin.md). Each way a what-if leaves the range multiplies
the error by 1 + ln(ratio), ratio >= 1 being how far it went (2x the users: x1.69; 4x: x2.39):
the cost model's terms are fitted where the run put weight, so their error grows with extrapolation,
slowly (the terms are physical) but without bound. A what-if on a parameter the run could not
identify (grade assumed or bounded) is named, not hidden in a number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from loadline.analysis.twin.model import ASSUMED, BOUNDED, TwinProfile

BASE_ERROR = 0.10  # relative; the simulator-as-truth validation's bound (docs/twin.md)


@dataclass
class Uncertainty:
    error: float  # relative, for throughput and latency figures of the phase
    outside: list[str] = field(default_factory=list)  # how the what-if leaves the fitted range

    @property
    def inside(self) -> bool:
        return not self.outside


def base_error(profile: TwinProfile) -> float:
    errors = [
        abs(float(v)) for row in profile.goodness for k, v in row.items() if k.endswith("_error") and v is not None
    ]
    return max(BASE_ERROR, max(errors)) if errors else BASE_ERROR


def _widen(error: float, ratio: float) -> float:
    return error * (1.0 + math.log(max(ratio, 1.0)))


def changes_outside(profile: TwinProfile, changes: dict[str, object]) -> tuple[float, list[str]]:
    """(error multiplier, reasons) for the changed simulator keys."""
    values = profile.values()
    grades = {p.name: p.grade for p in profile.parameters}
    factor, reasons = 1.0, []
    for name, new in changes.items():
        old = values.get(name)
        if name in grades and grades[name] in (ASSUMED, BOUNDED) and name != "replicas":
            reasons.append(f"{name} was not identified by the run ({grades[name]}): the prediction rests on it")
        if (
            isinstance(old, (int, float))
            and not isinstance(old, bool)
            and isinstance(new, (int, float))
            and old > 0
            and new > 0
        ):
            ratio = max(float(new) / float(old), float(old) / float(new))
            if name == "max_num_seqs" and profile.fitted_range.cap is None:
                continue  # no cap was seen: the change is only a cap the run did not reach
            if ratio > 1.5 and name not in ("replicas",):
                factor *= 1.0 + math.log(ratio)
                reasons.append(f"{name} {old:g} -> {float(new):g} ({ratio:.2g}x the fitted value)")
    return factor, reasons


def for_phase(
    profile: TwinProfile,
    base: float,
    change_factor: float,
    change_reasons: list[str],
    users: float | None,
    rps: float | None,
    replicas: int,
    prompt_p95: float | None,
) -> Uncertainty:
    """The stated error of one predicted phase; load is compared per replica with the fitted run's."""
    rng = profile.fitted_range
    error, outside = base * change_factor, list(change_reasons)
    per_replica_fitted = rng.max_rps / max(profile.replicas, 1)
    if rps is not None and per_replica_fitted > 0 and rps / max(replicas, 1) > 1.1 * per_replica_fitted:
        ratio = rps / max(replicas, 1) / per_replica_fitted
        error = _widen(error, ratio)
        outside.append(
            f"{rps / max(replicas, 1):.3g} req/s per replica, {ratio:.2g}x the most the run carried ({per_replica_fitted:.3g})"
        )
    elif (
        users is not None
        and rng.max_users > 0
        and users / max(replicas, 1) > 1.1 * rng.max_users / max(profile.replicas, 1)
    ):
        ratio = users / max(replicas, 1) / (rng.max_users / max(profile.replicas, 1))
        error = _widen(error, ratio)
        outside.append(f"{users:g} users, {ratio:.2g}x the run's most per replica ({rng.max_users:g})")
    if prompt_p95 is not None and rng.prompt_tokens[1] > 0 and prompt_p95 > 1.1 * rng.prompt_tokens[1]:
        ratio = prompt_p95 / rng.prompt_tokens[1]
        error = _widen(error, ratio)
        outside.append(f"prompts p95 {prompt_p95:.0f} tokens, {ratio:.2g}x the run's ({rng.prompt_tokens[1]})")
    return Uncertainty(error, outside)
