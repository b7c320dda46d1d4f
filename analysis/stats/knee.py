"""Knee, break point, maximum SLO-compliant throughput and safe operating point.

Knee method (stated in the report): order the load levels by concurrency (users). Between two
consecutive levels with user ratio r, compare the relative throughput gain g = rps2/rps1 - 1 with
the relative latency growth l = p50_2/p50_1 - 1 of E2E. The first step where throughput stopped
growing (g < 0.5 x (r - 1): the added users bought less than half the throughput they would if
the service scaled linearly) while latency climbed faster than throughput (l > g) is where more
concurrency only adds queueing; the knee is the level before that step, i.e. the highest level
that still scaled. The median is used rather than P95 because short steps give P95 few samples.
Both conditions matter: latency alone also grows below saturation (bigger batches decode slower),
and throughput alone can stall from noise at low load.

Rate phases (open loop, shapes/rate_steps.py) are load levels by their offered arrival rate
(`target_rate`) instead of users: the same test with r = the rate ratio; and a rate phase that did
not carry its rate (fewer completions than the rate asks for, beyond the schedule's noise:
loadline/core/arrival_rate.py) breaks, since past that point the offered load is not what was served.

Break point: the first phase, in time order, that breaks the SLO's latency or error criteria, with
enough samples to say so: a phase that failed only on per-request percentiles from fewer requests
than such a percentile needs to stand apart from the slowest request (loadline/core/judge.py
`min_samples`: 76 for a P95, 396 for a P99) is "not enough samples", not a break. In a
run of rate phases it is the lowest offered rate that broke (a drain at rate 0 aside): a rate sweep
floods the server before it probes lower rates (shapes/rate_sweep.py), and the flood breaking first
in time says nothing about where the rates start to break.
Safe operating point: 60-70 % of the break point's throughput (DOMAIN.md: the break point is the true
capacity); without a break point 60-70 % of the highest SLO-compliant throughput, flagged as a lower
bound. When the break point carried less than the best phase that met the SLO (an overload that made
the server complete fewer requests, e.g. preemption past its KV cache), that phase's throughput is the
capacity the run showed, and the basis. The matching users are read
off the rising part of the throughput-vs-users curve (linear interpolation), not scaled from the
break point's users: past saturation users only add queueing, so 60 % of them can still be too many.
No safe operating point when the break came with time, not load (`broke_with_time`): a phase that
broke at a load an earlier phase had met the SLO at, with no heavier phase between them (a soak's
window after its first ones, a leak's restarts). A lower load then only delays the same failure.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from loadline.analysis.stats.compliance import compliant_phases, judge_phase
from loadline.core.arrival_rate import fell_short, gap_cv2
from loadline.core.judge import too_few_samples
from loadline.core.slo import SLO

MIN_LEVELS = 3
LINEAR_SHARE = 0.5  # below this share of linear scaling, throughput "stopped growing"
SAFE_LOW, SAFE_HIGH = 0.6, 0.7


def _num(value) -> float | None:
    return None if value is None or pd.isna(value) else round(float(value), 3)


def level_column(table: pd.DataFrame) -> str:
    """What a load level is: the offered arrival rate for rate phases, else the users."""
    return "target_rate" if "target_rate" in table.columns and table["target_rate"].notna().any() else "users"


def _point(row: pd.Series) -> dict:
    rate = _num(row.get("target_rate"))
    return {
        **({"target_rate": rate} if rate is not None else {}),
        "users": _num(row["users"]),
        "rps": _num(row["rps"]),
        "output_tokens_per_s": _num(row["output_tokens_per_s"]),
        "e2e_p50_ms": _num(row["e2e_p50_ms"]),
        "e2e_p95_ms": _num(row["e2e_p95_ms"]),
        "e2e_p99_ms": _num(row["e2e_p99_ms"]),
        "phase_index": int(row["phase_index"]),
        "label": str(row["label"]),
    }


def load_curve(table: pd.DataFrame) -> pd.DataFrame:
    """One row per load level (the latest phase at that level), ordered by users (or offered rate)."""
    level = level_column(table)
    usable = table[
        table[level].notna()
        & (table[level] > 0)
        & (table["ok"] > 0)
        & table["e2e_p50_ms"].notna()
        & table["rps"].notna()
    ]
    usable = usable[~usable["kind"].isin(["recover", "burst"])]  # transients, not steady load levels
    return usable.drop_duplicates(level, keep="last").sort_values(level).reset_index(drop=True)


def find_knee(table: pd.DataFrame) -> dict:
    curve = load_curve(table)
    level = level_column(table)
    unit = "req/s offered" if level == "target_rate" else "users"
    method = (
        "first step where throughput gained < half of the added users' share and E2E P50 grew faster than "
        "throughput; knee = the level before it"
    )
    if len(curve) < MIN_LEVELS:
        return {
            "found": False,
            "method": method,
            "reason": f"needs at least {MIN_LEVELS} load levels with different user counts, got {len(curve)}",
        }
    for i in range(1, len(curve)):
        before, after = curve.iloc[i - 1], curve.iloc[i]
        if before["rps"] <= 0 or before["e2e_p50_ms"] <= 0:
            continue
        gain = after["rps"] / before["rps"] - 1.0
        growth = after["e2e_p50_ms"] / before["e2e_p50_ms"] - 1.0
        added = after[level] / before[level] - 1.0
        if gain < LINEAR_SHARE * added and growth > max(gain, 0.0):
            return {
                "found": True,
                **_point(before),
                "method": method,
                "reason": (
                    f"from {before[level]:g} to {after[level]:g} {unit} throughput changed {gain:+.0%} "
                    f"while E2E P50 grew {growth:+.0%}"
                ),
            }
    last = curve.iloc[-1]
    return {
        "found": False,
        "method": method,
        "highest_tested": _point(last),
        "reason": f"throughput kept scaling with the load up to {last[level]:g} {unit}: no knee in the tested range",
    }


def find_break_point(table: pd.DataFrame, slo: SLO, streaming: bool | None = None) -> dict:
    """The first phase the SLO judge fails (loadline/core/judge.py), or among rate phases the lowest
    offered rate that failed; `streaming`: the run's traffic."""
    broken, thin = [], []
    for _, row in table.sort_values("start_wall").iterrows():
        if row["ok"] + row["errors"] <= 0:
            continue
        failed = judge_phase(row, slo, streaming).failed
        carried = _not_carried(row)
        if failed and not carried and all(too_few_samples(c.key, row["ok"]) for c in failed):
            # its percentile is its slowest request's: one long prompt's prefill is not a break point
            thin.append(
                f"{row['label']}: {', '.join(c.describe() for c in failed)} from {int(row['ok'])} requests, "
                "not enough samples"
            )
            continue
        reasons = [c.describe() for c in failed] + carried
        if reasons:
            broken.append((row, reasons))
    if level_column(table) == "target_rate":
        rated = [(row, reasons) for row, reasons in broken if row.get("target_rate", 0) > 0]
        broken = sorted(rated, key=lambda found: found[0]["target_rate"]) or broken  # stable: ties in time order
    if broken:
        row, reasons = broken[0]
        return {"found": True, **_point(row), "reasons": reasons, "not_enough_samples": thin}
    if thin:
        return {
            "found": False,
            "reasons": [],
            "not_enough_samples": thin,
            "reason": "not enough samples: " + "; ".join(thin) + " (a P95 needs 76, a P99 396)",
        }
    return {
        "found": False,
        "reasons": [],
        "reason": "every phase met the SLO: the break point lies beyond the tested load",
    }


