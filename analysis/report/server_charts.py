"""Server-side charts over time, aligned with the phases: what the engine and GPU did under the load.

One PNG per question an on-call engineer asks: is the engine queueing (running / waiting)? is the
KV cache full and evicting (usage, preemptions/s)? is the GPU busy (utilisation, memory)? where
does a request's time go (queue vs prefill vs decode, mean per scrape interval)? A chart is drawn
only when its metrics were scraped. Phase shading and saving reuse analysis/report/charts.py; the run
comes in model time (analysis/data/timescale.py.model_run) like the report's other charts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from loadline.analysis.data.timescale import time_scale
from loadline.analysis.report.charts import BESIDE, _legend, _save, _shade_phases, _time_label, plt
from loadline.analysis.verdict.signals import Signals


def _t0(run: Any, signals: Signals) -> float:
    phases = getattr(run, "phases", None)
    if phases is not None and len(phases) and phases["start_wall"].notna().any():
        return float(phases["start_wall"].min())
    span = signals.time_span()
    return span[0] if span else 0.0


class _Axis:
    """The run's stamps (model time) -> seconds since the first phase; `label` names the axis."""

    def __init__(self, t0: float, label: str):
        self.t0, self.label = t0, label

    def x(self, series: pd.Series):
        return series.index.to_numpy(dtype=float) - self.t0


def _plot(ax, series: pd.Series, axis: _Axis, label: str, **kwargs) -> None:
    if len(series):
        ax.plot(axis.x(series), series.to_numpy(dtype=float), label=label, **kwargs)


def _hist_means(signals: Signals, concept: str) -> pd.Series:
    """Mean of the observations between consecutive scrapes (sum delta / count delta), seconds."""
    s = signals.samples(concept)
    if s.empty:
        return pd.Series(dtype=float)
    parts = {}
    for suffix in ("_sum", "_count"):
        rows = s[s["suffix"] == suffix]
        parts[suffix] = rows.groupby("ts")["value"].sum().sort_index()
    both = pd.DataFrame(parts).dropna()
    delta = both.diff().iloc[1:]
    delta = delta[delta["_count"] > 0]
    return (delta["_sum"] / delta["_count"]).astype(float)


def _figure(run: Any, axis: _Axis, title: str, rows: int = 1):
    fig, axes = plt.subplots(rows, 1, figsize=(9, 2.8 * rows), sharex=True, squeeze=False)
    axes = axes[:, 0]
    for ax in axes:
        if getattr(run, "phases", None) is not None:
            _shade_phases(ax, run, lambda t: t - axis.t0)
    axes[0].set_title(title, fontsize=10)
    axes[-1].set_xlabel(axis.label)
    return fig, axes


def _scheduler(run: Any, s: Signals, axis: _Axis, path: Path) -> Path | None:
    if not (s.has("running") or s.has("waiting")):
        return None
    fig, (ax,) = _figure(run, axis, "Engine scheduler: requests running vs waiting")
    _plot(ax, s.gauge_series("running"), axis, "running")
    _plot(ax, s.gauge_series("waiting"), axis, "waiting (queued)")
    ax.set_ylabel("requests")
    _legend(ax, **BESIDE)
    return _save(fig, path)


def _percent_panel(ax, series: pd.Series, axis: _Axis, label: str, limit: float, limit_label: str) -> None:
    """A 0-100 % gauge with the domain's threshold drawn as a dotted red line."""
    _plot(ax, series, axis, label)
    ax.axhline(limit, color="#cc3333", linestyle=":", linewidth=1, label=limit_label)
    ax.set_ylim(0, 105)
    ax.set_ylabel("%")
    _legend(ax, **BESIDE)


def _kv(run: Any, s: Signals, axis: _Axis, path: Path) -> Path | None:
    if not (s.has("kv_usage") or s.has("preemptions")):
        return None
    fig, (ax, ax2) = _figure(run, axis, "KV cache: usage and preemptions", rows=2)
    _percent_panel(ax, s.gauge_series("kv_usage") * 100, axis, "KV-cache usage %", 90, "90 % (pinned)")
    _plot(ax2, s.rate_series("preemptions"), axis, "preemptions / s", color="#cc3333")
    ax2.set_ylabel("per second")
    _legend(ax2, **BESIDE)
    return _save(fig, path)


def _gpu(run: Any, s: Signals, axis: _Axis, path: Path) -> Path | None:
    if not (s.has("gpu_util") or s.has("gpu_mem_used")):
        return None
    fig, (ax, ax2) = _figure(run, axis, "GPU: utilisation and memory", rows=2)
    _percent_panel(ax, s.gauge_series("gpu_util") * 100, axis, "GPU utilisation % (mean over GPUs)", 95, "95 %")
    used, free = s.gauge_series("gpu_mem_used"), s.gauge_series("gpu_mem_free")
    if len(used) and len(free):
        share = (used / (used + free)).dropna() * 100
        _plot(ax2, share, axis, "GPU memory used %")
        ax2.axhline(85, color="#cc3333", linestyle=":", linewidth=1, label="85 %")
        ax2.set_ylabel("%")
    else:
        _plot(ax2, used, axis, "GPU memory used (MiB)")
    _legend(ax2, **BESIDE)
    return _save(fig, path)


def _request_phases(run: Any, s: Signals, axis: _Axis, path: Path) -> Path | None:
    concepts = [c for c in ("queue_time", "prefill_time", "decode_time", "ttft") if s.has(c)]
    if not concepts:
        return None
    fig, (ax,) = _figure(run, axis, "Where a request's time goes (server side, mean per scrape interval)")
    for concept in concepts:
        series = _hist_means(s, concept) * 1000
        _plot(ax, series.replace([np.inf, -np.inf], np.nan).dropna(), axis, concept.replace("_", " "))
    ax.set_ylabel("ms")
    ax.set_yscale("symlog", linthresh=10)
    _legend(ax, **BESIDE)
    return _save(fig, path)


def charts(run: Any, phase_table: pd.DataFrame | None, out_dir: str | Path) -> list[Path]:
    """Draw every server chart the scraped metrics allow into `out_dir`; returns the files."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    signals = Signals(getattr(run, "server_metrics", None))
    if not signals.present:
        return []
    axis = _Axis(_t0(run, signals), _time_label(time_scale(getattr(run, "manifest", None))))
    drawn = [
        _scheduler(run, signals, axis, out / "server_running_waiting.png"),
        _kv(run, signals, axis, out / "server_kv_cache.png"),
        _gpu(run, signals, axis, out / "server_gpu.png"),
        _request_phases(run, signals, axis, out / "server_request_time.png"),
    ]
    return [p for p in drawn if p is not None]
