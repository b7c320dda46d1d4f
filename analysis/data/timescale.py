"""Model time for time-scaled runs (`--time-scale X`: simulator and shapes X times faster).

The run folder holds wall-clock measurements; a run compressed X times has latencies X times
shorter and rates X times higher than the service it models. The report judges and shows model
time (latency x X, rate / X), as the live stop rule does, so SLO thresholds keep their real-world
meaning. The scale and the conversion rule are loadline/core/runsettings.py's (one accessor, one rule);
this module applies them to DataFrames. `phase_table` stays in wall time (the bottleneck and
capacity analyses read it that way and scale themselves).
"""

from __future__ import annotations

import pandas as pd

from loadline.core.runsettings import is_scaled, model_value, time_scale_of


def time_scale(manifest: dict | None) -> float:
    """X of `--time-scale X` from the run's manifest (the one accessor: loadline.core.runsettings.time_scale_of)."""
    return time_scale_of(manifest)


def to_model_time(table: pd.DataFrame, scale: float) -> pd.DataFrame:
    """Every latency (`*_ms`) and rate column in model time (loadline.core.runsettings.model_value's rule)."""
    if scale == 1.0:
        return table
    table = table.copy()
    for column in table.columns:
        if is_scaled(column):
            table[column] = model_value(column, table[column], scale)
    return table


def point_to_model(point: dict, scale: float) -> dict:
    """A knee / break-point dict (loadline.analysis.stats.knee) from wall time to model time."""
    if scale == 1.0 or not point:
        return point
    out = dict(point)
    for key, value in point.items():
        if isinstance(value, dict):  # e.g. the knee's `highest_tested` point
            out[key] = point_to_model(value, scale)
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and is_scaled(key):
            out[key] = round(model_value(key, value, scale), 3)
    return out


def note(scale: float) -> str | None:
    if scale == 1.0:
        return None
    return (f"time-scaled run (x{scale:g}): latencies and rates are shown and judged in model time "
            f"(measured latency x {scale:g}, measured rate / {scale:g}), as the live stop rule judges them")