def _not_carried(row: pd.Series) -> list[str]:
    """A rate phase that served fewer requests than it offered (rps and target_rate in the same time base)."""
    rate = row.get("target_rate")
    if rate is None or pd.isna(rate) or not row["rps"] > 0:
        return []
    seconds = row["requests"] / row["rps"]
    if fell_short(row["rps"] * seconds, rate * seconds, gap_cv2("poisson", None)):
        return [f"carried {row['rps']:.3g} req/s of the {rate:.3g}/s offered"]
    return []


def max_compliant_throughput(table: pd.DataFrame, slo: SLO, streaming: bool | None = None) -> dict:
    good = compliant_phases(table, slo, streaming)
    good = good[good["rps"].notna()]
    good = good[[not _not_carried(row) for _, row in good.iterrows()]]  # an unserved offer is no compliance
    if good.empty:
        return {"found": False, "reason": "no phase met the SLO"}
    return {"found": True, **_point(good.loc[good["rps"].idxmax()])}


TRANSIENT = ("burst", "recover", "ramp")  # phase kinds whose load is not held steady through the phase


def broke_with_time(table: pd.DataFrame, break_point: dict, slo: SLO, streaming: bool | None = None) -> dict | None:
    """The earlier phase that met the SLO at no less load than the break point's, with no heavier
    phase between the two: {"label", "level"}; None when the break came with a higher load (or none)."""
    if not break_point.get("found") or "phase_index" not in table:
        return None
    level = level_column(table)
    rows = table.sort_values("start_wall").reset_index(drop=True)
    at = rows.index[rows["phase_index"] == break_point["phase_index"]]
    if not len(at) or pd.isna(rows.at[at[0], level]):
        return None
    if rows.loc[at[0]].get("kind") in TRANSIENT:
        return None  # a burst that broke where another held: the edge of its transient, not time
    broke_at = float(rows.at[at[0], level])
    met = set(compliant_phases(table, slo, streaming)["phase_index"])
    for _, row in rows.iloc[: at[0]][::-1].iterrows():  # from the break back in time
        load = row[level]
        if pd.isna(load) or row["ok"] + row["errors"] <= 0:
            continue
        if float(load) > broke_at:
            return None  # a heavier phase between: it may have left the damage (a burst, a flood)
        steady = row.get("kind") not in TRANSIENT  # a ramp's load was partly lower; a recovery's still settling
        if steady and float(load) >= broke_at and row["phase_index"] in met and not _not_carried(row):
            return {"label": str(row["label"]), "level": broke_at}
    return None


