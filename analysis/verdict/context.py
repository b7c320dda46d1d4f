"""What the verdict rules look at: the windows of the run and its baseline (thresholds: thresholds.py).

A *window* is a stretch of the run judged on its own: each phase with traffic, and, when a run
has fewer than three phases or the user count changed inside a phase (fixed users, a web UI run
whose users were changed by hand), equal time slices of the loaded span as well, so a one-phase
run is judged on its own numbers instead of against a baseline it never had. The *baseline* is
the least-loaded window (fewest users; among slices, the fewest requests in the engine). Client
numbers of a window come from the phase table for phases and from the records for slices; limits
seen from the client side (errors, latency rise, flat throughput) are attached to each window
here; the engine's own saturation signals are read in analysis/verdict/reading.py. Everything is
read in model time (loadline.analysis.data.timescale.model_run), like the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from loadline.analysis.data.columns import numbers
from loadline.analysis.verdict.engine_host import engine_shares_host
from loadline.analysis.verdict.signals import Signals
from loadline.analysis.verdict.thresholds import Thresholds
from loadline.core.judge import RANK_WIDTHS, min_samples
from loadline.core.records import Status


@dataclass
class Window:
    label: str
    start: float  # the run's clock (model time)
    end: float
    users: float
    kind: str  # "phase" or "slice"
    stats: dict[str, float | None] = field(default_factory=dict)  # client numbers (ms, req/s); see CLIENT_STATS
    limits: list[str] = field(default_factory=list)  # client-side reasons this window shows a limit
    failing: bool = False  # one of them is its share of failed requests (the others: latency, throughput)

    @property
    def duration(self) -> float:
        return self.end - self.start

    def stat(self, name: str) -> float | None:
        return num(self.stats.get(name))


CLIENT_STATS = (
    "requests",
    "rps",
    "error_rate",
    "ttft_p50_ms",
    "ttft_p95_ms",
    "e2e_p50_ms",
    "e2e_p95_ms",
    "tpot_p50_ms",
    "ttft_mean_ms",
)


@dataclass
class Context:
    run: Any
    phases: pd.DataFrame  # phase-table rows with traffic, in time order
    windows: list[Window]
    baseline: Window | None
    signals: Signals
    th: Thresholds
    slo_failures: list[dict] = field(default_factory=list)  # failed SLO criteria (gate.Criterion.as_dict())
    measurement_floor_ms: float | None = None  # model time, from the validity check when it ran

    @property
    def span(self) -> tuple[float, float]:
        if self.windows:
            return min(w.start for w in self.windows), max(w.end for w in self.windows)
        return self.signals.time_span() or (0.0, 0.0)

    def requests_in(self, start: float, end: float) -> pd.DataFrame:
        return requests_between(getattr(self.run, "requests", None), start, end)

    @property
    def engine_shares_host(self) -> bool:
        """Did the engine run on the load generator's own host (analysis/verdict/engine_host.py)?"""
        return engine_shares_host(getattr(self.run, "manifest", None) or {}, getattr(self.run, "requests", None))


def num(value: Any) -> float | None:
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if np.isnan(value) else value


def _users(row: pd.Series) -> float:
    for name in ("users", "target_users"):
        value = num(row.get(name))
        if value is not None:
            return value
    return 0.0


# What the verdict's rules read of a window's requests: a window's rows are taken with these
# columns only (36 windows' whole-width copies cost more than the rest of the verdict at 10 M rows).
WINDOW_COLUMNS = (
    "start_wall",
    "end_wall",
    "status",
    "error_class",
    "http_status",
    "ttft_ms",
    "e2e_ms",
    "tpot_ms",
    "ttfb_ms",
    "itl_p50_ms",
    "itl_p99_ms",
    "output_tokens",
    "prompt_tokens",
    "cached_tokens",
    "read_delay_ms",
    "worker_id",
    "content_type",
    "error_message",
    "error_detail",
)


def requests_between(req: pd.DataFrame | None, start: float, end: float) -> pd.DataFrame:
    if req is None or len(req) == 0:
        return pd.DataFrame(columns=["start_wall", "status", "error_class", "http_status", "ttft_ms", "e2e_ms"])
    wall = numbers(req["start_wall"])
    columns = [c for c in WINDOW_COLUMNS if c in req.columns]
    return req.loc[(wall >= start) & (wall < end), columns]


