"""What the live view (loadline/runtime/live.py) keeps of rows older than its retention: one `Folded`
per wall minute, counts and log-bucketed histograms (loadline/runtime/histogram.py); minutes older
than COARSE_AFTER_S are merged into one `Folded` per wall hour.

A folded minute costs ~3-4 KB (measured: the histograms' occupied buckets, ~6 bytes each, for 4
latencies, ~360 buckets for a lognormal of sigma 0.3, plus the Python objects), whatever the rate:
at 20 requests/s its rows took ~77 KB. Merging a histogram of the same traffic adds few buckets, so
an hour block costs about what a minute does: a 24-hour run keeps 120-180 minutes and ~21 hours (~0.7 MB),
a week ~1 MB. (Measured before TTFO, the time to the answer's first token, joined as a fifth latency:
on replies without reasoning it repeats TTFT's buckets, about a fifth more.) The same summary serves a window's kept rows when they are merged with folded minutes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from loadline.runtime import histogram

FOLD_S = 60  # wall seconds per folded bucket: a window's edge cuts at most this much of folded data
# Older than this (wall seconds before the fold horizon), minutes merge into blocks of COARSE_S: only
# the web UI's whole-run column (and the stop rule's "did anything flow" check) reads that far back.
# 2 hours, like the web UI's charts at full resolution (series.py FINE_POINTS).
COARSE_S = 3600
COARSE_AFTER_S = 7200
# The packed row layout live.py keeps per request (float64; NaN where a latency is missing)
START, STATUS, E2E, TTFT, TOKENS, ERROR_CLASS, ITL_P50, TPOT, TTFO = range(9)
OK_CODE, ERROR_CODE, CANCELLED_CODE = 0, 1, 2
# The histograms' metrics: (metric number in the key space, row column); live.py reads them back by number
E2E_METRIC, TTFT_METRIC, ITL_P50_METRIC, TPOT_METRIC, TTFO_METRIC = range(5)
_METRIC_COLUMNS = (
    (E2E_METRIC, E2E),
    (TTFT_METRIC, TTFT),
    (ITL_P50_METRIC, ITL_P50),
    (TPOT_METRIC, TPOT),
    (TTFO_METRIC, TTFO),
)


@dataclass(slots=True)
class Folded:
    first_start: float  # start_wall of the earliest and the latest request in it: the edge rule's midpoint
    last_start: float
    requests: int
    ok: int
    errors: int
    cancelled: int
    tokens: float  # output tokens of the ok requests
    errors_by_class: dict[int, int]  # error class code -> errors
    keys: np.ndarray  # histogram.compact: the ok requests' e2e, ttft, itl_p50, tpot, ttfo
    counts: np.ndarray

    @property
    def midpoint(self) -> float:
        return (self.first_start + self.last_start) / 2


def fold(rows: np.ndarray) -> Folded:
    """The summary of packed rows (at least one)."""
    status = rows[:, STATUS]
    ok = rows[status == OK_CODE]
    cancelled = int(np.count_nonzero(status == CANCELLED_CODE))
    codes, counts = np.unique(rows[status == ERROR_CODE, ERROR_CLASS], return_counts=True)
    values = [histogram.keys(metric, present(ok[:, column])) for metric, column in _METRIC_COLUMNS]
    keys, key_counts = histogram.compact(np.concatenate(values))
    starts = rows[:, START]
    return Folded(
        float(starts.min()),
        float(starts.max()),
        len(rows),
        len(ok),
        len(rows) - len(ok) - cancelled,
        cancelled,
        float(ok[:, TOKENS].sum()),
        {int(c): int(n) for c, n in zip(codes, counts)},
        keys,
        key_counts,
    )


def merge(parts: list[Folded]) -> Folded:
    """One summary of several (at least one): counts add, histograms merge."""
    keys, counts = histogram.compact(np.concatenate([p.keys for p in parts]), np.concatenate([p.counts for p in parts]))
    by_class: dict[int, int] = {}
    for part in parts:
        for code, n in part.errors_by_class.items():
            by_class[code] = by_class.get(code, 0) + n
    return Folded(
        min(p.first_start for p in parts),
        max(p.last_start for p in parts),
        sum(p.requests for p in parts),
        sum(p.ok for p in parts),
        sum(p.errors for p in parts),
        sum(p.cancelled for p in parts),
        sum(p.tokens for p in parts),
        by_class,
        keys,
        counts,
    )


def present(values: np.ndarray) -> np.ndarray:
    """The values that are not NaN (a packed row's missing latency)."""
    return values[~np.isnan(values)]