def safe_operating_point(
    table: pd.DataFrame, break_point: dict, best: dict | None = None, with_time: dict | None = None
) -> dict:
    """`best`: max_compliant_throughput(), the basis when the break point was not reached, or when it
    carried more than the break point did; `with_time`: broke_with_time(), which leaves no safe load."""
    if with_time:
        unit = "req/s offered" if level_column(table) == "target_rate" else "users"
        return {
            "found": False,
            "none": True,
            "reason": (
                f"none from this run: {break_point['label']} broke at {with_time['level']:g} {unit}, a "
                f"load {with_time['label']} met the SLO at, with no heavier load between: the service "
                "did not hold that load over time (a leak, a drift, or a load at its limit), so 60-70 % "
                "of it is not known to be safe either (see the bottleneck verdict)"
            ),
        }
    reason = "60-70 % of the break point"
    if break_point.get("found"):
        basis, lower_bound = break_point, False
        # carried more, as said (3 significant digits): a tie to that precision keeps the break point
        if best and best.get("found") and float(f"{best['rps'] or 0:.3g}") > float(f"{break_point['rps'] or 0:.3g}"):
            basis = best
            reason = (
                f"60-70 % of the highest SLO-compliant throughput, {best['rps']:.3g} req/s: more than the "
                f"break point carried, {break_point['rps']:.3g} req/s"
            )
    elif best and best.get("found"):
        basis, lower_bound = best, True
        reason = (
            "60-70 % of the highest SLO-compliant throughput: the break point was not reached, so this is a lower bound"
        )
    else:
        return {"found": False, "reason": "no phase met the SLO and none broke it"}

    if basis["rps"] is None or math.isnan(basis["rps"]):
        return {"found": False, "reason": "the basis phase has no throughput"}
    rps = [round(basis["rps"] * SAFE_LOW, 3), round(basis["rps"] * SAFE_HIGH, 3)]
    return {
        "found": True,
        "rps": rps,
        "users": _users_at(table, rps),
        "basis_label": basis["label"],
        "lower_bound": lower_bound,
        "reason": reason,
    }


def _users_at(table: pd.DataFrame, rps: list[float]) -> list[float] | None:
    """Users that carried the given throughputs on the rising part of the load curve (None if unknown)."""
    curve = load_curve(table)
    if len(curve) < 2 or level_column(table) != "users":
        return None
    rising = curve.iloc[: int(curve["rps"].to_numpy().argmax()) + 1]
    rates, users = rising["rps"].to_numpy(dtype=float), rising["users"].to_numpy(dtype=float)
    keep = np.concatenate([[True], np.diff(rates) > 0])  # np.interp needs increasing x
    rates, users = np.concatenate([[0.0], rates[keep]]), np.concatenate([[0.0], users[keep]])
    return [round(float(np.interp(r, rates, users)), 1) for r in rps]
