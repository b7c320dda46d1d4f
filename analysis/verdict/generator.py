"""Was the load generator saturated or behind? Saturated: judged from generator_metrics.csv
(loadline.runtime.selfcheck samples CPU and loop lag in every worker; `loadline report` never imports
the sampler's gevent/psutil). Behind: judged from the records' `read_delay_ms` (kernel clock).
The thresholds, and why, are in loadline/core/saturation.py."""

from __future__ import annotations

import numpy as np
import pandas as pd

from loadline.analysis.data.columns import numbers
from loadline.client.watch_budget import BUDGET as WATCH_BUDGET
from loadline.core.records import Status
from loadline.core.runfolder import GENERATOR_SAMPLE_INTERVAL_S
from loadline.core.runsettings import model_value

# the thresholds and why: loadline/core/saturation.py (the live web UI reads them too)
from loadline.core.saturation import (
    CPU_SATURATED_PCT,
    LOOP_LAG_SATURATED_MS,
    READ_DELAY_FALLBACK_MS,
    READ_DELAY_MIN_RECORDS,
    READ_DELAY_QUANTILE,
    SUSTAIN_SAMPLES,
    demand_percent,
)


def is_saturated(
    generator: pd.DataFrame | None,
    cpu_pct: float = CPU_SATURATED_PCT,
    lag_ms: float = LOOP_LAG_SATURATED_MS,
    sustain: int = SUSTAIN_SAMPLES,
) -> tuple[bool, list[str]]:
    """Was any worker saturated for a sustained stretch? Returns (saturated, evidence lines).

    A worker is saturated when the rolling median (over `sustain` consecutive samples) of its demand
    for its core (CPU % plus the % it waited for a core a neighbour held) reaches `cpu_pct`, or that
    of its loop lag reaches `lag_ms`. Folders without the wait column (before it, or off Linux) judge CPU alone.
    """
    if generator is None or len(generator) == 0:
        return False, []
    evidence: list[str] = []
    df = generator.copy()
    if "cpu_wait_percent" not in df:
        df["cpu_wait_percent"] = np.nan
    for col in ("ts", "cpu_percent", "loop_lag_ms", "cpu_wait_percent"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    for worker, rows in df.sort_values("ts").groupby("worker_id"):
        if len(rows) < sustain:
            continue
        waits = rows["cpu_wait_percent"].fillna(0.0)  # not measured (off Linux, older folders): CPU alone
        demand = demand_percent(rows["cpu_percent"], waits).rolling(sustain).median()
        lag = rows["loop_lag_ms"].rolling(sustain).median()
        hot_cpu, hot_lag = demand >= cpu_pct, lag >= lag_ms
        if hot_cpu.any() or hot_lag.any():
            hot = hot_cpu | hot_lag
            first = float(rows.loc[hot, "ts"].iloc[0])
            seconds = float(hot.sum()) * _median_step(rows["ts"])
            at = demand.idxmax()
            cpu = float(rows["cpu_percent"].rolling(sustain).median()[at])
            wait = float(waits.rolling(sustain).median()[at])
            waiting = (
                f", waiting for a core a neighbour held {wait:.0f} % (demand median {demand.max():.0f} %)"
                if wait >= 1
                else ""
            )
            evidence.append(
                f"worker {worker}: CPU median {cpu:.0f} %{waiting} (threshold {cpu_pct:g} % of a core), "
                f"event-loop lag median {lag.max():.0f} ms (threshold {lag_ms:g} ms) over {sustain} samples; "
                f"saturated for ~{seconds:.0f} s from t={first - float(df['ts'].min()):.0f} s"
            )
    return bool(evidence), evidence


def watch_rests(generator: pd.DataFrame | None) -> list[str]:
    """One line per worker whose first-bytes watch rested (generator_metrics.csv `watch_resting`).

    While it rests (its thread waited for a core over its budget, loadline/client/watch_budget.py), a
    first token the generator read late takes the stamp of a later token that came in the same read,
    so TTFT can be up to the read delay long; the read delay column still says how late each read was.
    """
    if generator is None or not len(generator) or "watch_resting" not in generator:
        return []
    df = generator.assign(
        ts=pd.to_numeric(generator["ts"], errors="coerce"),
        rest=pd.to_numeric(generator["watch_resting"], errors="coerce"),
    )
    t0, lines = float(df["ts"].min()), []
    for worker, rows in df.sort_values("ts").groupby("worker_id"):
        resting = rows["rest"] == 1
        if not resting.any():
            continue
        step = _median_step(rows["ts"])
        seconds, watched = float(resting.sum()) * step, float(rows["rest"].notna().sum()) * step
        first = float(rows.loc[resting, "ts"].iloc[0]) - t0
        lines.append(
            f"worker {worker}: the first-bytes watch rested ~{seconds:.0f} s of {watched:.0f} s from t={first:.0f} s "
            f"(its thread waited for a core over its {WATCH_BUDGET * 100:.0f} % budget): first tokens read late in that time carry a "
            "later token's stamp, so TTFT there may include the generator's read delay"
        )
    return lines


def _median_step(ts: pd.Series) -> float:
    steps = ts.diff().dropna()
    return float(steps.median()) if len(steps) else GENERATOR_SAMPLE_INTERVAL_S


def behind_phases(requests: pd.DataFrame, phases: pd.DataFrame) -> list[dict]:
    """Phases where the generator read its sockets later than one token gap (loadline/core/saturation.py).

    Per phase (records assigned by start_wall, wall ms): the p99 of `read_delay_ms` over
    kernel-stamped records against the phase's ITL p50 (median of the records' per-request ITL p50),
    or READ_DELAY_FALLBACK_MS without one. Each entry: phase, records, read_delay_p99_ms, itl_p50_ms,
    threshold_ms. User-clock records (TLS) have no read delay: the loop lag speaks for them.
    """
    if not len(requests) or "read_delay_ms" not in requests or not len(phases):
        return []
    delay = numbers(requests["read_delay_ms"])
    kept = (requests["status"] == Status.OK).to_numpy() & ~np.isnan(delay)
    if not kept.any():
        return []
    # numpy arrays of the ok rows, once: a Series mask per phase held ~74 bytes a row (0.7 GB at 10 M rows)
    starts = numbers(requests["start_wall"])[kept]
    delays = delay[kept]
    itl = numbers(requests["itl_p50_ms"])[kept] if "itl_p50_ms" in requests.columns else np.full(len(starts), np.nan)
    out = []
    for phase in phases.itertuples(index=False):
        begin, end = float(phase.start_wall), float(phase.end_wall) if pd.notna(phase.end_wall) else np.inf
        inside = (starts >= begin) & (starts < end)
        if inside.sum() < READ_DELAY_MIN_RECORDS:
            continue
        p99 = float(pd.Series(delays[inside]).quantile(READ_DELAY_QUANTILE))  # pandas' quantile, as before
        gap = pd.Series(itl[inside]).median()
        threshold = float(gap) if pd.notna(gap) and gap > 0 else READ_DELAY_FALLBACK_MS
        if p99 > threshold:
            out.append(
                {
                    "phase": str(phase.label),
                    "records": int(inside.sum()),
                    "read_delay_p99_ms": p99,
                    "itl_p50_ms": None if pd.isna(gap) else float(gap),
                    "threshold_ms": threshold,
                }
            )
    return out


BEHIND_MEANING = (
    "reads carried several tokens while the generator was busy or waiting for its core, so the "
    "earlier ones may be stamped up to that late (a server that wrote them together, catching up or "
    "behind a buffering proxy, shares their stamp too, but counts here only while the generator was busy)"
)


def _behind_numbers(b: dict, scale: float) -> str:
    """One phase's numbers from behind_phases (wall clock), quoted in model time like the rest of the report."""

    def model(name: str) -> float:
        return model_value(name, b[name], scale)

    return (
        f"{b['phase']}: read delay p99 {model('read_delay_p99_ms'):,.1f} ms > "
        + (f"ITL p50 {model('itl_p50_ms'):,.1f} ms" if b["itl_p50_ms"] else f"{model('threshold_ms'):g} ms")
        + (" (ITL p50 0 ms: most gaps merged away)" if b["itl_p50_ms"] == 0 else "")
        + f" ({b['records']} replies, model time)"
    )


def behind_evidence(behind: list[dict], scale: float = 1.0) -> list[str]:
    """One line per phase from behind_phases, in model time (x scale) like the rest of the report."""
    return [f"{_behind_numbers(b, scale)}: {BEHIND_MEANING}" for b in behind]


def behind_summary(behind: list[dict], scale: float = 1.0) -> str:
    """Every phase's numbers, then what they mean, said once (not once per phase)."""
    return "; ".join(_behind_numbers(b, scale) for b in behind) + f": {BEHIND_MEANING}"
