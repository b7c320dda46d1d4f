"""Recovery after a surge or a fault: how long until latency and errors were back to normal.

The drill question (DOMAIN.md "traffic surprise"): at low but non-zero traffic, triple it at once,
kill an instance, and check that the service recovers within seconds. Pure functions: request
records and the phase timeline in, one dict per event out.

An **event** is a phase whose target users are at least `surge_factor` x the previous phase's
(a surge; the previous phase must have had users), or a `burst` phase offering a higher arrival rate
than the previous one (a trace replay's surge, whose users stay one scheduler per process) and/or a phase during which shapes/drill.py sent
(or skipped) a fault action: a row of the run folder's faults.csv (loadline.core.schema.FaultRow)
whose `ts` lies in the phase. For each event:

- baseline: P95 TTFT, P95 E2E and error rate of the preceding phase (ok requests; errors / (ok + errors));
- the recovery clock starts at the *last* disturbance in the phase: the phase start for a surge, the
  moment the last successful fault action was sent when there was one;
- from there, records are cut into windows of `window_s` model seconds by start time; a window is
  **healthy** when it has ok requests, its own error rate is no higher than the baseline's (failed
  requests count in the window in which they *ended*, when `end_wall` is known: a kill fails the
  requests already in flight, and that is when the service failed), and its
  rolling P95 TTFT and P95 E2E are each within `latency_factor` x baseline or under the SLO's P95
  limit (whichever is looser: a tripled load may settle above the old latency yet inside the SLO).
  The rolling P95 of a window is over the ok requests started in it and, when those are fewer than
  `min_samples`, in as many preceding windows (after the disturbance) as it takes: a P95 of three
  samples is their maximum, and one slow request would otherwise read as "not recovered";
- impact_s = start of the first unhealthy window (None: no visible impact, recovery_s = 0);
  recovery_s = start of the first healthy window after it that begins a run of healthy windows
  lasting `hold_s` (model seconds), measured from the disturbance; None when that never happens
  before the phase ends (recovered = False). Resolution: one window. baseline_recovery_s is the
  same without the SLO's allowance: back within `latency_factor` x the baseline itself (a service
  that stayed inside the SLO on half its replicas recovers at once by the first, not the second). Waiting for the first bad
  window matters: after a kill the survivors' queues take a while to build up, and healthy windows
  before that are not a recovery. relapse_s = unhealthy window time after the recovery.
- peak P95s and error rate over every window of the phase, failed requests by error class.

Takes its tables in model time (analysis/data/timescale.py) and answers in model time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from loadline.analysis.data.load import RunData, empty_table
from loadline.core import schema
from loadline.core.records import Status
from loadline.core.slo import SLO

MAX_WINDOWS = 100_000  # bounds the window loop on absurd inputs (a 2 s window over ~2 days)


@dataclass(frozen=True)
class RecoveryRule:
    window_s: float = 2.0  # model seconds per window
    hold_s: float = 10.0  # model seconds the healthy windows must last to call it recovered
    latency_factor: float = 1.5  # "back to normal" = within this x the baseline's P95 (or under the SLO)
    surge_factor: float = 2.0  # a phase whose target is >= this x the previous one's is a surge
    min_samples: int = 10  # ok requests behind a window's rolling P95 (see the module docstring)


@dataclass(frozen=True)
class Event:
    position: int  # row of the phases table
    surge_factor: float | None  # target users / previous phase's; None when not a surge
    faults: tuple[str, ...]  # the phase's fault actions, one line each ("POST /admin/... ok")
    disturbance_wall: float  # where the recovery clock starts


def describe_fault(fault: pd.Series) -> str:
    """One line for the report: "POST /admin/replicas/0/kill {...} ok" / "... failed (HTTP 500)"."""
    body = "" if fault["body"] in ("", "{}") else f" {fault['body']}"
    detail = f" ({fault['detail']})" if fault["detail"] else ""
    return f"{fault['method']} {fault['path']}{body} {fault['outcome']}{detail}"


def find_events(
    phases: pd.DataFrame, faults: pd.DataFrame | None = None, surge_factor: float = RecoveryRule.surge_factor
) -> list[Event]:
    faults = empty_table(schema.FAULTS) if faults is None else faults
    sent_at = pd.to_numeric(faults["ts"], errors="coerce").to_numpy(dtype=float)
    events = []
    for position in range(len(phases)):
        phase = phases.iloc[position]
        factor = None
        if position > 0 and phase["kind"] in ("burst", "stage"):
            before, now = phases.iloc[position - 1]["target_users"], phase["target_users"]
            if pd.notna(before) and pd.notna(now) and before > 0 and now >= surge_factor * before:
                factor = float(now) / float(before)
            elif phase["kind"] == "burst" and (rates := _rate_surge(phases, position)) is not None:
                factor = rates
        start, end = float(phase["start_wall"]), float(phase["end_wall"])
        mine = faults[(sent_at >= start) & (sent_at < end)].sort_values("ts", kind="stable")
        if factor is None and mine.empty:
            continue
        sent = mine.loc[mine["outcome"] == schema.FAULT_OK, "ts"].astype(float).tolist()
        events.append(
            Event(position, factor, tuple(describe_fault(f) for _, f in mine.iterrows()), max([start, *sent]))
        )
    return events


def _level(rows: pd.DataFrame) -> dict[str, float]:
    """P95 TTFT/E2E (model ms) of ok rows, error rate, counts; cancelled attempts count as neither."""
    status = rows["status"].astype(str)
    ok = rows[(status == Status.OK).to_numpy()]
    errors = int((status == Status.ERROR).sum())

    return {
        "requests": len(ok) + errors,
        "ok": len(ok),
        "errors": errors,
        "error_rate": errors / (len(ok) + errors) if len(ok) + errors else math.nan,
        "ttft_p95_ms": _p95(ok["ttft_ms"].to_numpy(dtype=float)),
        "e2e_p95_ms": _p95(ok["e2e_ms"].to_numpy(dtype=float)),
    }


def windows(
    requests: pd.DataFrame,
    start_wall: float,
    end_wall: float,
    window_s: float = RecoveryRule.window_s,
    min_samples: int = RecoveryRule.min_samples,
) -> pd.DataFrame:
    """Per window of `window_s` model seconds from start_wall: t_s (model s from start), the window's
    own requests/ok/errors/error_rate, and rolling P95 TTFT/E2E in model ms over `samples` ok requests."""
    count = min(MAX_WINDOWS, max(0, math.ceil((end_wall - start_wall) / window_s - 1e-9)))
    rows = requests.sort_values("start_wall", kind="stable")
    starts = rows["start_wall"].to_numpy(dtype=float)
    status = rows["status"].astype(str).to_numpy()
    ok_mask = status == Status.OK
    ok_before = np.concatenate([[0], np.cumsum(ok_mask)])  # ok requests before each position
    ttft, e2e = (rows[c].to_numpy(dtype=float) for c in ("ttft_ms", "e2e_ms"))
    bounds = [min(end_wall, start_wall + n * window_s) for n in range(count + 1)]
    edges = np.searchsorted(starts, bounds, side="left")
    failed = rows[status == Status.ERROR]
    failed_at = np.sort(failed["end_wall" if "end_wall" in failed else "start_wall"].to_numpy(dtype=float))
    error_edges = np.searchsorted(failed_at, bounds, side="left")
    out = []
    for n in range(count):
        low, high = edges[n], edges[n + 1]
        first = n  # widen back over earlier windows until the P95 has min_samples ok requests
        while first > 0 and ok_before[high] - ok_before[edges[first]] < min_samples:
            first -= 1
        span = slice(edges[first], high)
        ok, errors = int(ok_mask[low:high].sum()), int(error_edges[n + 1] - error_edges[n])
        out.append(
            {
                "t_s": n * window_s,
                "requests": ok + errors,
                "ok": ok,
                "errors": errors,
                "error_rate": errors / (ok + errors) if ok + errors else math.nan,
                "samples": int(ok_before[high] - ok_before[edges[first]]),
                "ttft_p95_ms": _p95(ttft[span][ok_mask[span]]),
                "e2e_p95_ms": _p95(e2e[span][ok_mask[span]]),
            }
        )
    return pd.DataFrame(
        out, columns=["t_s", "requests", "ok", "errors", "error_rate", "samples", "ttft_p95_ms", "e2e_p95_ms"]
    )


def _p95(values: np.ndarray) -> float:
    values = values[~np.isnan(values)]
    return float(np.percentile(values, 95)) if values.size else math.nan


def limits(
    baseline: dict,
    slo_ttft_p95_ms: float | None,
    slo_e2e_p95_ms: float | None,
    factor: float = RecoveryRule.latency_factor,
) -> dict[str, float]:
    """What counts as "back to normal" (NaN = that metric is not judged)."""

    def loosest(base: float, slo: float | None) -> float:
        options = [v for v in (base * factor, slo) if v is not None and not math.isnan(v)]
        return max(options) if options else math.nan

    rate = baseline.get("error_rate", math.nan)
    return {
        "ttft_p95_ms": loosest(baseline["ttft_p95_ms"], slo_ttft_p95_ms),
        "e2e_p95_ms": loosest(baseline["e2e_p95_ms"], slo_e2e_p95_ms),
        "error_rate": 0.0 if math.isnan(rate) else rate,
    }


def healthy(table: pd.DataFrame, limit: dict[str, float]) -> np.ndarray:
    good = (table["ok"] > 0).to_numpy() & (table["error_rate"].fillna(0.0) <= limit["error_rate"] + 1e-12).to_numpy()
    for column in ("ttft_p95_ms", "e2e_p95_ms"):
        if not math.isnan(limit[column]):
            good &= (table[column] <= limit[column]).to_numpy()  # NaN (no ok request) is not healthy
    return good


def first_stable(good: np.ndarray, hold_windows: int, after: int = 0) -> int | None:
    """Index (>= after) of the first window that starts `hold_windows` healthy windows in a row, else None."""
    run = 0
    for n in range(after, len(good)):
        run = run + 1 if good[n] else 0
        if run >= hold_windows:
            return n - hold_windows + 1
    return None


def recovery_window(good: np.ndarray, hold_windows: int) -> tuple[int | None, int | None]:
    """(first unhealthy window, first window of the stable recovery after it); see the module docstring."""
    bad = np.flatnonzero(~good)
    if bad.size == 0:
        return None, 0
    return int(bad[0]), first_stable(good, hold_windows, int(bad[0]))


def _errors_by_class(rows: pd.DataFrame) -> dict[str, int]:
    failed = rows[rows["status"] == Status.ERROR]
    classes = failed["error_class"].fillna("").astype(str).replace("", "unknown")
    return {name: int(n) for name, n in classes.value_counts().sort_index().items()}


def _rounded(level: dict) -> dict:
    return {k: (round(v, 4) if isinstance(v, float) and not math.isnan(v) else v) for k, v in level.items()}


def _int_or_none(value) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def _rate_surge(phases: pd.DataFrame, position: int) -> float | None:
    """An open-loop burst (a trace's surge: shapes/trace.py): the rate it offers over the previous phase's,
    when higher. Its users do not change (one scheduler per process); its arrival rate does."""
    if "target_rate" not in phases.columns:
        return None
    before, now = phases.iloc[position - 1]["target_rate"], phases.iloc[position]["target_rate"]
    if pd.notna(before) and pd.notna(now) and before > 0 and now > before:
        return round(float(now) / float(before), 2)
    return None


def event_recovery(
    requests: pd.DataFrame,
    phases: pd.DataFrame,
    event: Event,
    slo_ttft_p95_ms: float | None = None,
    slo_e2e_p95_ms: float | None = None,
    rule: RecoveryRule = RecoveryRule(),
) -> dict:
    """The recovery entry of one event (see the module docstring); times in model seconds."""
    phase = phases.iloc[event.position]
    start, end = float(phase["start_wall"]), float(phase["end_wall"])
    starts = requests["start_wall"].to_numpy(dtype=float)
    ends = (requests["end_wall"] if "end_wall" in requests else requests["start_wall"]).to_numpy(dtype=float)
    disturbance = float(event.disturbance_wall)
    # The event's casualties: what ended from the disturbance to the phase's end, wherever it started
    # (a kill fails streams that began in the phase before).
    in_phase = requests[(ends >= disturbance) & (ends < end) & (starts < end)]
    baseline: dict = {"phase": None, "ttft_p95_ms": math.nan, "e2e_p95_ms": math.nan, "error_rate": math.nan}
    if event.position > 0:
        before = phases.iloc[event.position - 1]
        low, high = float(before["start_wall"]), float(before["end_wall"])
        # the healthy level: what finished before the disturbance, so its casualties don't raise the bar
        baseline = {
            "phase": str(before["label"]),
            **_level(requests[(starts >= low) & (starts < high) & (ends < disturbance)]),
        }
    limit = limits(baseline, slo_ttft_p95_ms, slo_e2e_p95_ms, rule.latency_factor)
    after = windows(requests, event.disturbance_wall, end, rule.window_s, rule.min_samples)
    good = healthy(after, limit)
    hold = max(1, math.ceil(rule.hold_s / rule.window_s - 1e-9))
    impact, found = recovery_window(good, hold)
    _, back_to_baseline = recovery_window(healthy(after, limits(baseline, None, None, rule.latency_factor)), hold)
    whole = windows(requests, start, end, rule.window_s, rule.min_samples)
    peak = {
        c: float(whole[c].max()) if whole[c].notna().any() else math.nan
        for c in ("ttft_p95_ms", "e2e_p95_ms", "error_rate")
    }
    what = [f"surge x{event.surge_factor:g}"] if event.surge_factor else []
    what += ["fault"] if event.faults else []
    return {
        "event": " + ".join(what),
        "phase": str(phase["label"]),
        "phase_index": event.position,
        "users_from": _int_or_none(phases.iloc[event.position - 1]["target_users"]) if event.position > 0 else None,
        "users_to": _int_or_none(phase["target_users"]),
        "faults": list(event.faults),
        "disturbance_at_s": round(event.disturbance_wall - start, 3),
        "phase_s": round(end - start, 3),
        "baseline": _rounded(baseline),
        "limits": _rounded(limit),
        "peak": _rounded(peak),
        "recovered": found is not None,
        "impact_s": None if impact is None else impact * rule.window_s,
        "recovery_s": None if found is None else found * rule.window_s,
        "relapse_s": None if found is None else int((~good[found:]).sum()) * rule.window_s,
        "baseline_recovery_s": None if back_to_baseline is None else back_to_baseline * rule.window_s,
        "window_s": rule.window_s,
        "hold_s": rule.hold_s,
        "requests": int((in_phase["status"] != Status.CANCELLED).sum()),
        "failed": int((in_phase["status"] == Status.ERROR).sum()),
        "errors_by_class": _errors_by_class(in_phase),
        "windows": [_rounded({**row, "healthy": bool(ok)}) for row, ok in zip(after.to_dict("records"), good)],
    }


def recovery(
    requests: pd.DataFrame,
    phases: pd.DataFrame,
    slo_ttft_p95_ms: float | None = None,
    slo_e2e_p95_ms: float | None = None,
    rule: RecoveryRule = RecoveryRule(),
    faults: pd.DataFrame | None = None,
) -> list[dict]:
    """One entry per surge or fault event of the run (see the module docstring); [] when none.

    `faults`: the run's faults.csv (loadline.analysis.data.load.RunData.faults); None = no fault actions."""
    if requests.empty or phases.empty or phases["end_wall"].isna().all():
        return []
    phases = phases[phases["end_wall"].notna()].reset_index(drop=True)
    return [
        event_recovery(requests, phases, event, slo_ttft_p95_ms, slo_e2e_p95_ms, rule)
        for event in find_events(phases, faults, rule.surge_factor)
    ]


def from_run(run: RunData, slo: SLO) -> list[dict]:
    """`recovery` for a run in model time (loadline.analysis.data.timescale.model_run), judged against the SLO's P95 limits."""
    return recovery(run.requests, run.phases, slo.ttft_p95_ms, slo.e2e_p95_ms, faults=run.faults)