def is_invalid_request(rows: pd.DataFrame) -> pd.Series:
    """Requests the server refused as malformed or unauthorised (HTTP 4xx but 408/429): no capacity signal."""
    status = pd.to_numeric(rows.get("http_status", pd.Series(0, index=rows.index)), errors="coerce").fillna(0)
    return (rows["status"] == Status.ERROR) & (status >= 400) & (status < 500) & ~status.isin([408, 429])


def capacity_error_rate(requests: pd.DataFrame | None, start: float, end: float) -> float | None:
    """Share of requests started in [start, end) that failed for a reason other than an invalid request."""
    rows = requests_between(requests, start, end)
    if rows.empty:
        return None
    rows = rows[rows["status"] != Status.CANCELLED]
    if rows.empty:
        return None
    failed = (rows["status"] == Status.ERROR) & ~is_invalid_request(rows)
    return float(failed.sum()) / len(rows)


# --- windows -------------------------------------------------------------------------------------
def phase_windows(
    phases: pd.DataFrame, requests: pd.DataFrame | None, generator: pd.DataFrame | None = None
) -> list[Window]:
    out = []
    for _, row in phases.iterrows():
        users = _users(row)
        if users <= 0:  # a run with no shape records no users in its phase: the generator's samples do
            users = _generator_users(generator, float(row["start_wall"]), float(row["end_wall"])) or 0.0
        stats = {name: num(row.get(name)) for name in CLIENT_STATS}
        rows = requests_between(requests, float(row["start_wall"]), float(row["end_wall"]))
        ok = rows[rows["status"] == Status.OK] if len(rows) else rows
        ttft = pd.to_numeric(ok.get("ttft_ms", pd.Series(dtype=float)), errors="coerce").dropna()
        stats["ttft_mean_ms"] = float(ttft.mean()) if len(ttft) else None
        out.append(Window(str(row["label"]), float(row["start_wall"]), float(row["end_wall"]), users, "phase", stats))
    return out


