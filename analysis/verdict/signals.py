"""Server metrics over a time window, in the vocabulary's concepts.

`Signals(server_metrics)` answers the questions the verdict rules and charts ask: the level of a
gauge in a window, how much a counter grew (surviving restarts, which reset counters to zero), the
mean and quantiles of the histogram observations that fell inside a window (bucket deltas, linear
interpolation inside the bucket as Prometheus' histogram_quantile does), and the host CPU's busy
fraction. Pure pandas; no I/O.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from loadline.analysis.data.vocabulary import CONCEPTS, MetricTable, Source, dialect_gaps, engine_dialects


@dataclass
class GaugeStats:
    mean: float
    p50: float
    p90: float
    min: float
    max: float
    samples: int


@dataclass
class RunningCap:
    """The most requests the engine runs at once: from its own metric, or inferred."""

    value: float
    how: str  # quoted in evidence: where the number comes from


@dataclass
class SlotSaturation:
    """Running pinned at its cap while requests wait: the shape of a scheduler/slot limit."""

    cap: RunningCap
    pinned_share: float  # scrapes with running >= cap
    waiting_share: float  # scrapes with waiting > 0
    both_share: float  # scrapes with both at once: every slot busy and requests turned away to wait
    running: GaugeStats
    waiting: GaugeStats


@dataclass
class HistogramStats:
    count: float
    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None


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
        self.metrics = MetricTable(server_metrics)  # labels parsed once, rows indexed by metric name
        self.present = set(self.metrics.present())
        self._cache: dict[str, pd.DataFrame] = {}
        self._inc_cache: dict[str, pd.DataFrame] = {}
        self._gauge_cache: dict[str, pd.Series] = {}
        self._inc_arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._window_cache: dict[tuple[str, float, float], GaugeStats | None] = {}

    def has(self, concept: str) -> bool:
        return concept in self.present

    def samples(self, concept: str) -> pd.DataFrame:
        if concept not in self._cache:
            self._cache[concept] = self.metrics.samples(concept)
        return self._cache[concept]

    # --- gauges ------------------------------------------------------------------------------
    def gauge_series(self, concept: str) -> pd.Series:
        """One value per timestamp, series combined with the concept's `agg` (cached)."""
        if concept not in self._gauge_cache:
            s = self.samples(concept)
            self._gauge_cache[concept] = (
                pd.Series(dtype=float) if s.empty else s.groupby("ts")["value"].agg(CONCEPTS[concept].agg).sort_index()
            )
        return self._gauge_cache[concept]

    def gauge(self, concept: str, start: float, end: float) -> GaugeStats | None:
        """The gauge's level in [start, end] (cached per window: rules ask for the same windows again)."""
        key = (concept, start, end)
        if key not in self._window_cache:
            self._window_cache[key] = self._gauge(concept, start, end)
        stats = self._window_cache[key]
        return None if stats is None else replace(stats)  # a copy: a caller may annotate its own

    def _gauge(self, concept: str, start: float, end: float) -> GaugeStats | None:
        series = self.gauge_series(concept)
        window = series[(series.index >= start) & (series.index <= end)]
        if window.empty:
            return None
        return GaugeStats(
            float(window.mean()),
            float(window.quantile(0.5)),
            float(window.quantile(0.9)),
            float(window.min()),
            float(window.max()),
            int(len(window)),
        )

    # --- counters ------------------------------------------------------------------------------
    def _increments(self, concept: str, suffix: str) -> pd.DataFrame:
        """Per sample: how much its series (per `le` for buckets) grew since the previous sample.

        A drop means the process restarted from zero, so the increment is the new value. The first
        sample of a series has no increment. Cached per concept and suffix: every window reuses it.
        """
        key = f"{concept}\0{suffix}"
        if key not in self._inc_cache:
            s = self.samples(concept)
            s = s[s["suffix"] == suffix] if not s.empty else s
            if s.empty:
                self._inc_cache[key] = pd.DataFrame(columns=["series", "le", "ts", "inc"])
            else:
                s = s.assign(le=s["le"].astype(float).fillna(-1.0) if "le" in s else -1.0)
                s = s.sort_values(["series", "le", "ts"], kind="stable")
                prev = s.groupby(["series", "le"], sort=False)["value"].shift(1)
                value = s["value"].to_numpy(dtype=float)
                inc = np.where(prev.isna(), np.nan, np.where(value >= prev, value - prev, value))
                self._inc_cache[key] = pd.DataFrame(
                    {
                        "series": s["series"].to_numpy(),
                        "le": s["le"].to_numpy(),
                        "ts": s["ts"].to_numpy(dtype=float),
                        "inc": inc,
                    }
                )
        return self._inc_cache[key]

    def _grown(self, concept: str, start: float, end: float, suffix: str = "") -> pd.DataFrame | None:
        """The increments that happened in (start, end]; None when the concept was never scraped by `end`."""
        inc = self._increments(concept, suffix)
        if inc.empty:
            return None
        key = f"{concept}\0{suffix}"
        if key not in self._inc_arrays:  # numpy masks: a pandas comparison per window cost more than the sums
            self._inc_arrays[key] = (inc["ts"].to_numpy(dtype=float), inc["inc"].notna().to_numpy())
        ts, has_inc = self._inc_arrays[key]
        if not (ts <= end).any():
            return None
        return inc[(ts > start) & (ts <= end) & has_inc]

    def increase(self, concept: str, start: float, end: float) -> float | None:
        """How much a counter grew in [start, end], summed over series; None if never scraped there."""
        if not self.has(concept):
            return None
        grown = self._grown(concept, start, end)
        return None if grown is None else float(grown["inc"].sum())

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
        counts, sums = self._grown(concept, start, end, "_count"), self._grown(concept, start, end, "_sum")
        total = float(counts["inc"].sum()) if counts is not None else 0.0
        total_sum = float(sums["inc"].sum()) if sums is not None else 0.0
        if total <= 0:
            return HistogramStats(0.0, None, None, None, None)
        buckets = self._grown(concept, start, end, "_bucket")
        per_le = buckets.groupby("le")["inc"].sum() if buckets is not None and len(buckets) else pd.Series(dtype=float)
        les = per_le.index.to_numpy(dtype=float)
        cum = per_le.to_numpy(dtype=float)
        quantile = (lambda q: bucket_quantile(q, les, cum)) if len(les) else (lambda q: None)
        return HistogramStats(total, total_sum / total, quantile(0.5), quantile(0.9), quantile(0.99))

    # --- host -----------------------------------------------------------------------------------
    def host_cpu_busy(self, start: float, end: float) -> float | None:
        """Fraction of all host CPU time that was not idle in the window (node_exporter)."""
        total = self.increase("host_cpu_seconds", start, end)
        idle = self.increase("host_cpu_idle_seconds", start, end)
        if not total or idle is None:
            return None
        return max(0.0, min(1.0, 1.0 - idle / total))

    def scrape_interval(self) -> float | None:
        """The median time between the engine's scrapes (running gauge, else any sample)."""
        series = self.gauge_series("running") if self.has("running") else pd.Series(dtype=float)
        ts = (
            series.index.to_numpy(dtype=float)
            if len(series)
            else np.unique(
                pd.to_numeric(self.table.get("ts", pd.Series(dtype=float)), errors="coerce").dropna().to_numpy()
            )
        )
        steps = np.diff(np.sort(ts))
        steps = steps[steps > 0]
        return float(np.median(steps)) if len(steps) else None

    # --- engine dialects (llama.cpp, Triton/TensorRT-LLM, ...) -----------------------------------
    def engines(self) -> list[str]:
        """The engines whose metrics were scraped (vocabulary.DIALECT_PREFIXES), usually one."""
        return engine_dialects(self.table)

    def gaps(self) -> dict[str, str]:
        """{concept: why this engine does not export it}: what a verdict should say it could not see."""
        return dialect_gaps(self.table)

    def source(self, concept: str) -> Source | None:
        """The vendor metric read for `concept` (its name and vendor go into evidence)."""
        return self.metrics.source(concept)

    @functools.cached_property
    def _cache_configs(self) -> list[dict[str, str]]:
        """The labels of vLLM's `cache_config_info` (block_size, num_gpu_blocks, ...), one per replica, at
        its last scrape; [] when the engine exports none. The simulator exports it as vLLM does."""
        table = self.table
        if table.empty or "metric" not in table:
            return []
        rows = table[table["metric"] == "vllm:cache_config_info"]
        ts = pd.to_numeric(rows["ts"], errors="coerce")
        configs = []
        for labels in rows.loc[ts == ts.max(), "labels"]:
            try:
                configs.append({str(k): str(v) for k, v in json.loads(str(labels)).items()})
            except (ValueError, AttributeError):
                continue
        return configs

    def cache_config(self) -> dict[str, str]:
        """One replica's cache_config_info labels at the last scrape ({} without them)."""
        return self._cache_configs[-1] if self._cache_configs else {}

    def kv_pool_tokens(self) -> int | None:
        """Tokens one engine's KV pool holds (num_gpu_blocks x block_size), when its metrics say: the
        smallest replica's at the last scrape (KV usage is read as the fullest replica's)."""
        pools = []
        for config in self._cache_configs:
            try:
                pools.append(int(float(config["num_gpu_blocks"])) * int(float(config["block_size"])))
            except (KeyError, ValueError):
                continue
        pools = [p for p in pools if p > 0]
        return min(pools) if pools else None

    def _running_waiting(self, start: float | None = None, end: float | None = None) -> pd.DataFrame:
        """running and waiting at the scrapes that have both, optionally inside [start, end]."""
        both = pd.concat(
            {"running": self.gauge_series("running"), "waiting": self.gauge_series("waiting")}, axis=1
        ).dropna()
        if start is not None and end is not None:
            both = both[(both.index >= start) & (both.index <= end)]
        return both

    def running_cap(self) -> RunningCap | None:
        """The engine's cap on running requests (llama.cpp: its slots; vLLM: max_num_seqs).

        Its own metric when it exports one (TensorRT-LLM). Otherwise inferred from the whole run as
        the most requests seen running at a scrape where others were waiting: an engine queues a
        request only when it cannot run it (llama.cpp defers a task only when no slot is free,
        server-context.cpp), so running at such a moment is the cap in force. Read from /metrics
        rather than llama.cpp's /props total_slots so it works the same for every engine and for
        Prometheus exports (`report --prometheus`), which have no /props. None when nothing ever
        waited: then no cap was reached, and "running" alone cannot tell a cap from the offered load.
        """
        if self.has("running_cap"):
            series = self.gauge_series("running_cap")
            if len(series) and series.max() > 0:
                source = self.source("running_cap")
                return RunningCap(float(series.max()), f"the engine's {source.name if source else 'cap'} metric")
        if not (self.has("running") and self.has("waiting")):
            return None
        both = self._running_waiting()
        queued = both[both["waiting"] > 0]
        if queued.empty or queued["running"].max() <= 0:
            return None
        return RunningCap(
            float(queued["running"].max()),
            f"most requests running while others waited ({len(queued)} scrapes with a queue)",
        )

    def slot_saturation(self, start: float, end: float) -> SlotSaturation | None:
        """How often, in [start, end], running sat at the cap and requests waited (None: not measurable)."""
        cap = self.running_cap()
        if cap is None:
            return None
        both = self._running_waiting(start, end)
        if both.empty:
            return None
        pinned = both["running"] >= cap.value
        waiting = both["waiting"] > 0
        running_stats, waiting_stats = self.gauge("running", start, end), self.gauge("waiting", start, end)
        assert running_stats is not None and waiting_stats is not None  # `both` has scrapes of each in the window
        return SlotSaturation(
            cap,
            float(pinned.mean()),
            float(waiting.mean()),
            float((pinned & waiting).mean()),
            running_stats,
            waiting_stats,
        )

    def _value_at(self, concept: str, ts: float) -> float | None:
        """A cumulative series (summed over series) at its last scrape at or before `ts`."""
        series = self.gauge_series(concept)  # one value per scrape; counters are summed the same way
        before = series[series.index <= ts]
        return float(before.iloc[-1]) if len(before) else None

    def batch_per_step(self, start: float, end: float) -> float | None:
        """Mean requests per engine step (forward pass) in [start, end].

        llama.cpp exports only the mean since the server started (n_busy_slots_per_decode); with its
        step counter the window's own mean is (mean_end * steps_end - mean_start * steps_start) /
        (steps_end - steps_start). None without both metrics, or without steps in the window.
        """
        if not (self.has("busy_slots_per_step") and self.has("engine_steps")):
            return None
        steps_ts = self.gauge_series("engine_steps").index
        inside = steps_ts[(steps_ts >= start) & (steps_ts <= end)]
        if len(inside) and not (steps_ts <= start).any():
            start = float(inside[0])  # scraping began inside the window: measure from its first scrape
        m0, n0 = self._value_at("busy_slots_per_step", start), self._value_at("engine_steps", start)
        m1, n1 = self._value_at("busy_slots_per_step", end), self._value_at("engine_steps", end)
        if m1 is None or n1 is None:
            return None
        if m0 is None or n0 is None or n0 > n1:  # a restart inside the window: its counters began at zero
            m0, n0 = 0.0, 0.0
        steps = n1 - n0
        return (m1 * n1 - m0 * n0) / steps if steps > 0 else None

    def time_per_token(self, start: float, end: float, phase: str = "decode") -> float | None:
        """The engine's own mean seconds per output token (`decode`) or per prompt token (`prompt`)
        in [start, end], from its summed-time and token counters (llama.cpp)."""
        seconds, tokens = ("decode_seconds", "gen_tokens") if phase == "decode" else ("prompt_seconds", "prompt_tokens")
        spent, count = self.increase(seconds, start, end), self.increase(tokens, start, end)
        if spent is None or not count:
            return None
        return spent / count

    def time_span(self) -> tuple[float, float] | None:
        if self.table.empty:
            return None
        ts = pd.to_numeric(self.table["ts"], errors="coerce").dropna()
        return (float(ts.min()), float(ts.max())) if len(ts) else None
