"""Master-side live view over the records as they arrive: windows for shapes, the web UI and exporter.

Locust's own stats are bucketed and Aggregated-only in history; the stepped stop rule and the
web UI's LLM tab need exact per-window percentiles, so the master keeps a compact copy of the few
fields they use and computes windows on demand. ITL percentiles pool every gap, as the report does
(analysis/stats/phases.py); the gaps are the bulky part of a record (~1 KB for a 256-token reply),
so they are kept for the last `GAP_RETENTION_S` model seconds only: an older window has no ITL
(the judge then calls ITL "not judged"). The rest is kept for the whole run, packed into float64
rows: ~80 bytes a request instead of ~300 as a tuple of Python objects, so a 2-hour soak at 20
requests/s holds ~12 MB, not ~43 MB (docs/benchmarks.md, "Memory on long runs").
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from loadline.core.records import CANCELLED, COLUMNS, OK
from loadline.core.runsettings import is_scaled, model_value, time_scale_of_options

_I = {name: COLUMNS.index(name) for name in ("start_wall", "status", "e2e_ms", "ttft_ms", "output_tokens",
                                             "error_class", "itl_p50_ms", "tpot_ms", "itl_us")}
# Model seconds of ITL gaps kept: a stepped run's step is 3-5 minutes (DOMAIN.md). In a time-scaled
# run that is GAP_RETENTION_S / X wall seconds (900 wall s at X = 20 is a 5-hour rehearsal's every gap),
# but never less than MIN_GAP_RETENTION_WALL_S: the web UI's points settle after 30 wall s (series.py).
GAP_RETENTION_S = 900
MIN_GAP_RETENTION_WALL_S = 60.0
# The fields a window reads, one float64 row each (a plain 2-D array: numpy joins a window's seconds
# in C, where a structured dtype costs a Python call per second); None is NaN (latencies) or 0
# (tokens); status and error class are small integer codes.
_START, _STATUS, _E2E, _TTFT, _TOKENS, _ERROR_CLASS, _ITL_P50, _TPOT = range(8)
_OK, _ERROR, _CANCELLED = 0, 1, 2
_STATUS_CODES = {OK: _OK, CANCELLED: _CANCELLED}  # anything else counts as an error, as before
_NO_ROWS = np.empty((0, 8))


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
    """Packed rows bucketed by the second they started in, so a window reads only its own seconds."""

    def __init__(self, time_scale: float = 1.0) -> None:
        self._by_second: dict[int, np.ndarray] = {}  # (rows, 8) float64 arrays
        self._gaps_by_second: dict[int, list[tuple[float, str]]] = {}  # ok rows' itl_us, recent seconds only
        self._gaps_from = -1  # windows starting before this second lost gaps to the retention
        self._gap_retention_wall_s = max(GAP_RETENTION_S / time_scale, MIN_GAP_RETENTION_WALL_S)
        self._classes: list[str] = []  # error class by code
        self._class_codes: dict[str, int] = {}
        self._count = 0

    def ingest(self, rows: list[list]) -> None:
        i = _I
        fresh: dict[int, list[tuple]] = {}
        gaps = self._gaps_by_second
        for r in rows:
            start, status = r[i["start_wall"]], r[i["status"]]
            fresh.setdefault(int(start), []).append(
                (start, _STATUS_CODES.get(status, _ERROR), _nan(r[i["e2e_ms"]]), _nan(r[i["ttft_ms"]]),
                 r[i["output_tokens"]] or 0, self._class_code(r[i["error_class"]]), _nan(r[i["itl_p50_ms"]]),
                 _nan(r[i["tpot_ms"]])))
            if status == OK and r[i["itl_us"]]:  # the text: parsed only by windows that want ITL
                gaps.setdefault(int(start), []).append((start, r[i["itl_us"]]))
        buckets = self._by_second
        for second, new in fresh.items():
            packed = np.array(new, dtype=np.float64)
            held = buckets.get(second)
            buckets[second] = packed if held is None else np.concatenate((held, packed))
        self._count += len(rows)
        if gaps:
            oldest = max(gaps) - self._gap_retention_wall_s
            dropped = [sec for sec in gaps if sec < oldest]
            for second in dropped:
                del gaps[second]
            if dropped:
                self._gaps_from = max(self._gaps_from, max(dropped) + 1)

    def _class_code(self, name: str | None) -> int:
        name = name or ""
        code = self._class_codes.get(name)
        if code is None:
            code = self._class_codes[name] = len(self._classes)
            self._classes.append(name)
        return code

    def __len__(self) -> int:
        return self._count

    @staticmethod
    def _seconds(buckets: dict, start_wall: float, end_wall: float) -> list[int]:
        """The bucket keys of [start_wall, end_wall], walking whichever is shorter: the range or the buckets."""
        first, last = int(start_wall), int(end_wall)
        if last - first > len(buckets):  # a long window: walk the seconds that exist
            return sorted(sec for sec in buckets if first <= sec <= last)
        return [sec for sec in range(first, last + 1) if sec in buckets]

    def _rows_in(self, start_wall: float, end_wall: float) -> np.ndarray:
        buckets = self._by_second
        parts = [buckets[sec] for sec in self._seconds(buckets, start_wall, end_wall)]
        if not parts:
            return _NO_ROWS
        rows = np.concatenate(parts) if len(parts) > 1 else parts[0]
        return rows[(rows[:, _START] >= start_wall) & (rows[:, _START] < end_wall)]

    def window(self, start_wall: float, end_wall: float, itl: bool = True) -> WindowSummary | None:
        """Records whose start_wall lies in [start_wall, end_wall); None when there are none.

        `itl=False` skips the pooled ITL percentiles (the costly part: every gap of every reply)."""
        rows = self._rows_in(start_wall, end_wall)
        if not len(rows):
            return None
        status = rows[:, _STATUS]
        ok = rows[status == _OK]
        cancelled = int(np.count_nonzero(status == _CANCELLED))
        errors = len(rows) - len(ok) - cancelled
        codes, counts = np.unique(rows[status == _ERROR, _ERROR_CLASS], return_counts=True)
        by_class = {self._classes[int(code)]: int(count) for code, count in zip(codes, counts)}
        span = max(end_wall - start_wall, 1e-9)
        e2e = _pcts(_present(ok[:, _E2E]))
        ttft = _pcts(_present(ok[:, _TTFT]))
        itl_median = _pcts(_present(ok[:, _ITL_P50]))
        tpot = _pcts(_present(ok[:, _TPOT]))
        pooled = self._pooled_gaps_us(start_wall, end_wall) if itl else None
        pooled_itl = tuple(None if v is None else v / 1000.0 for v in _pcts(pooled)) if pooled is not None else (None,) * 3
        return WindowSummary(
            start_wall=start_wall, end_wall=end_wall, requests=len(rows), ok=len(ok), errors=errors,
            cancelled=cancelled, error_rate=errors / max(len(ok) + errors, 1),
            e2e_p50_ms=e2e[0], e2e_p95_ms=e2e[1], e2e_p99_ms=e2e[2],
            ttft_p50_ms=ttft[0], ttft_p95_ms=ttft[1], ttft_p99_ms=ttft[2], itl_p50_ms=itl_median[0],
            output_tokens_per_s=float(ok[:, _TOKENS].sum()) / span, rps=len(ok) / span, errors_by_class=by_class,
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


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


def _present(values: np.ndarray) -> np.ndarray:
    return values[~np.isnan(values)]


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
