"""The report's charts: PNG files drawn with matplotlib's Agg backend (no display, no network).

Time series bucket records by the second they ended (latency, tokens/s) or started (errors);
the bucket width adapts so a chart has at most ~150 buckets. Phases are shaded and labelled.
The run comes in model time (loadline.analysis.data.timescale.model_run), so every axis and bucket is model time.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from loadline.analysis.data.columns import numbers
from loadline.analysis.data.gaps import GapHistogram
from loadline.analysis.data.load import RunData, gap_column
from loadline.analysis.data.timescale import time_scale
from loadline.core.records import Status

MAX_BUCKETS = 150
CHUNK_ROWS = 1 << 22  # rows a per-bucket sum reads at a time (32 MB of float64)
CDF_MAX_REQUESTS = 20_000  # ITL CDF pools the gaps of at most this many evenly spaced requests
_SHADES = ("#e8eef7", "#f7f3e8")
# Time series put their legend beside the axes: inside, it hid the first phase's label and the data under it.
BESIDE: dict[str, Any] = {"loc": "upper left", "bbox_to_anchor": (1.005, 1.0), "borderaxespad": 0.0}


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _timeline(run: RunData) -> tuple[float, float]:
    starts = run.phases["start_wall"].dropna()
    ends = run.phases["end_wall"].dropna()
    t0 = float(starts.min()) if len(starts) else float(run.requests["start_wall"].min())
    t1 = float(ends.max()) if len(ends) else float(run.requests["end_wall"].max())
    return t0, max(t1, t0 + 1.0)


def _bucket_width(t0: float, t1: float) -> float:
    return max(1.0, float(np.ceil((t1 - t0) / MAX_BUCKETS)))


def _shade_phases(ax, run: RunData, x: Callable[[float], float]) -> None:
    """The phases as bands; `x` places a timestamp of the run's phases on the axis."""
    phases = run.phases.dropna(subset=["start_wall", "end_wall"])
    for i, (_, phase) in enumerate(phases.iterrows()):
        start, end = x(phase["start_wall"]), x(phase["end_wall"])
        ax.axvspan(start, end, color=_SHADES[i % 2], zorder=0)
        if len(phases) <= 12:
            ax.text(
                start,
                1.0,
                f" {phase['label']}",
                transform=ax.get_xaxis_transform(),
                fontsize=7,
                va="top",
                rotation=90,
                color="#555555",
            )


def _legend(ax, **kwargs) -> None:
    """A legend when something was drawn, else a note that there was nothing to draw."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, **kwargs)
    else:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="grey")


def _time_label(scale: float) -> str:
    return "time since start (s)" if scale == 1.0 else f"model time since start (s; run compressed x{scale:g})"


def _label(run: RunData) -> str:
    return _time_label(time_scale(run.manifest))


_CHART_COLUMNS = ("status", "start_wall", "end_wall", "ttft_ms", "e2e_ms", "output_tokens")


def _ok(run: RunData, columns: tuple[str, ...] = _CHART_COLUMNS) -> pd.DataFrame:
    """The ok requests, with only the columns a chart draws (a whole-width copy of a 10 M-row table
    would cost a gigabyte)."""
    wanted = [c for c in columns if c in run.requests.columns]
    return run.requests[wanted].loc[(run.requests["status"] == Status.OK).to_numpy()]


def bucket_quantiles(codes: np.ndarray, values: np.ndarray, qs: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(the buckets that have values, one row of quantiles per q): numpy's default (linear) quantiles
    of each bucket's values, NaN left out, as pandas' groupby quantile gives. The rows are grouped by
    bucket once (a radix sort: at most MAX_BUCKETS small codes) and each bucket sorted alone; a groupby
    quantile sorts every column of the frame again for each q (a 10 M-row report's peak memory)."""
    valid = ~np.isnan(values)
    codes, values = codes[valid], values[valid]
    if not len(codes):
        return np.empty(0, dtype=np.int64), np.empty((len(qs), 0))
    first = int(codes.min())
    small = (codes - first).astype(np.int16 if int(codes.max()) - first < 1 << 15 else np.int64)
    grouped = values[np.argsort(small, kind="stable")]
    counts = np.bincount(small)
    buckets = np.flatnonzero(counts)
    ends = np.cumsum(counts)
    out = np.empty((len(qs), len(buckets)))
    for column, bucket in enumerate(buckets):
        part = np.sort(grouped[ends[bucket] - counts[bucket] : ends[bucket]])
        n = len(part)
        for row, q in enumerate(qs):
            virtual = (n - 1) * q
            below = int(np.floor(virtual))
            low, high = part[below], part[min(below + 1, n - 1)]
            out[row, column] = low + (high - low) * (virtual - below)
    return buckets + first, out


