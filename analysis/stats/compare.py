"""Two runs side by side, phase by phase, with a regression flag that ignores run-to-run noise.

A latency percentile regresses when the new value is worse than the base by more than the
threshold (default +10 %) AND the two values' 95 % confidence intervals do not overlap. The
intervals are distribution-free: for quantile q over n samples the true quantile lies, with ~95 %
confidence, between the order statistics of rank n*q -/+ 1.96*sqrt(n*q*(1-q)) (normal approximation
of the binomial). So a P99 from 50 samples can never count (its interval is open above); a P50
from 50,000 need only cross the threshold. Throughput (requests/s, tokens/s) regresses when it falls by more
than the threshold and by more than 3 Poisson standard deviations of the base's count.
Phases are matched by position when both runs have the same phase labels, else by label. Two rate
sweeps also compare their answers, the max SLO-compliant rate (`_sweep_row`).
Both runs are read in model time (loadline.analysis.data.timescale.model_run), so runs at different scales compare.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from loadline.analysis.data.load import RunData
from loadline.analysis.data.timescale import model_run
from loadline.analysis.stats.phases import judged_phases, phase_samples, phase_table

LATENCY_METRICS = ("e2e", "ttft", "tpot", "itl")
QUANTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))
Z = 1.96


@dataclass
class Comparison:
    rows: pd.DataFrame  # phase, metric, base, new, change, base_low, base_high, new_low, new_high, regression
    unmatched: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> pd.DataFrame:
        return self.rows[self.rows["regression"]]


def quantile_interval(sorted_samples: np.ndarray, q: float) -> tuple[float, float, float]:
    """(estimate, low, high) of quantile q with a distribution-free ~95 % interval.

    The bounds are the order statistics X_(l), X_(u) (1-based) with l, u = n*q -/+ 1.96*sqrt(n*q*(1-q)).
    When u > n the true quantile may lie above every sample (too few samples for that tail): the
    upper bound is +inf, so such a tail can never be called a regression; likewise l < 1 -> -inf.
    """
    n = sorted_samples.size
    if n == 0:
        return (math.nan,) * 3
    half = Z * math.sqrt(n * q * (1 - q))
    lower_rank, upper_rank = math.floor(n * q - half), math.ceil(n * q + half)
    low = float(sorted_samples[lower_rank - 1]) if lower_rank >= 1 else -math.inf
    high = float(sorted_samples[upper_rank - 1]) if upper_rank <= n else math.inf
    return float(np.quantile(sorted_samples, q)), low, high


def match_phases(base: pd.DataFrame, new: pd.DataFrame) -> tuple[list[tuple[int, int]], list[str]]:
    """Pairs of row positions (base, new) and the labels left unmatched."""
    base_labels, new_labels = list(base["label"]), list(new["label"])
    if base_labels == new_labels or (len(base_labels) == len(new_labels) == 1):
        return [(i, i) for i in range(len(base_labels))], []
    pairs = [(i, new_labels.index(label)) for i, label in enumerate(base_labels) if label in new_labels]
    matched_new = {j for _, j in pairs}
    unmatched = [f"base only: {label}" for label in base_labels if label not in new_labels]
    unmatched += [f"new only: {label}" for j, label in enumerate(new_labels) if j not in matched_new]
    return pairs, unmatched


def _latency_rows(label: str, base: dict, new: dict, threshold: float) -> list[dict]:
    rows = []
    for metric in LATENCY_METRICS:
        to_ms = 1.0 / 1000.0 if metric == "itl" else 1.0  # pooled ITL samples are integer microseconds
        b, n = np.sort(base[metric]) * to_ms, np.sort(new[metric]) * to_ms
        for name, q in QUANTILES:
            bv, bl, bh = quantile_interval(b, q)
            nv, nl, nh = quantile_interval(n, q)
            change = nv / bv - 1.0 if bv > 0 else math.nan
            regression = bool(change > threshold and nl > bh)
            rows.append(
                {
                    "phase": label,
                    "metric": f"{metric}_{name}_ms",
                    "base": bv,
                    "new": nv,
                    "change": change,
                    "base_low": bl,
                    "base_high": bh,
                    "new_low": nl,
                    "new_high": nh,
                    "regression": regression,
                }
            )
    return rows


def _rate_rows(label: str, base: pd.Series, new: pd.Series, threshold: float) -> list[dict]:
    rows = []
    duration = float(base["end_wall"] - base["start_wall"])
    for metric, _count in (("rps", base["ok"]), ("output_tokens_per_s", None)):
        bv, nv = float(base[metric]), float(new[metric])
        change = nv / bv - 1.0 if bv > 0 else math.nan
        # Poisson noise of the base's request count, as a rate; tokens/s inherits the request noise
        noise = 3 * math.sqrt(max(float(base["ok"]), 1.0)) / duration if duration > 0 else math.inf
        noise = noise if metric == "rps" else noise * (bv / float(base["rps"]) if base["rps"] else math.inf)
        regression = bool(-change > threshold and (bv - nv) > noise)
        rows.append(
            {
                "phase": label,
                "metric": metric,
                "base": bv,
                "new": nv,
                "change": change,
                "base_low": bv - noise,
                "base_high": bv + noise,
                "new_low": math.nan,
                "new_high": math.nan,
                "regression": regression,
            }
        )
    return rows


def _error_row(label: str, base: pd.Series, new: pd.Series) -> dict:
    """Error rate regresses when a two-proportion z-test says it rose (z > 3)."""
    n1, n2 = float(base["ok"] + base["errors"]), float(new["ok"] + new["errors"])
    p1, p2 = (base["errors"] / n1 if n1 else 0.0), (new["errors"] / n2 if n2 else 0.0)
    pooled = (base["errors"] + new["errors"]) / (n1 + n2) if n1 + n2 else 0.0
    se = math.sqrt(pooled * (1 - pooled) * (1 / max(n1, 1) + 1 / max(n2, 1)))
    regression = bool(p2 > p1 and (se == 0 or (p2 - p1) / se > 3))
    return {
        "phase": label,
        "metric": "error_rate",
        "base": p1,
        "new": p2,
        "change": p2 - p1,
        "base_low": math.nan,
        "base_high": math.nan,
        "new_low": math.nan,
        "new_high": math.nan,
        "regression": regression,
    }


def _sweep_row(base: dict, new: dict, threshold: float) -> dict | None:
    """A rate sweep's answer (manifest `sweep_max_rate`, model requests/s: shapes/rate_sweep.py), when both
    runs swept. Its probes' labels carry their rates, so they rarely match phase by phase; this is the
    number a sweep is run for. It regresses when it fell by more than the threshold (its own resolution,
    --sweep-precision, is 5 % by default), or to no compliant rate at all."""
    if "sweep_max_rate" not in base or "sweep_max_rate" not in new:
        return None
    bv, nv = (math.nan if v is None else float(v) for v in (base["sweep_max_rate"], new["sweep_max_rate"]))
    change = nv / bv - 1.0 if bv > 0 else math.nan
    regression = bool(bv > 0 and (math.isnan(nv) or -change > threshold))
    return {
        "phase": "sweep",
        "metric": "sweep_max_rate",
        "base": bv,
        "new": nv,
        "change": change,
        "base_low": math.nan,
        "base_high": math.nan,
        "new_low": math.nan,
        "new_high": math.nan,
        "regression": regression,
    }


def compare_runs(base: RunData, new: RunData, threshold: float = 0.10) -> Comparison:
    base, new = model_run(base), model_run(new)
    base_table, new_table = phase_table(base), phase_table(new)
    pairs, unmatched = match_phases(base_table, new_table)
    where_base = judged_phases(base) if base.has_records else None
    where_new = judged_phases(new) if new.has_records else None
    rows: list[dict] = []
    for i, j in pairs:
        b, n = base_table.iloc[i], new_table.iloc[j]
        label = str(b["label"]) if b["label"] == n["label"] else f"{b['label']} / {n['label']}"
        if where_base is not None and where_new is not None:
            rows += _latency_rows(
                label, phase_samples(base, i, where_base), phase_samples(new, j, where_new), threshold
            )
        rows += _rate_rows(label, b, n, threshold)
        rows.append(_error_row(label, b, n))
    sweep = _sweep_row(base.manifest or {}, new.manifest or {}, threshold)
    if sweep is not None:
        rows.append(sweep)
    columns = ["phase", "metric", "base", "new", "change", "base_low", "base_high", "new_low", "new_high", "regression"]
    return Comparison(pd.DataFrame(rows, columns=columns), unmatched)
