"""Was the load generator saturated? Judged from generator_metrics.csv (loadline.runtime.selfcheck
samples it; the thresholds live there, next to the sampler, and are explained there)."""

from __future__ import annotations

import pandas as pd

from loadline.runtime.selfcheck import CPU_SATURATED_PCT, LOOP_LAG_SATURATED_MS, SAMPLE_INTERVAL_S, SUSTAIN_SAMPLES


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
    return float(steps.median()) if len(steps) else SAMPLE_INTERVAL_S