def latency_over_time(run: RunData, path: Path) -> Path:
    t0, t1 = _timeline(run)
    width = _bucket_width(t0, t1)
    requests = run.requests
    ok = (requests["status"] == Status.OK).to_numpy()
    fig, ax = plt.subplots(figsize=(10, 4.2))
    _shade_phases(ax, run, lambda t: t - t0)
    if ok.any():
        codes = ((requests["end_wall"].to_numpy(dtype=float)[ok] - t0) // width).astype(np.int64)
        for column, qs, style in (("e2e_ms", (0.5, 0.95, 0.99), "-"), ("ttft_ms", (0.95,), "--")):
            buckets, lines = bucket_quantiles(codes, requests[column].to_numpy(dtype=float)[ok], qs)
            for q, line in zip(qs, lines):
                ax.plot(buckets * width + width / 2, line, style, label=f"{column[:-3].upper()} P{round(q * 100)}")
    _legend(ax, **BESIDE)
    ax.set(
        title=f"Latency percentiles over time ({width:g} s buckets, ok requests)",
        xlabel=_label(run),
        ylabel="latency (ms)",
    )
    return _save(fig, path)


# the latency series the concurrency chart draws, by the SLO criterion's name
PLOTTED_LATENCY = {"E2E P95": "e2e_p95_ms", "E2E P99": "e2e_p99_ms", "TTFT P95": "ttft_p95_ms"}


def slo_lines(criteria: list[dict]) -> dict[str, float]:
    """The limits of the SLO criteria the gate applied to this run and the chart draws (name -> ms):
    a streaming run is not judged on E2E, so no E2E line is drawn for it; its TTFT limit is."""
    return {
        c["name"]: float(c["limit"])
        for c in criteria
        if c.get("name") in PLOTTED_LATENCY and isinstance(c.get("limit"), (int, float))
    }


def throughput_vs_concurrency(
    curve: pd.DataFrame, knee: dict, break_point: dict, limits: dict[str, float], path: Path
) -> Path:
    """Throughput and latency per load level: users, or the offered arrival rate for rate phases (open loop).
    `limits`: the applied SLO criteria to draw (slo_lines)."""
    by_rate = "target_rate" in curve.columns and curve["target_rate"].notna().any()
    level, unit = ("target_rate", "req/s offered") if by_rate else ("users", "users")
    xlabel = "offered arrival rate (req/s)" if by_rate else "concurrent users"
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7))
    if len(curve):
        x = curve[level]
        top.plot(x, curve["rps"], "o-", label="requests/s (ok)")
        top.plot(x, curve["goodput_rps"], "s--", label="goodput (req/s meeting SLO)")
        if by_rate:  # open loop: a server that keeps up carries what it is offered
            top.plot(x, x, color="grey", lw=0.8, ls="--", label="carried = offered")
        bottom.plot(x, curve["e2e_p95_ms"], "o-", label="E2E P95")
        bottom.plot(x, curve["e2e_p99_ms"], "o-", label="E2E P99")
        bottom.plot(x, curve["ttft_p95_ms"], "^--", label="TTFT P95")
    for ax in (top, bottom):
        if knee.get("found") and knee.get(level) is not None:
            ax.axvline(knee[level], color="tab:green", ls=":", label=f"knee ({knee[level]:g} {unit})")
        if break_point.get("found") and break_point.get(level) is not None:
            ax.axvline(
                break_point[level], color="tab:red", ls=":", label=f"break point ({break_point[level]:g} {unit})"
            )
    for name, limit in limits.items():
        bottom.axhline(limit, color="grey", lw=0.8, ls="--", label=f"SLO {name} {limit:g} ms")
    what = "offered rate" if by_rate else "concurrency"
    top.set(title=f"Throughput vs {what}", xlabel=xlabel, ylabel="requests/s")
    bottom.set(title=f"Latency vs {what}", xlabel=xlabel, ylabel="latency (ms)")
    _legend(top, loc="upper left")
    _legend(bottom, loc="upper left")
    return _save(fig, path)


