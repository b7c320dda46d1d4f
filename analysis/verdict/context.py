"""What the verdict rules look at: the baseline, where the limit was reached, and the loaded window.

The rules compare a *loaded* window (from the first phase that showed a limit, through the phases
at least as loaded after it) against the *baseline* (the least-loaded phase with traffic). A limit
is reached in a phase when, compared with the baseline, latency grew `latency_rise` times (and by
more than the noise floor), or requests failed, or throughput stopped following users.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from analysis.verdict.signals import Signals
from loadline.core.runsettings import time_scale_of


@dataclass(frozen=True)
class Thresholds:
    """Every number a rule compares with, in one place. Sources: DOMAIN.md §Bottleneck verdicts."""

    gpu_busy: float = 0.95  # rule 1: "GPU utilization >= 95 %"
    gpu_not_busy: float = 0.60  # rule 2: "only 40-50 % yet throughput flat" (with margin)
    kv_pinned: float = 0.90  # rule 3: KV usage "pinned near 1.0"
    leak_rise: float = 0.10  # rule 3 (leak): the memory floor rose by 10 points of the pool
    idle_residue: float = 0.02  # "memory creeping up by > 2 % ... at idle means a leak"
    host_cpu_busy: float = 0.90  # rule 4: host CPU saturated
    latency_rise: float = 2.0  # "TTFT high": twice the baseline
    tpot_rise: float = 1.5  # "TPOT high": per-token time 1.5x the baseline (decode slowed by the batch)
    noise_floor_ms: float = 50.0  # a TTFT/E2E rise smaller than this is noise, whatever the ratio (unscaled time)
    token_noise_floor_ms: float = 5.0  # the same for per-token times (TPOT, ITL)
    throughput_gain: float = 1.10  # users grew >= 1.5x but requests/s grew < 10 %: flat
    users_growth: float = 1.5
    flat_latency_growth: float = 1.3  # ... and E2E p50 grew 1.3x over the previous step
    min_requests: int = 50  # a phase with fewer requests is too noisy to call its throughput flat (Poisson ~14 %)
    error_rate: float = 0.01  # >= 1 % failed requests is a limit (the SLO is stricter: 0)
    waiting_share: float = 0.5  # "requests queue": waiting > 0 in at least half the samples
    running_plateau: float = 0.9  # running stays within 10 % of its peak: a cap
    outside_ratio: float = 2.0  # client time at least twice the server's own


@dataclass
class Limit:
    reached: bool
    phase: str | None = None
    reasons: list[str] = field(default_factory=list)


@dataclass
class Context:
    run: Any
    phases: pd.DataFrame  # phase-table rows with traffic, in time order
    signals: Signals
    th: Thresholds
    baseline: pd.Series
    peak: pd.Series  # the most loaded phase of the window: client-side ratios are taken there
    limit: Limit
    window: tuple[float, float]  # the loaded window (wall clock)
    base_window: tuple[float, float]
    time_scale: float = 1.0

    @property
    def floor_ms(self) -> float:
        return self.th.noise_floor_ms / self.time_scale

    def ratio(self, column: str) -> float | None:
        """peak / baseline for a phase-table column, None when either side is missing or zero."""
        base, peak = _num(self.baseline.get(column)), _num(self.peak.get(column))
        if base is None or peak is None or base <= 0:
            return None
        return peak / base

    def risen(self, column: str, factor: float) -> bool:
        """Did `column` grow `factor` times from the baseline, by more than the noise floor?"""
        ratio = self.ratio(column)
        if ratio is None:
            return False
        gain = _num(self.peak.get(column)) - _num(self.baseline.get(column))
        per_token = column.startswith(("tpot", "itl"))
        floor = (self.th.token_noise_floor_ms if per_token else self.th.noise_floor_ms) / self.time_scale
        return ratio >= factor and gain >= floor

    def requests_in(self, start: float, end: float) -> pd.DataFrame:
        req = getattr(self.run, "requests", None)
        if req is None or len(req) == 0:
            return pd.DataFrame(columns=["start_wall", "status", "error_class", "http_status", "ttft_ms", "e2e_ms"])
        wall = pd.to_numeric(req["start_wall"], errors="coerce")
        return req[(wall >= start) & (wall < end)]

    def describe_window(self) -> str:
        labels = self.phases[(self.phases["start_wall"] >= self.window[0]) & (self.phases["end_wall"] <= self.window[1])]["label"]
        names = [str(x) for x in labels]
        if not names:
            return "the run"
        return names[0] if len(names) == 1 else f"{names[0]} .. {names[-1]}"


def _num(value: Any) -> float | None:
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if np.isnan(value) else value


def _users(row: pd.Series) -> float:
    for name in ("users", "target_users"):
        value = _num(row.get(name))
        if value is not None:
            return value
    return 0.0


def is_invalid_request(rows: pd.DataFrame) -> pd.Series:
    """Requests the server refused as malformed or unauthorised (HTTP 4xx but 408/429): no capacity signal."""
    status = pd.to_numeric(rows.get("http_status", pd.Series(0, index=rows.index)), errors="coerce").fillna(0)
    return (rows["status"].astype(str) == "error") & (status >= 400) & (status < 500) & ~status.isin([408, 429])


def capacity_error_rate(requests: pd.DataFrame | None, start: float, end: float) -> float | None:
    """Share of requests started in [start, end) that failed for a reason other than an invalid request."""
    if requests is None or len(requests) == 0:
        return None
    wall = pd.to_numeric(requests["start_wall"], errors="coerce")
    rows = requests[(wall >= start) & (wall < end)]
    rows = rows[rows["status"].astype(str) != "cancelled"]
    if rows.empty:
        return None
    failed = (rows["status"].astype(str) == "error") & ~is_invalid_request(rows)
    return float(failed.sum()) / len(rows)


def find_limit(phases: pd.DataFrame, baseline: pd.Series, th: Thresholds, floor_ms: float,
               requests: pd.DataFrame | None = None, scale: float = 1.0) -> tuple[Limit, int]:
    """The first phase where latency, errors or throughput show a limit; (Limit, its position).

    `phases` is in wall time; `scale` (the run's time scale) only converts the numbers quoted in
    the reasons to model time.
    """
    prev = None
    for pos in range(len(phases)):
        row = phases.iloc[pos]
        reasons = []
        err = capacity_error_rate(requests, float(row["start_wall"]), float(row["end_wall"]))
        if err is None:
            err = _num(row.get("error_rate"))
        if err is not None and err >= th.error_rate:
            reasons.append(f"{err:.1%} of requests failed in {row['label']} (invalid-request 4xx excluded)")
        # the median first, then the tail: queueing often shows in P95 well before it moves the median
        for metric, stat in (("ttft", "p50"), ("e2e", "p50"), ("ttft", "p95"), ("e2e", "p95")):
            col = f"{metric}_{stat}_ms"
            base, now = _num(baseline.get(col)), _num(row.get(col))
            if base and now and now / base >= th.latency_rise and now - base >= floor_ms:
                reasons.append(f"{metric.upper()} {stat} {now * scale:.0f} ms in {row['label']} vs "
                               f"{base * scale:.0f} ms at baseline ({now / base:.1f}x)")
                break
        if prev is not None:
            u0, u1 = _users(prev), _users(row)
            r0, r1 = _num(prev.get("rps")), _num(row.get("rps"))
            enough = min(_num(prev.get("requests")) or 0, _num(row.get("requests")) or 0) >= th.min_requests
            # Little's law: in a closed loop, flat throughput under more users must show as longer requests;
            # without that, the "flat" step is a ramp-up transient or pacing, not a limit.
            e0, e1 = _num(prev.get("e2e_p50_ms")), _num(row.get("e2e_p50_ms"))
            slower = bool(e0 and e1 and e1 / e0 >= th.flat_latency_growth)
            if enough and slower and u0 > 0 and r0 and r1 is not None and u1 / u0 >= th.users_growth \
                    and r1 / r0 < th.throughput_gain:
                reasons.append(f"throughput flat: {r1 / scale:.2f} req/s at {u1:.0f} users vs {r0 / scale:.2f} "
                               f"at {u0:.0f} users")
        if reasons:
            return Limit(True, str(row["label"]), reasons), pos
        if _users(row) >= (_users(prev) if prev is not None else 0):
            prev = row
    return Limit(False), -1


def build_context(run: Any, phase_table: pd.DataFrame | None, th: Thresholds | None = None) -> Context:
    th = th or Thresholds()
    signals = Signals(getattr(run, "server_metrics", None))
    phases = _phases_with_traffic(run, phase_table)
    manifest = getattr(run, "manifest", None) or {}
    scale = _time_scale(manifest)
    floor = th.noise_floor_ms / scale
    users = phases.apply(_users, axis=1) if len(phases) else pd.Series(dtype=float)
    baseline = phases.loc[users.idxmin()] if len(phases) else pd.Series(dtype=object)
    requests = getattr(run, "requests", None)
    limit, pos = find_limit(phases, baseline, th, floor, requests, scale) if len(phases) else (Limit(False), -1)
    if pos < 0:
        pos = int(np.flatnonzero(users.to_numpy() == users.max())[-1]) if len(phases) else -1
    if pos >= 0:
        first = phases.iloc[pos]
        later = phases.iloc[pos:]
        loaded = later[later.apply(_users, axis=1) >= _users(first)]
        # symptoms are read where they are strongest: the most loaded phase of the window
        peak = loaded.iloc[int(np.flatnonzero(loaded.apply(_users, axis=1).to_numpy() == loaded.apply(_users, axis=1).max())[-1])]
        window = (float(first["start_wall"]), float(loaded["end_wall"].max()))
        base_window = (float(baseline["start_wall"]), float(baseline["end_wall"]))
    else:
        peak = baseline
        span = signals.time_span() or (0.0, 0.0)
        window = base_window = span
    return Context(run, phases, signals, th, baseline, peak, limit, window, base_window, scale)


def _time_scale(manifest: dict) -> float:
    """The run's time compression (loadline.core.runsettings, the one accessor): latency floors shrink with it."""
    return time_scale_of(manifest)


def _phases_with_traffic(run: Any, phase_table: pd.DataFrame | None) -> pd.DataFrame:
    if phase_table is None or len(phase_table) == 0:
        return pd.DataFrame(columns=["label", "start_wall", "end_wall", "users", "requests"])
    table = phase_table.copy()
    requests = pd.to_numeric(table.get("requests", pd.Series(0, index=table.index)), errors="coerce").fillna(0)
    table = table[requests > 0]
    return table.sort_values("start_wall", kind="stable").reset_index(drop=True)
