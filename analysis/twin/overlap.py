"""What else the engine held while one request was in a window of its life, from the requests table alone.

A request's decode lasts from its first token to its end; its prefill from its start to its first
token. The engine's batch while request i decoded is the time-averaged number of decode windows
overlapping i's (i's own included), and the KV it read per step the same average weighted by each
overlapping request's context. Client-side times carry the client's few milliseconds, far below
the windows (tens of ms to seconds), so the averages stand for the engine's own.
"""

from __future__ import annotations

import numpy as np

CHUNK = 512  # rows per block: a 512 x n float matrix stays a few MB for 10,000-request runs


def mean_overlap(
    start: np.ndarray, end: np.ndarray, other_start: np.ndarray, other_end: np.ndarray, weight: np.ndarray
) -> np.ndarray:
    """For each window [start[i], end[i]]: sum_j weight[j] x overlap(i, j) / length(i) (0 for empty windows)."""
    out = np.zeros(len(start))
    length = end - start
    for lo in range(0, len(start), CHUNK):
        s, e = start[lo : lo + CHUNK, None], end[lo : lo + CHUNK, None]
        overlap = np.clip(np.minimum(e, other_end[None, :]) - np.maximum(s, other_start[None, :]), 0.0, None)
        span = length[lo : lo + CHUNK]
        with np.errstate(divide="ignore", invalid="ignore"):
            out[lo : lo + CHUNK] = np.where(span > 0, (overlap @ weight) / span, 0.0)
    return out


def in_flight_at(instants: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """How many [start, end) windows hold each instant (sorted-search: O(n log n))."""
    starts, ends = np.sort(start), np.sort(end)
    return np.searchsorted(starts, instants, side="right") - np.searchsorted(ends, instants, side="right")
