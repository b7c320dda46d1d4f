"""Server metrics over a time window, in the vocabulary's concepts.

`Signals(server_metrics)` answers the questions the verdict rules and charts ask: the level of a
gauge in a window, how much a counter grew (surviving restarts, which reset counters to zero), the
mean and quantiles of the histogram observations that fell inside a window (bucket deltas, linear
interpolation inside the bucket as Prometheus' histogram_quantile does), and the host CPU's busy
fraction. Pure pandas; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.data.vocabulary import CONCEPTS, concept_samples, present_concepts


@dataclass
class GaugeStats:
    mean: float
    p50: float
    p90: float
    min: float
    max: float
    samples: int


@dataclass
class HistogramStats:
    count: float
    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None


def _increase(values: np.ndarray) -> float:
    """Growth of a cumulative counter; a drop means the process restarted from zero."""
    if len(values) < 2:
        return 0.0
    diffs = np.diff(values)
    return float(np.where(diffs >= 0, diffs, values[1:]).sum())


def bucket_quantile(q: float, les: np.ndarray, cumulative: np.ndarray) -> float | None:
    """Prometheus' histogram_quantile on one set of cumulative bucket counts."""
    order = np.argsort(les)
    les, cumulative = les[order], np.maximum.accumulate(cumulative[order])
    if len(les) == 0 or cumulative[-1] <= 0:
        return None
    rank = q * cumulative[-1]
    i = int(np.searchsorted(cumulative, rank, side="left"))
    i = min(i, len(les) - 1)
    if math.isinf(les[i]):
        # everything above the last finite bound: the best honest answer is that bound
        finite = les[np.isfinite(les)]
        return float(finite[-1]) if len(finite) else None
    lower = les[i - 1] if i > 0 else 0.0
    below = cumulative[i - 1] if i > 0 else 0.0
    inside = cumulative[i] - below
    if inside <= 0:
        return float(les[i])
    return float(lower + (les[i] - lower) * (rank - below) / inside)


