"""A window of the master's live records (loadline/runtime/live.py) and the entry point shapes call.

Apart from live.py, which keeps the records in numpy arrays: shapes are imported by every process,
workers included, and a worker imports no numpy (its CPU is the measuring instrument; the import
contract in pyproject.toml and tests/integration/test_worker_imports.py check it). Only the master
holds live records; `window` answers None anywhere else.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from loadline.core.runsettings import is_scaled, model_value, time_scale_of_options


@dataclass(frozen=True)
class WindowSummary:
    start_wall: float
    end_wall: float
    requests: int
    ok: int
    errors: int
    cancelled: int
    error_rate: float  # errors / (ok + errors); cancelled streams are neither
    e2e_p50_ms: float | None
    e2e_p95_ms: float | None
    e2e_p99_ms: float | None
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    ttft_p99_ms: float | None
    itl_p50_ms: float | None  # median of per-request ITL p50s (the live view; reports pool gaps)
    output_tokens_per_s: float
    rps: float
    errors_by_class: dict[str, int]
    itl_p95_ms: float | None = None  # pooled gaps, as the report; None beyond live.GAP_RETENTION_S
    itl_p99_ms: float | None = None
    tpot_p95_ms: float | None = None
    tpot_p99_ms: float | None = None
    itl_pooled_p50_ms: float | None = None  # pooled gaps, like itl_p95_ms (the web UI's ITL chart)
    ttfo_p95_ms: float | None = None  # the answer's first token (after reasoning): judged when the SLO sets it
    ttfo_p99_ms: float | None = None
    # None: exact. Else the window reached into folded minutes: its percentiles come from histograms,
    # each within this many percent of the exact value (runtime/histogram.ALPHA), and its counts take folded
    # minutes whole (the module docstring)
    approx_pct: float | None = None


def window(environment, start_wall: float, end_wall: float, itl: bool = True) -> WindowSummary | None:
    """The documented entry point for shapes: None when no live stats exist in this process.

    In a time-scaled run (`--time-scale X`, simulator and shapes X times faster) the summary is in
    model time: latencies x X, rates / X, so SLO thresholds keep their real-world meaning.
    """
    live = getattr(environment, "loadline_live", None)  # loadline.runtime.live.LiveStats, on the master
    if live is None:
        return None
    summary = live.window(start_wall, end_wall, itl)
    scale = time_scale_of_options(environment.parsed_options)
    return to_model_time(summary, scale) if summary is not None and scale != 1.0 else summary


def to_model_time(summary: WindowSummary, scale: float) -> WindowSummary:
    """The summary in model time (loadline.core.runsettings.model_value: latencies times the scale, rates divided by it)."""
    # Any: mypy checks replace(**scaled) against every field's type; these are the float ones only
    scaled: dict[str, Any] = {
        f.name: model_value(f.name, getattr(summary, f.name), scale)
        for f in dataclasses.fields(summary)
        if is_scaled(f.name) and getattr(summary, f.name) is not None
    }
    return dataclasses.replace(summary, **scaled)
