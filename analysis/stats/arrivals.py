"""Open-loop runs: was the target arrival rate offered, how late was the generator, what did users feel?

Open-loop records carry `due_wall` (when the arrival schedule said the request was due) and
`lateness_ms` (due -> sent): loadline/core/records.py. Per phase, in model time (analysis/data/timescale.py):
- target_rate: the phase's `target_rate` (a rate shape), else the run's --arrival-rate option;
- achieved_rate: arrivals *sent* in the phase per second (first attempts; for sessions, first turns;
  a replayed trace's every request):
  what the server was actually offered, whatever the schedule said;
- lateness percentiles, and TTFT / E2E measured from due (lateness + latency from sent): what a user
  would have felt, coordinated omission made visible.

A phase whose generator fell behind is flagged when either holds:
- achieved_rate < 98 % of target, by more than the schedule's own noise (loadline/core/arrival_rate.py);
- lateness P95 > 10 % of the SLO's TTFT P95 limit (LATENESS_SHARE; 80 ms with DOMAIN.md's default
  800 ms; E2E's 1,500 ms when TTFT is not judged): lateness adds one for one to what the user feels,
  and a generator eating a tenth of the latency budget changes the verdict at the SLO's edge
  (the same 10 % that validity.py allows the measurement floor).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from loadline.core.arrival_rate import fell_short, gap_cv2
from loadline.core.records import Status
from loadline.core.slo import SLO

LATENESS_SHARE = 0.10
PERCENTILES = (50, 95, 99)


def is_open_loop(requests: pd.DataFrame) -> bool:
    return "due_wall" in requests.columns and bool(requests["due_wall"].notna().any())


def lateness_limit_ms(slo: SLO) -> float | None:
    """Lateness P95 above this (model ms) means the generator fell behind (module docstring)."""
    budget = slo.ttft_p95_ms or slo.e2e_p95_ms
    return None if budget is None else LATENESS_SHARE * budget


def arrivals_of(requests: pd.DataFrame) -> pd.DataFrame:
    """One row per arrival: first attempts of scheduled requests (for sessions, the first turn; a
    replayed trace schedules every request, each turn at its own time, and counts turns from 0 or 1)."""
    rows = requests[requests["due_wall"].notna() & (requests["attempt"] == 0)]
    if "trace_index" in rows.columns and rows["trace_index"].notna().any():
        return rows
    return rows[rows["turn"] == 0] if (rows["session_id"] != "").any() else rows


def _percentiles(values: pd.Series, name: str) -> dict[str, float | None]:
    values = values.dropna()
    return {f"{name}_p{p}_ms": (float(np.percentile(values, p)) if len(values) else None) for p in PERCENTILES}


def phase_arrivals(
    requests: pd.DataFrame, phases: pd.DataFrame, default_rate: float | None, slo: SLO, cv2: float = 1.0
) -> pd.DataFrame:
    """One row per phase with open-loop traffic: target vs achieved rate (model /s), lateness, latency from due."""
    scheduled = requests[requests["due_wall"].notna()]
    arrivals = arrivals_of(requests)
    limit = lateness_limit_ms(slo)
    rows = []
    first_due = float(scheduled["due_wall"].min()) if len(scheduled) else math.inf
    for _, phase in phases.iterrows():
        # the schedule starts when the arrival users do (after their spawn), not when the phase opens
        start, end = max(float(phase["start_wall"]), first_due), float(phase["end_wall"])
        if not end > start:
            continue
        sent = arrivals[(arrivals["start_wall"] >= start) & (arrivals["start_wall"] < end)]
        inside = scheduled[(scheduled["start_wall"] >= start) & (scheduled["start_wall"] < end)]
        target = phase.get("target_rate") if "target_rate" in phases.columns else None
        target = float(target) if target is not None and pd.notna(target) and target > 0 else default_rate
        if target is None and not len(sent):
            continue
        achieved = len(sent) / (end - start)
        done = inside[inside["status"] == Status.OK]
        row = {
            "phase": phase["label"],
            "target_rate": target,
            "achieved_rate": achieved,
            "arrivals": len(sent),
            **_percentiles(inside["lateness_ms"], "lateness"),
            **_percentiles(done["ttft_ms"], "ttft"),
            **_percentiles(done["ttft_ms"] + done["lateness_ms"], "ttft_from_due"),
            **_percentiles(done["e2e_ms"], "e2e"),
            **_percentiles(done["e2e_ms"] + done["lateness_ms"], "e2e_from_due"),
        }
        reasons = []
        row["short"] = bool(target and fell_short(len(sent), target * (end - start), cv2))
        if row["short"]:
            assert target is not None  # short only with a target
            reasons.append(f"achieved {achieved:.3g}/s of the target {target:.3g}/s ({achieved / target:.0%})")
        p95 = row["lateness_p95_ms"]
        if limit is not None and p95 is not None and p95 > limit:
            reasons.append(f"lateness P95 {p95:.0f} ms > {limit:.0f} ms (10 % of the SLO's latency budget)")
        row["sustained"] = not reasons
        row["behind"] = "; ".join(reasons)
        rows.append(row)
    return pd.DataFrame(rows)


def summary(requests: pd.DataFrame, phases: pd.DataFrame, options: dict, slo: SLO) -> dict:
    """The report's open-loop section: {} for closed-loop runs."""
    if not len(requests) or not is_open_loop(requests):
        return {}
    rate = options.get("arrival_rate")
    default_rate = float(rate) if isinstance(rate, (int, float)) and rate > 0 and math.isfinite(rate) else None
    cv2 = gap_cv2(options.get("arrival"), options.get("burstiness"))
    table = phase_arrivals(requests, phases, default_rate, slo, cv2)
    behind = table[~table["sustained"]] if len(table) else table
    notes = [f"the target rate was not sustained in {row['phase']}: {row['behind']}" for _, row in behind.iterrows()]
    return {
        "process": options.get("arrival"),
        "burstiness": options.get("burstiness"),
        "max_inflight": options.get("max_inflight"),
        "lateness_limit_ms": lateness_limit_ms(slo),
        "sustained": not notes,
        "notes": notes,
        "phases": table.to_dict(orient="records"),
    }