class Signals:
    """Concept lookups over one server_metrics table (long format, SERVER_METRIC_COLUMNS)."""

    def __init__(self, server_metrics: pd.DataFrame | None):
        self.table = server_metrics if server_metrics is not None else pd.DataFrame()
        self.present = set(present_concepts(server_metrics))
        self._cache: dict[str, pd.DataFrame] = {}

    def has(self, concept: str) -> bool:
        return concept in self.present

    def samples(self, concept: str) -> pd.DataFrame:
        if concept not in self._cache:
            self._cache[concept] = concept_samples(self.table, concept)
        return self._cache[concept]

    # --- gauges ------------------------------------------------------------------------------
    def gauge_series(self, concept: str) -> pd.Series:
        """One value per timestamp, series combined with the concept's `agg`."""
        s = self.samples(concept)
        if s.empty:
            return pd.Series(dtype=float)
        return s.groupby("ts")["value"].agg(CONCEPTS[concept].agg).sort_index()

    def gauge(self, concept: str, start: float, end: float) -> GaugeStats | None:
        series = self.gauge_series(concept)
        window = series[(series.index >= start) & (series.index <= end)]
        if window.empty:
            return None
        return GaugeStats(float(window.mean()), float(window.quantile(0.5)), float(window.quantile(0.9)),
                          float(window.min()), float(window.max()), int(len(window)))

    # --- counters ------------------------------------------------------------------------------
    def _series_in(self, concept: str, start: float, end: float, suffix: str = "") -> dict[str, pd.DataFrame]:
        """Per series: the last sample at or before `start` plus every sample up to `end`."""
        s = self.samples(concept)
        s = s[(s["suffix"] == suffix) & (s["ts"] <= end)]
        out = {}
        for key, rows in s.groupby("series"):
            before = rows[rows["ts"] <= start]
            inside = rows[rows["ts"] > start]
            if not before.empty:
                inside = pd.concat([before[before["ts"] == before["ts"].max()], inside])
            if len(inside) >= 1:
                out[str(key)] = inside.sort_values("ts")
        return out

    def increase(self, concept: str, start: float, end: float) -> float | None:
        """How much a counter grew in [start, end], summed over series; None if never scraped there."""
        if not self.has(concept):
            return None
        parts = self._series_in(concept, start, end)
        if not parts:
            return None
        return float(sum(_increase(rows["value"].to_numpy()) for rows in parts.values()))

    def resets(self, concept: str) -> list[float]:
        """Timestamps where a cumulative counter fell: the process behind it restarted."""
        s = self.samples(concept)
        s = s[s["suffix"] == ""]
        times: list[float] = []
        for _, rows in s.groupby("series"):
            rows = rows.sort_values("ts")
            drops = rows["value"].diff() < 0
            times.extend(float(t) for t in rows.loc[drops, "ts"])
        return sorted(times)

    def rate_series(self, concept: str) -> pd.Series:
        """Per-second increase between consecutive scrapes, summed over series."""
        s = self.samples(concept)
        s = s[s["suffix"] == ""]
        parts = []
        for _, rows in s.groupby("series"):
            rows = rows.sort_values("ts")
            values, ts = rows["value"].to_numpy(), rows["ts"].to_numpy()
            if len(values) < 2:
                continue
            diffs = np.diff(values)
            diffs = np.where(diffs >= 0, diffs, values[1:])
            dt = np.diff(ts)
            ok = dt > 0
            parts.append(pd.Series(diffs[ok] / dt[ok], index=ts[1:][ok]))
        if not parts:
            return pd.Series(dtype=float)
        return pd.concat(parts).groupby(level=0).sum().sort_index()

    # --- histograms ------------------------------------------------------------------------------
    def histogram(self, concept: str, start: float, end: float) -> HistogramStats | None:
        """Observations recorded inside [start, end]: count, mean and quantiles (seconds)."""
        if not self.has(concept):
            return None
        counts = self._series_in(concept, start, end, "_count")
        sums = self._series_in(concept, start, end, "_sum")
        total = sum(_increase(r["value"].to_numpy()) for r in counts.values())
        total_sum = sum(_increase(r["value"].to_numpy()) for r in sums.values())
        buckets = self.samples(concept)
        buckets = buckets[(buckets["suffix"] == "_bucket") & (buckets["ts"] <= end)]
        per_le: dict[float, float] = {}
        for (key, le), rows in buckets.groupby(["series", "le"]):
            rows = rows.sort_values("ts")
            before = rows[rows["ts"] <= start]
            inside = rows[rows["ts"] > start]
            if not before.empty:
                inside = pd.concat([before.iloc[[-1]], inside])
            per_le[float(le)] = per_le.get(float(le), 0.0) + _increase(inside["value"].to_numpy())
        if total <= 0:
            return HistogramStats(0.0, None, None, None, None)
        les = np.array(list(per_le.keys()), dtype=float)
        cum = np.array(list(per_le.values()), dtype=float)
        quantile = (lambda q: bucket_quantile(q, les, cum)) if len(les) else (lambda q: None)
        return HistogramStats(float(total), float(total_sum / total), quantile(0.5), quantile(0.9), quantile(0.99))

    # --- host -----------------------------------------------------------------------------------
    def host_cpu_busy(self, start: float, end: float) -> float | None:
        """Fraction of all host CPU time that was not idle in the window (node_exporter)."""
        total = self.increase("host_cpu_seconds", start, end)
        idle = self.increase("host_cpu_idle_seconds", start, end)
        if not total or idle is None:
            return None
        return max(0.0, min(1.0, 1.0 - idle / total))

    def time_span(self) -> tuple[float, float] | None:
        if self.table.empty:
            return None
        ts = pd.to_numeric(self.table["ts"], errors="coerce").dropna()
        return (float(ts.min()), float(ts.max())) if len(ts) else None
