"""Master-side live view over the records as they arrive: windows for shapes, the web UI and exporter.

Locust's own stats are bucketed and Aggregated-only in history; the stepped stop rule and the
web UI's LLM tab need exact per-window percentiles, so the master keeps a compact copy of the few
fields they use and computes windows on demand. ITL percentiles pool every gap, as the report does
(analysis/stats/phases.py); the gaps are the bulky part of a record (~1 KB for a 256-token reply),
so they are kept for the last `GAP_RETENTION_S` seconds only: an older window has no ITL (the
judge then calls ITL "not judged").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from loadline.core.records import CANCELLED, COLUMNS, OK
from loadline.core.runsettings import is_scaled, model_value, time_scale_of_options

_I = {name: COLUMNS.index(name) for name in ("start_wall", "status", "e2e_ms", "ttft_ms", "output_tokens",
                                             "error_class", "itl_p50_ms", "tpot_ms", "itl_us")}
GAP_RETENTION_S = 900  # wall seconds of ITL gaps kept: a stepped run's step is 3-5 minutes (DOMAIN.md)


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
    itl_p95_ms: float | None = None  # pooled gaps, as the report; None beyond GAP_RETENTION_S
    itl_p99_ms: float | None = None
    tpot_p95_ms: float | None = None
    tpot_p99_ms: float | None = None
    itl_pooled_p50_ms: float | None = None  # pooled gaps, like itl_p95_ms (the web UI's ITL chart)


class LiveStats:
    """Compact rows bucketed by the second they started in, so a window reads only its own seconds."""

    def __init__(self) -> None:
        self._by_second: dict[int, list[tuple]] = {}
        self._gaps_by_second: dict[int, list[tuple[float, str]]] = {}  # ok rows' itl_us, recent seconds only
        self._gaps_from = -1  # windows starting before this second lost gaps to the retention
        self._count = 0

    def ingest(self, rows: list[list]) -> None:
        i = _I
        buckets, gaps = self._by_second, self._gaps_by_second
        for r in rows:
            start = r[i["start_wall"]]
            buckets.setdefault(int(start), []).append(
                (start, r[i["status"]], r[i["e2e_ms"]], r[i["ttft_ms"]], r[i["output_tokens"]], r[i["error_class"]],
                 r[i["itl_p50_ms"]], r[i["tpot_ms"]]))
            if r[i["status"]] == OK and r[i["itl_us"]]:  # the text: parsed only by windows that want ITL
                gaps.setdefault(int(start), []).append((start, r[i["itl_us"]]))
        self._count += len(rows)
        if gaps:
            oldest = max(gaps) - GAP_RETENTION_S
            dropped = [sec for sec in gaps if sec < oldest]
            for second in dropped:
                del gaps[second]
            if dropped:
                self._gaps_from = max(self._gaps_from, max(dropped) + 1)

    def __len__(self) -> int:
        return self._count

    @staticmethod
    def _seconds(buckets: dict, start_wall: float, end_wall: float) -> list[int]:
        """The bucket keys of [start_wall, end_wall], walking whichever is shorter: the range or the buckets."""
        first, last = int(start_wall), int(end_wall)
        if last - first > len(buckets):  # a long window: walk the seconds that exist
            return sorted(sec for sec in buckets if first <= sec <= last)
        return [sec for sec in range(first, last + 1) if sec in buckets]

    def _rows_in(self, start_wall: float, end_wall: float) -> list[tuple]:
        buckets = self._by_second
        return [r for sec in self._seconds(buckets, start_wall, end_wall) for r in buckets[sec]
                if start_wall <= r[0] < end_wall]

    def window(self, start_wall: float, end_wall: float, itl: bool = True) -> WindowSummary | None:
        """Records whose start_wall lies in [start_wall, end_wall); None when there are none.

        `itl=False` skips the pooled ITL percentiles (the costly part: every gap of every reply)."""
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
        itl_median = _pcts([r[6] for r in ok if r[6] is not None])
        tpot = _pcts([r[7] for r in ok if r[7] is not None])
        pooled = self._pooled_gaps_us(start_wall, end_wall) if itl else None
        pooled_itl = tuple(None if v is None else v / 1000.0 for v in _pcts(pooled)) if pooled is not None else (None,) * 3
        return WindowSummary(
            start_wall=start_wall, end_wall=end_wall, requests=len(rows), ok=len(ok), errors=errors,
            cancelled=cancelled, error_rate=errors / max(len(ok) + errors, 1),
            e2e_p50_ms=e2e[0], e2e_p95_ms=e2e[1], e2e_p99_ms=e2e[2],
            ttft_p50_ms=ttft[0], ttft_p95_ms=ttft[1], ttft_p99_ms=ttft[2], itl_p50_ms=itl_median[0],
            output_tokens_per_s=sum(r[4] or 0 for r in ok) / span, rps=len(ok) / span, errors_by_class=by_class,
            itl_p95_ms=pooled_itl[1], itl_p99_ms=pooled_itl[2], tpot_p95_ms=tpot[1], tpot_p99_ms=tpot[2],
            itl_pooled_p50_ms=pooled_itl[0],
        )

    def _pooled_gaps_us(self, start_wall: float, end_wall: float) -> np.ndarray | None:
        """Every ITL gap (int us) of the ok requests started in the window; None when its gaps were dropped.

        Parsed here in one numpy call (~0.5 s for 7.6 M gaps: 100 req/s x 5 min of 256-token replies),
        so only windows that judge ITL ask for it."""
        if int(start_wall) < self._gaps_from:
            return None
        gaps = self._gaps_by_second
        text = " ".join(itl for sec in self._seconds(gaps, start_wall, end_wall) for start, itl in gaps[sec]
                        if start_wall <= start < end_wall)
        return np.fromstring(text, dtype=np.int32, sep=" ") if text else np.empty(0, dtype=np.int32)


def _pcts(values: list[float] | np.ndarray) -> tuple[float | None, float | None, float | None]:
    if len(values) == 0:
        return None, None, None
    p50, p95, p99 = np.percentile(np.asarray(values), [50, 95, 99])
    return float(p50), float(p95), float(p99)


def window(environment, start_wall: float, end_wall: float, itl: bool = True) -> WindowSummary | None:
    """The documented entry point for shapes: None when no live stats exist in this process.

    In a time-scaled run (`--time-scale X`, simulator and shapes X times faster) the summary is in
    model time: latencies x X, rates / X, so SLO thresholds keep their real-world meaning.
    """
    live: LiveStats | None = getattr(environment, "loadline_live", None)
    if live is None:
        return None
    summary = live.window(start_wall, end_wall, itl)
    scale = time_scale_of_options(environment.parsed_options)
    return to_model_time(summary, scale) if summary is not None and scale != 1.0 else summary


def to_model_time(summary: WindowSummary, scale: float) -> WindowSummary:
    """The summary in model time (loadline.core.runsettings.model_value: latencies x scale, rates / scale)."""
    scaled = {f.name: model_value(f.name, getattr(summary, f.name), scale) for f in dataclasses.fields(summary)
              if is_scaled(f.name) and getattr(summary, f.name) is not None}
    return dataclasses.replace(summary, **scaled)