def slice_windows(
    phases: pd.DataFrame,
    requests: pd.DataFrame | None,
    generator: pd.DataFrame | None,
    signals: Signals,
    th: Thresholds,
) -> list[Window]:
    """Equal time slices of the loaded span, each long enough for `min_slice_scrapes` engine scrapes.

    Labelled in seconds from the first phase's start, as the report's charts draw it."""
    if not len(phases):
        return []
    start, end = float(phases["start_wall"].min()), float(phases["end_wall"].max())
    scrape = signals.scrape_interval() or 0.0
    count = th.slices
    if scrape > 0:
        count = max(1, min(count, int((end - start) // (th.min_slice_scrapes * scrape))))
    if count < 2:
        return []
    edges = np.linspace(start, end, count + 1)
    out = []
    for i in range(count):
        a, b = float(edges[i]), float(edges[i + 1])
        stats = client_stats(requests, a, b)
        users = _generator_users(generator, a, b)
        if users is None:
            inside = phases[(phases["start_wall"] < b) & (phases["end_wall"] > a)]
            users = float(inside.apply(_users, axis=1).max()) if len(inside) else 0.0
        out.append(Window(f"t+{a - start:.0f}..{b - start:.0f} s", a, b, users, "slice", stats))
    return [w for w in out if (w.stat("requests") or 0) > 0]


def client_stats(requests: pd.DataFrame | None, start: float, end: float) -> dict[str, float | None]:
    """A window's client numbers from the records, as the phase table would give them."""
    rows = requests_between(requests, start, end)
    rows = rows[rows["status"] != Status.CANCELLED] if len(rows) else rows
    ok = rows[rows["status"] == Status.OK] if len(rows) else rows
    stats: dict[str, float | None] = {
        "requests": float(len(rows)),
        "rps": len(ok) / (end - start) if end > start else None,
        "error_rate": capacity_error_rate(requests, start, end),
    }
    for metric in ("ttft", "e2e", "tpot"):
        values = pd.to_numeric(ok.get(f"{metric}_ms", pd.Series(dtype=float)), errors="coerce").dropna().to_numpy()
        stats[f"{metric}_p50_ms"] = float(np.percentile(values, 50)) if len(values) else None
        stats[f"{metric}_p95_ms"] = float(np.percentile(values, 95)) if len(values) else None
        if metric == "ttft":
            stats["ttft_mean_ms"] = float(values.mean()) if len(values) else None
    return stats


def _generator_users(generator: pd.DataFrame | None, start: float, end: float) -> float | None:
    if generator is None or len(generator) == 0 or "users" not in generator:
        return None
    ts = pd.to_numeric(generator["ts"], errors="coerce")
    rows = generator[(ts >= start) & (ts < end)]
    if rows.empty:
        return None
    per_ts = rows.assign(users=pd.to_numeric(rows["users"], errors="coerce")).groupby("ts")["users"].sum()
    return float(per_ts.mean()) if len(per_ts) else None


def needs_slices(phases: pd.DataFrame, timeline: pd.DataFrame | None) -> bool:
    """Few phases, or users changed inside one (a web UI run; `timeline` is phases.csv): judge time slices too."""
    if len(phases) < 3:
        return True
    if timeline is not None and {"users_start", "users_end"} <= set(timeline.columns):
        a = pd.to_numeric(timeline["users_start"], errors="coerce")
        b = pd.to_numeric(timeline["users_end"], errors="coerce")
        return bool(((a - b).abs() > 0).any())
    return False


# --- client-side limits ------------------------------------------------------------------------
def quantile_bounds(values: np.ndarray, q: float) -> tuple[float, float] | None:
    """Distribution-free bounds of the q-quantile: the order statistics two rank widths
    (sqrt(n q (1-q)) each) below and above rank n q. None with too few values (min_samples)."""
    n = len(values)
    if n < max(1, min_samples(q)):
        return None
    ordered = np.sort(values)
    width = RANK_WIDTHS * np.sqrt(n * q * (1 - q))
    lo = int(np.clip(np.floor(n * q - width), 0, n - 1))
    hi = int(np.clip(np.ceil(n * q + width) - 1, 0, n - 1))
    return float(ordered[lo]), float(ordered[hi])


def _ok_values(requests: pd.DataFrame | None, w: Window, metric: str) -> np.ndarray | None:
    if requests is None or not len(requests):
        return None
    column = f"{metric}_ms"
    if column not in requests.columns:
        return np.empty(0)
    wall = numbers(requests["start_wall"])
    ok = (wall >= w.start) & (wall < w.end) & (requests["status"] == Status.OK).to_numpy()
    values = numbers(requests[column])[ok]
    return values[~np.isnan(values)]


def latency_rise(
    w: Window, baseline: Window, metric: str, stat: str, th: Thresholds, floor_ms: float, requests: pd.DataFrame | None
) -> bool:
    """Whether `w`'s percentile rose past the baseline's by `latency_rise` times and `floor_ms`,
    beyond sampling noise: the window's lower bound against the baseline's upper bound (seen: the
    ~10-request slices of a healthy 1-2 user run, median 265 vs 74 ms on a busy machine, read as
    a limit). Without per-request records, the point estimates, each from enough values."""
    q = int(stat[1:]) / 100
    now_values, base_values = _ok_values(requests, w, metric), _ok_values(requests, baseline, metric)
    now: float | None
    base: float | None
    if now_values is not None and base_values is not None:
        now_b, base_b = quantile_bounds(now_values, q), quantile_bounds(base_values, q)
        if now_b is None or base_b is None:
            return False
        now, base = now_b[0], base_b[1]
    else:
        if min(w.stat("requests") or 0, baseline.stat("requests") or 0) < min_samples(q):
            return False
        now, base = w.stat(f"{metric}_{stat}_ms"), baseline.stat(f"{metric}_{stat}_ms")
    return bool(base and now and now / base >= th.latency_rise and now - base >= floor_ms)


def mark_client_limits(
    windows: list[Window], baseline: Window | None, th: Thresholds, floor_ms: float, requests: pd.DataFrame | None
) -> None:
    """Attach to each window the client-side reasons it shows a limit (errors, latency, flat throughput)."""
    prev: Window | None = None
    for w in windows:
        err = capacity_error_rate(requests, w.start, w.end)
        err = w.stat("error_rate") if err is None else err
        if err is not None and err >= th.error_rate:
            w.limits.append(f"{err:.1%} of requests failed in {w.label} (invalid-request 4xx excluded)")
            w.failing = True
        # a capacity limit is latency that rises with load: a window no more loaded than the baseline
        # (the slices of a fixed-user run) that is slower had a transient, not a limit
        if baseline is not None and w is not baseline and w.users > baseline.users:
            # the median first, then the tail: queueing often shows in P95 well before it moves the median
            for metric, stat in (("ttft", "p50"), ("e2e", "p50"), ("ttft", "p95"), ("e2e", "p95")):
                base, now = baseline.stat(f"{metric}_{stat}_ms"), w.stat(f"{metric}_{stat}_ms")
                if base and now and latency_rise(w, baseline, metric, stat, th, floor_ms, requests):
                    w.limits.append(
                        f"{metric.upper()} {stat} {now:.0f} ms in {w.label} vs "
                        f"{base:.0f} ms in {baseline.label} ({now / base:.1f}x)"
                    )
                    break
        if w.kind == "phase" and prev is not None:
            flat = _flat_throughput(prev, w, th)
            if flat:
                w.limits.append(flat)
        if w.kind == "phase" and (prev is None or w.users >= prev.users):
            prev = w


def _flat_throughput(prev: Window, w: Window, th: Thresholds) -> str | None:
    # Little's law: in a closed loop, flat throughput under more users must show as longer requests;
    # without that, the "flat" step is a ramp-up transient or pacing, not a limit.
    u0, u1 = prev.users, w.users
    r0, r1 = prev.stat("rps"), w.stat("rps")
    enough = min(prev.stat("requests") or 0, w.stat("requests") or 0) >= th.min_requests
    e0, e1 = prev.stat("e2e_p50_ms"), w.stat("e2e_p50_ms")
    slower = bool(e0 and e1 and e1 / e0 >= th.flat_latency_growth)
    if (
        enough
        and slower
        and u0 > 0
        and r0
        and r1 is not None
        and u1 / u0 >= th.users_growth
        and r1 / r0 < th.throughput_gain
    ):
        return f"throughput flat: {r1:.2f} req/s at {u1:.0f} users vs {r0:.2f} at {u0:.0f} users"
    return None


def build_context(
    run: Any,
    phase_table: pd.DataFrame | None,
    th: Thresholds | None = None,
    slo_failures: list[dict] | None = None,
    measurement_floor_ms: float | None = None,
) -> Context:
    th = th or Thresholds()
    signals = Signals(getattr(run, "server_metrics", None))
    phases = _phases_with_traffic(phase_table)
    requests = getattr(run, "requests", None)
    windows = phase_windows(phases, requests, getattr(run, "generator", None))
    if needs_slices(phases, getattr(run, "phases", None)):
        windows += slice_windows(phases, requests, getattr(run, "generator", None), signals, th)
    baseline = _baseline(windows, signals)
    # a latency rise must clear the noise floor and the client's own measurement floor (model ms)
    floor_ms = max(th.noise_floor_ms, measurement_floor_ms or 0.0)
    mark_client_limits(windows, baseline, th, floor_ms, requests)
    return Context(run, phases, windows, baseline, signals, th, list(slo_failures or []), measurement_floor_ms)


def _baseline(windows: list[Window], signals: Signals) -> Window | None:
    """The least-loaded window: fewest users, then (one-phase runs) fewest requests in the engine."""
    if not windows:
        return None

    def in_engine(w: Window) -> float:
        running = signals.gauge("running", w.start, w.end)
        waiting = signals.gauge("waiting", w.start, w.end)
        return (running.mean if running else 0.0) + (waiting.mean if waiting else 0.0)

    return min(windows, key=lambda w: (w.users, in_engine(w), w.start))


def _phases_with_traffic(phase_table: pd.DataFrame | None) -> pd.DataFrame:
    if phase_table is None or len(phase_table) == 0:
        return pd.DataFrame(columns=["label", "start_wall", "end_wall", "users", "requests"])
    table = phase_table.copy()
    requests = pd.to_numeric(table.get("requests", pd.Series(0, index=table.index)), errors="coerce").fillna(0)
    table = table[requests > 0]
    return table.sort_values("start_wall", kind="stable").reset_index(drop=True)