def _cdf(ax, samples: np.ndarray, label: str) -> None:
    samples = np.asarray(samples, dtype=float)
    samples = samples[np.isfinite(samples) & (samples > 0)]
    if samples.size == 0:
        return
    grid = np.linspace(0.0, 1.0, 501)  # quantiles on a fixed grid: exact at those points, cheap at any size
    ax.plot(np.quantile(samples, grid), grid, label=f"{label} (n={samples.size:,})")


def latency_cdfs(run: RunData, path: Path, itl: GapHistogram | None = None) -> Path:
    """`itl`: the phase table's gaps (its attrs[ITL_HISTOGRAM]): every gap of the phases' latency rows,
    drawn exactly; without it, the gaps of every step-th ok request are read again."""
    ok = _ok(run, ("ttft_ms",))
    step = max(1, len(ok) // CDF_MAX_REQUESTS)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    _cdf(left, ok["ttft_ms"].to_numpy(dtype=float), "TTFT")
    if itl is not None:
        drawn = itl.positive()
        grid = np.linspace(0.0, 1.0, 501)
        if drawn.count:
            right.plot(drawn.quantiles(grid) / 1000.0, grid, label=f"ITL per gap (n={drawn.count:,})")
        sampled = ", every gap"  # of the phases' latency rows, as the phase table's ITL
    else:
        sample = np.zeros(len(run.requests), dtype=bool)  # every step-th ok request
        sample[np.flatnonzero((run.requests["status"] == Status.OK).to_numpy())[::step]] = True
        _cdf(right, gap_column(run).pooled(sample) / 1000.0, "ITL per gap")
        sampled = f", gaps of every {step}th request" if step > 1 else ""
    left.set(title="TTFT distribution (CDF)", xlabel="TTFT (ms)", ylabel="fraction of requests")
    right.set(title=f"ITL distribution (CDF{sampled})", xlabel="inter-token gap (ms)", ylabel="fraction of gaps")
    for ax in (left, right):
        ax.set_xscale("log")
        ax.grid(alpha=0.3)
        _legend(ax, loc="lower right")
    return _save(fig, path)


def tokens_over_time(run: RunData, path: Path) -> Path:
    t0, t1 = _timeline(run)
    width = _bucket_width(t0, t1)
    fig, ax = plt.subplots(figsize=(10, 3.6))
    _shade_phases(ax, run, lambda t: t - t0)
    held, sums = _tokens_per_bucket(run.requests, t0, width)
    ax.step(held.astype(float) * width + width / 2, sums / width, where="mid", label="output tokens/s (ok requests)")
    _legend(ax, **BESIDE)
    ax.set(
        title=f"Output tokens/s over time ({width:g} s buckets, by completion time)",
        xlabel=_label(run),
        ylabel="tokens/s",
    )
    return _save(fig, path)


def _tokens_per_bucket(requests: pd.DataFrame, t0: float, width: float) -> tuple[np.ndarray, np.ndarray]:
    """(the buckets by completion time that hold an ok request, their output tokens), by counting,
    not a groupby (which hashes 10 M float keys), and CHUNK_ROWS at a time: the sums are of whole
    token counts, exact in any order, and a 50 M-row run's steps are never all in memory at once."""
    ok, ends, tokens = (requests["status"] == Status.OK).to_numpy(), requests["end_wall"], requests["output_tokens"]
    parts = []  # (a chunk's first bucket, its tokens and its requests per bucket from there)
    for start in range(0, len(ok), CHUNK_ROWS):
        rows, kept = slice(start, start + CHUNK_ROWS), ok[start : start + CHUNK_ROWS]
        steps = ((numbers(ends.iloc[rows])[kept] - t0) // width).astype(np.int64)
        if len(steps):
            low = int(steps.min())
            weights = numbers(tokens.iloc[rows])[kept]
            parts.append((low, np.bincount(steps - low, weights=weights), np.bincount(steps - low)))
    if not parts:
        return np.empty(0, dtype=np.int64), np.empty(0)
    first = min(low for low, _, _ in parts)
    sums = np.zeros(max(low + len(part) for low, part, _ in parts) - first)
    counts = np.zeros(len(sums), dtype=np.int64)
    for low, part_sums, part_counts in parts:
        sums[low - first : low - first + len(part_sums)] += part_sums
        counts[low - first : low - first + len(part_counts)] += part_counts
    held = np.flatnonzero(counts)
    return held + first, sums[held]


def errors_over_time(run: RunData, path: Path) -> Path:
    t0, t1 = _timeline(run)
    width = _bucket_width(t0, t1)
    errors = run.requests.loc[(run.requests["status"] == Status.ERROR).to_numpy(), ["start_wall", "error_class"]]
    fig, ax = plt.subplots(figsize=(10, 3.6))
    _shade_phases(ax, run, lambda t: t - t0)
    if errors.empty:
        ax.text(0.5, 0.5, "no errors", transform=ax.transAxes, ha="center", va="center", fontsize=14, color="tab:green")
        ax.set_xlim(0, t1 - t0)
    else:
        bucket = ((errors["start_wall"].to_numpy() - t0) // width) * width
        counts = pd.crosstab(bucket, errors["error_class"].astype(str).replace("", "unknown").to_numpy())
        bottom = np.zeros(len(counts))
        for name in counts.columns:
            ax.bar(counts.index + width / 2, counts[name].to_numpy() / width, width=width, bottom=bottom, label=name)
            bottom += counts[name].to_numpy() / width
        ax.legend(fontsize=8, title="error class", **BESIDE)
    ax.set(
        title=f"Errors over time by class ({width:g} s buckets, by start time)", xlabel=_label(run), ylabel="errors/s"
    )
    return _save(fig, path)


def locust_history_chart(history: pd.DataFrame, path: Path) -> Path:
    """The degraded view for plain Locust CSV exports: users, requests/s and P95 over time."""
    rows = history[history["Name"].astype(str) == "Aggregated"] if "Name" in history else history
    t = rows["Timestamp"].to_numpy(dtype=float) if "Timestamp" in rows else np.arange(len(rows), dtype=float)
    t = t - (t[0] if len(t) else 0.0)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5.5), sharex=True)
    for column, ax in (("User Count", top), ("Requests/s", top), ("95%", bottom), ("50%", bottom)):
        if column in rows:
            ax.plot(t, pd.to_numeric(rows[column], errors="coerce").to_numpy(), label=column)
    top.set(title="Locust history: users and requests/s", ylabel="users, requests/s")
    bottom.set(
        title="Locust history: response time percentiles (Locust-bucketed)", xlabel="time since start (s)", ylabel="ms"
    )
    _legend(top)
    _legend(bottom)
    return _save(fig, path)
