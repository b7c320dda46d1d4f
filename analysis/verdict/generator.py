"""Was the load generator saturated? Judged from generator_metrics.csv (loadline.runtime.selfcheck
samples it in every worker; the thresholds live here, with the judge, so the sampler stays free of them
and `loadline report` never imports the sampler's gevent/psutil)."""

from __future__ import annotations

import pandas as pd

from loadline.core.runfolder import GENERATOR_SAMPLE_INTERVAL_S

# Saturation: sustained, not a blip. A gevent process is single-threaded, so 90 % of one core
# leaves no room for bursts of token events; 20 ms of loop lag is larger than typical ITLs
# (10-25 ms, REFERENCE-serving.md), so every gap measured while it lasts is the client's, not the
# server's. "Sustained" = the median over a rolling window of samples, so single GC pauses or a
# noisy neighbour's spike do not flag a run.
CPU_SATURATED_PCT = 90.0
LOOP_LAG_SATURATED_MS = 20.0
SUSTAIN_SAMPLES = 5


def is_saturated(generator: pd.DataFrame | None, cpu_pct: float = CPU_SATURATED_PCT,
                 lag_ms: float = LOOP_LAG_SATURATED_MS, sustain: int = SUSTAIN_SAMPLES) -> tuple[bool, list[str]]:
    """Was any worker saturated for a sustained stretch? Returns (saturated, evidence lines).

    A worker is saturated when the rolling median (over `sustain` consecutive samples) of its CPU %
    reaches `cpu_pct`, or that of its loop lag reaches `lag_ms`.
    """
    if generator is None or len(generator) == 0:
        return False, []
    evidence: list[str] = []
    df = generator.copy()
    for col in ("ts", "cpu_percent", "loop_lag_ms"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    for worker, rows in df.sort_values("ts").groupby("worker_id"):
        if len(rows) < sustain:
            continue
        cpu = rows["cpu_percent"].rolling(sustain).median()
        lag = rows["loop_lag_ms"].rolling(sustain).median()
        hot_cpu, hot_lag = cpu >= cpu_pct, lag >= lag_ms
        if hot_cpu.any() or hot_lag.any():
            hot = hot_cpu | hot_lag
            first = float(rows.loc[hot, "ts"].iloc[0])
            seconds = float(hot.sum()) * _median_step(rows["ts"])
            evidence.append(
                f"worker {worker}: CPU median {cpu.max():.0f} % (threshold {cpu_pct:g} %), "
                f"event-loop lag median {lag.max():.0f} ms (threshold {lag_ms:g} ms) over {sustain} samples; "
                f"saturated for ~{seconds:.0f} s from t={first - float(df['ts'].min()):.0f} s")
    return bool(evidence), evidence


def _median_step(ts: pd.Series) -> float:
    steps = ts.diff().dropna()
    return float(steps.median()) if len(steps) else GENERATOR_SAMPLE_INTERVAL_S
