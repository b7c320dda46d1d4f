"""Master-side live view over the records as they arrive: windows for shapes, the web UI and exporter.

Locust's own stats are bucketed and Aggregated-only in history; the stepped stop rule and the
web UI's LLM tab need exact per-window percentiles, so the master keeps a compact copy of the few
fields they use (not the ITL gaps) and computes windows on demand.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from loadline.core.records import CANCELLED, COLUMNS, OK

_I = {name: COLUMNS.index(name) for name in ("start_wall", "status", "e2e_ms", "ttft_ms", "output_tokens",
                                             "error_class", "itl_p50_ms")}


@dataclass(frozen=True)
class WindowSummary:
    start_wall: float
    end_wall: float
    requests: int
    ok: int
    errors: int
    cancelled: int
    error_rate: float  # errors / (ok + errors); cancelled streams are neither
    e2e_p50_ms: float | None
    e2e_p95_ms: float | None
    e2e_p99_ms: float | None
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    ttft_p99_ms: float | None
    itl_p50_ms: float | None  # median of per-request ITL p50s (the live view; reports pool gaps)
    output_tokens_per_s: float
    rps: float
    errors_by_class: dict[str, int]


class LiveStats:
    """Compact rows bucketed by the second they started in, so a window reads only its own seconds."""

    def __init__(self) -> None:
        self._by_second: dict[int, list[tuple]] = {}
        self._count = 0

    def ingest(self, rows: list[list]) -> None:
        i = _I
        buckets = self._by_second
        for r in rows:
            start = r[i["start_wall"]]
            buckets.setdefault(int(start), []).append(
                (start, r[i["status"]], r[i["e2e_ms"]], r[i["ttft_ms"]], r[i["output_tokens"]], r[i["error_class"]],
                 r[i["itl_p50_ms"]]))
        self._count += len(rows)

    def __len__(self) -> int:
        return self._count

    def _rows_in(self, start_wall: float, end_wall: float) -> list[tuple]:
        first, last = int(start_wall), int(end_wall)
        buckets = self._by_second
        if last - first > len(buckets):  # a long window: walk the seconds that exist
            seconds = [sec for sec in buckets if first <= sec <= last]
        else:
            seconds = [sec for sec in range(first, last + 1) if sec in buckets]
        return [r for sec in seconds for r in buckets[sec] if start_wall <= r[0] < end_wall]

    def window(self, start_wall: float, end_wall: float) -> WindowSummary | None:
        """Records whose start_wall lies in [start_wall, end_wall); None when there are none."""
        rows = self._rows_in(start_wall, end_wall)
        if not rows:
            return None
        ok = [r for r in rows if r[1] == OK]
        cancelled = sum(1 for r in rows if r[1] == CANCELLED)
        errors = len(rows) - len(ok) - cancelled
        by_class: dict[str, int] = {}
        for r in rows:
            if r[1] != OK and r[1] != CANCELLED:
                by_class[r[5]] = by_class.get(r[5], 0) + 1
        span = max(end_wall - start_wall, 1e-9)
        e2e = _pcts([r[2] for r in ok])
        ttft = _pcts([r[3] for r in ok if r[3] is not None])
        itl = _pcts([r[6] for r in ok if r[6] is not None])
        return WindowSummary(
            start_wall=start_wall, end_wall=end_wall, requests=len(rows), ok=len(ok), errors=errors,
            cancelled=cancelled, error_rate=errors / max(len(ok) + errors, 1),
            e2e_p50_ms=e2e[0], e2e_p95_ms=e2e[1], e2e_p99_ms=e2e[2],
            ttft_p50_ms=ttft[0], ttft_p95_ms=ttft[1], ttft_p99_ms=ttft[2], itl_p50_ms=itl[0],
            output_tokens_per_s=sum(r[4] or 0 for r in ok) / span, rps=len(ok) / span, errors_by_class=by_class,
        )


def _pcts(values: list[float]) -> tuple[float | None, float | None, float | None]:
    if not values:
        return None, None, None
    p50, p95, p99 = np.percentile(np.asarray(values, dtype=float), [50, 95, 99])
    return float(p50), float(p95), float(p99)


def window(environment, start_wall: float, end_wall: float) -> WindowSummary | None:
    """The documented entry point for shapes: None when no live stats exist in this process.

    In a time-scaled run (`--time-scale X`, simulator and shapes X times faster) the summary is in
    model time: latencies x X, rates / X, so SLO thresholds keep their real-world meaning.
    """
    live: LiveStats | None = getattr(environment, "loadline_live", None)
    if live is None:
        return None
    summary = live.window(start_wall, end_wall)
    scale = float(getattr(environment.parsed_options, "time_scale", 1.0) or 1.0)
    return to_model_time(summary, scale) if summary is not None and scale != 1.0 else summary


def to_model_time(summary: WindowSummary, scale: float) -> WindowSummary:
    latencies = {f: getattr(summary, f) * scale for f in _LATENCY_FIELDS if getattr(summary, f) is not None}
    rates = {f: getattr(summary, f) / scale for f in ("output_tokens_per_s", "rps")}
    return dataclasses.replace(summary, **latencies, **rates)


_LATENCY_FIELDS = ("e2e_p50_ms", "e2e_p95_ms", "e2e_p99_ms", "ttft_p50_ms", "ttft_p95_ms", "ttft_p99_ms", "itl_p50_ms")
