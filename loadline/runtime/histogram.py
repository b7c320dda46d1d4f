"""Mergeable log-bucketed histograms: the live view's percentiles of minutes it no longer keeps row by row.

A value v >= MIN_VALUE goes to bucket k = ceil(log_GAMMA(v)), GAMMA = (1 + ALPHA) / (1 - ALPHA), read
back as 2 GAMMA^k / (GAMMA + 1): within ALPHA (relative) of every value in the bucket (the DDSketch
construction). A percentile interpolates between the read-back values of the two ranks that numpy's
default ("linear") percentile interpolates between, so it is within ALPHA of np.percentile over the
raw values: both ends are, and so is a weighted mean of two positive values that each are.
Values below MIN_VALUE (1 us in ms; 0 included) share bucket 0, read back as 0 (absolute error < 1 us).

Several metrics share one key space (metric * PER_METRIC + bucket), so a histogram is two arrays:
sorted uint16 keys and their uint32 counts, ~6 bytes per occupied bucket (a minute of one latency
fills a few dozen to a few hundred). A few lines of numpy instead of a dependency: an HDR histogram
at 1 % keeps a dense array of thousands of counters per histogram, 4 histograms per folded minute.
"""

from __future__ import annotations

import math

import numpy as np

ALPHA = 0.01  # relative-error bound of every percentile read from a histogram
GAMMA = (1 + ALPHA) / (1 - ALPHA)
_LOG_GAMMA = math.log(GAMMA)
MIN_VALUE = 1e-3
_OFFSET = 1 - math.floor(math.log(MIN_VALUE) / _LOG_GAMMA)  # MIN_VALUE's bucket is >= 1
PER_METRIC = 2048  # buckets per metric: up to GAMMA^(2047 - _OFFSET) ~ 5e14 ms (larger values are clamped)
EMPTY = (np.empty(0, dtype=np.uint16), np.empty(0, dtype=np.uint32))


def keys(metric: int, values: np.ndarray) -> np.ndarray:
    """The bucket keys of `values` (no NaN) for `metric` (0 .. 65536 // PER_METRIC - 1)."""
    with np.errstate(divide="ignore"):
        k = np.ceil(np.log(np.maximum(values, MIN_VALUE)) / _LOG_GAMMA) + _OFFSET
    k = np.where(values < MIN_VALUE, 0, np.clip(k, 1, PER_METRIC - 1))
    return (k + metric * PER_METRIC).astype(np.uint16)


def compact(all_keys: np.ndarray, counts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct keys, their summed counts): a histogram, or several merged."""
    if not len(all_keys):
        return EMPTY
    distinct, where = np.unique(all_keys, return_inverse=True)
    summed = np.bincount(where, weights=counts, minlength=len(distinct))
    return distinct.astype(np.uint16), np.rint(summed).astype(np.uint32)


def percentiles(
    hist_keys: np.ndarray, counts: np.ndarray, metric: int, ps: tuple[float, ...] = (50, 95, 99)
) -> tuple[float | None, ...]:
    """np.percentile's linear percentiles of `metric`, each within ALPHA; Nones when it has no values."""
    lo_key = metric * PER_METRIC
    chosen = (hist_keys >= lo_key) & (hist_keys < lo_key + PER_METRIC)
    buckets, cum = hist_keys[chosen].astype(np.int64) - lo_key, np.cumsum(counts[chosen], dtype=np.int64)
    if not len(cum) or cum[-1] == 0:
        return (None,) * len(ps)
    n = int(cum[-1])
    values = np.where(buckets == 0, 0.0, 2 * np.power(GAMMA, buckets - _OFFSET) / (GAMMA + 1))
    found = []
    for p in ps:
        rank = (n - 1) * p / 100
        low, high = math.floor(rank), min(math.floor(rank) + 1, n - 1)
        a, b = values[np.searchsorted(cum, [low, high], side="right")]
        found.append(float(a + (rank - low) * (b - a)))
    return tuple(found)
