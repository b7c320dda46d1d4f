"""Model time for time-scaled runs (`--time-scale X`: simulator and shapes X times faster).

The run folder holds wall-clock measurements; a run compressed X times has latencies X times
shorter and rates X times higher than the service it models. The report judges and shows model
time (latency x X, rate / X), as the live stop rule does (loadline.runtime.live.to_model_time), so SLO
thresholds keep their real-world meaning. `phase_table` stays in wall time (the bottleneck and
capacity analyses read it that way and scale themselves).
"""

from __future__ import annotations

import pandas as pd

LATENCY_SUFFIX = "_ms"
RATE_COLUMNS = ("rps", "output_tokens_per_s", "goodput_rps")
POINT_RATES = ("rps", "output_tokens_per_s")


def time_scale(manifest: dict | None) -> float:
    """X of `--time-scale X` recorded in the manifest's options; 1.0 when absent or invalid."""
    options = (manifest or {}).get("options") or {}
    value = options.get("time_scale") if isinstance(options, dict) else None
    return float(value) if isinstance(value, (int, float)) and value > 0 else 1.0


def to_model_time(table: pd.DataFrame, scale: float) -> pd.DataFrame:
    if scale == 1.0:
        return table
    table = table.copy()
    for column in table.columns:
        if column.endswith(LATENCY_SUFFIX):
            table[column] = table[column] * scale
        elif column in RATE_COLUMNS:
            table[column] = table[column] / scale
    return table


def point_to_model(point: dict, scale: float) -> dict:
    """A knee / break-point dict (analysis.stats.knee) from wall time to model time."""
    if scale == 1.0 or not point:
        return point
    out = dict(point)
    for key, value in point.items():
        if isinstance(value, dict):  # e.g. the knee's `highest_tested` point
            out[key] = point_to_model(value, scale)
            continue
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        if key.endswith(LATENCY_SUFFIX):
            out[key] = round(value * scale, 3)
        elif key in POINT_RATES:
            out[key] = round(value / scale, 3)
    return out


def note(scale: float) -> str | None:
    if scale == 1.0:
        return None
    return (f"time-scaled run (x{scale:g}): latencies and rates are shown and judged in model time "
            f"(measured latency x {scale:g}, measured rate / {scale:g}), as the live stop rule judges them")
