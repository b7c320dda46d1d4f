"""Master-side live view over the records as they arrive: windows for shapes, the web UI and exporter.

Locust's own stats are bucketed and Aggregated-only in history; the stepped stop rule and the
web UI's LLM tab need exact per-window percentiles, so the master keeps a compact copy of the few
fields they use and computes windows on demand. ITL percentiles pool every gap, as the report does
(analysis/stats/phases.py); the gaps are the bulky part of a record (~1 KB for a 256-token reply),
so they are kept for the last `GAP_RETENTION_S` model seconds only: an older window has no ITL
(the judge then calls ITL "not judged"). The other fields are packed into float64 rows (~80 bytes a
request) for the last `ROW_RETENTION_S` model seconds; older ones are folded, one wall minute at a
time, into counts and log-bucketed histograms (loadline/runtime/live_fold.py, a few KB a minute,
minutes merged into hours after 2 hours): memory grows with the run's hours, not its requests
(docs/benchmarks.md, "Memory on long runs").

A window within the kept rows is exact, as before. One that reaches into folded blocks takes each
whole or not at all: a block counts when the midpoint of its requests' start times (first to last)
lies in the window, so counts are exact whenever the window's edges cut no block's requests (the
whole run, a window from before the run's start, edges on minute boundaries within the last 2
hours); its percentiles are within histogram.ALPHA of the exact ones, which `approx_pct` says.
"""

from __future__ import annotations

import math

import numpy as np

from loadline.core.records import CANCELLED, COLUMNS, OK, ErrorClass
from loadline.core.runsettings import wall_span
from loadline.runtime import histogram
from loadline.runtime.live_fold import CANCELLED_CODE as _CANCELLED
from loadline.runtime.live_fold import (
    COARSE_AFTER_S,
    COARSE_S,
    E2E_METRIC,
    FOLD_S,
    ITL_P50_METRIC,
    TPOT_METRIC,
    TTFO_METRIC,
    TTFT_METRIC,
    Folded,
    fold,
    merge,
    present,
)
from loadline.runtime.live_fold import E2E as _E2E
from loadline.runtime.live_fold import ERROR_CLASS as _ERROR_CLASS
from loadline.runtime.live_fold import ERROR_CODE as _ERROR
from loadline.runtime.live_fold import ITL_P50 as _ITL_P50
from loadline.runtime.live_fold import OK_CODE as _OK
from loadline.runtime.live_fold import START as _START
from loadline.runtime.live_fold import STATUS as _STATUS
from loadline.runtime.live_fold import TOKENS as _TOKENS
from loadline.runtime.live_fold import TPOT as _TPOT
from loadline.runtime.live_fold import TTFO as _TTFO
from loadline.runtime.live_fold import TTFT as _TTFT

# The window's type and its entry point live apart, without numpy: a shape reads them in every process
from loadline.runtime.live_window import WindowSummary, to_model_time, window  # noqa: F401

_I = {
    name: COLUMNS.index(name)
    for name in (
        "start_wall",
        "status",
        "e2e_ms",
        "ttft_ms",
        "output_tokens",
        "error_class",
        "itl_p50_ms",
        "tpot_ms",
        "itl_us",
        "ttfo_ms",
    )
}
# Model seconds of ITL gaps kept: a stepped run's step is 3-5 minutes (DOMAIN.md). In a time-scaled
# run that is GAP_RETENTION_S / X wall seconds (900 wall s at X = 20 is a 5-hour rehearsal's every gap),
# but never less than MIN_GAP_RETENTION_WALL_S: the web UI's points settle after 30 wall s (series.py).
GAP_RETENTION_S = 900
MIN_GAP_RETENTION_WALL_S = 60.0
# Model seconds of exact rows kept, the same span as the gaps, so a window is either exact in every
# field or reaches past both. What reads recent windows: the stepped stop rule (a step, default 180 s;
# rate steps 120 s, sweep probes 60 s; shapes/base.py also pins a judged phase's rows from its start,
# whatever its length), the web UI (the last 30 s; chart points of 10 s recomputed until 30 s old).
# At least MIN_GAP_RETENTION_WALL_S wall seconds, like the gaps. Older rows are folded (live_fold.py).
ROW_RETENTION_S = GAP_RETENTION_S
# The fields a window reads, one float64 row each (a plain 2-D array: numpy joins a window's seconds
# in C, where a structured dtype costs a Python call per second); None is NaN (latencies) or 0
# (tokens); status and error class are small integer codes. The layout (_START ... _TPOT) is
# live_fold.py's, which folds old rows.
_STATUS_CODES = {OK: _OK, CANCELLED: _CANCELLED}  # anything else counts as an error, as before
_NO_ROWS = np.empty((0, 9))


class LiveStats:
    """Packed rows bucketed by the second they started in, so a window reads only its own seconds;
    seconds older than the row retention folded by wall minute."""

    def __init__(self, time_scale: float = 1.0) -> None:
        self._by_second: dict[int, np.ndarray] = {}  # (rows, 9) float64 arrays, seconds >= self._horizon
        self._folded: dict[int, Folded] = {}  # by the block's first second: minutes, and hours (COARSE_S) before
        self._horizon = -math.inf  # the first second not folded (a multiple of FOLD_S)
        self._coarse_horizon = -math.inf  # the first second not merged into hours (a multiple of COARSE_S)
        self._newest = -math.inf  # the latest second a row started in
        self._pinned: float | None = None  # rows from this wall time on are kept (pin)
        self._row_retention_wall_s = max(wall_span(ROW_RETENTION_S, time_scale), MIN_GAP_RETENTION_WALL_S)
        self._gaps_by_second: dict[int, list[tuple[float, str]]] = {}  # ok rows' itl_us, recent seconds only
        self._gaps_from = -1  # windows starting before this second lost gaps to the retention
        self._gap_retention_wall_s = max(wall_span(GAP_RETENTION_S, time_scale), MIN_GAP_RETENTION_WALL_S)
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
                (
                    start,
                    _STATUS_CODES.get(status, _ERROR),
                    _nan(r[i["e2e_ms"]]),
                    _nan(r[i["ttft_ms"]]),
                    r[i["output_tokens"]] or 0,
                    self._class_code(r[i["error_class"]]),
                    _nan(r[i["itl_p50_ms"]]),
                    _nan(r[i["tpot_ms"]]),
                    _nan(r[i["ttfo_ms"]]),
                )
            )
            if status == OK and r[i["itl_us"]]:  # the text: parsed only by windows that want ITL
                gaps.setdefault(int(start), []).append((start, r[i["itl_us"]]))
        buckets = self._by_second
        for second, new in fresh.items():
            packed = np.array(new, dtype=np.float64)
            if second < self._horizon:  # a long request, or a slow worker: straight into its folded minute
                self._fold_into(second - second % FOLD_S, packed)
                continue
            held = buckets.get(second)
            buckets[second] = packed if held is None else np.concatenate((held, packed))
        self._count += len(rows)
        if fresh:
            self._newest = max(self._newest, max(fresh))
            self._fold_old()
        if gaps:
            oldest = max(gaps) - self._gap_retention_wall_s
            dropped = [sec for sec in gaps if sec < oldest]
            for second in dropped:
                del gaps[second]
            if dropped:
                self._gaps_from = max(self._gaps_from, max(dropped) + 1)

    def pin(self, wall: float | None) -> None:
        """Keep exact rows from `wall` on whatever the retention (a judged phase's start: shapes/base.py);
        None unpins. Rows already folded stay folded."""
        self._pinned = wall

    def _fold_old(self) -> None:
        """Fold the whole minutes that ended before the retention (and before the pin)."""
        keep_from = self._newest - self._row_retention_wall_s
        if self._pinned is not None:
            keep_from = min(keep_from, self._pinned)
        horizon = math.floor(keep_from / FOLD_S) * FOLD_S
        if horizon <= self._horizon:
            return
        buckets = self._by_second
        by_minute: dict[int, list[np.ndarray]] = {}
        for second in sorted(sec for sec in buckets if sec < horizon):
            by_minute.setdefault(second - second % FOLD_S, []).append(buckets.pop(second))
        for minute, parts in by_minute.items():
            self._fold_into(minute, np.concatenate(parts) if len(parts) > 1 else parts[0])
        self._horizon = horizon
        coarse = math.floor((horizon - COARSE_AFTER_S) / COARSE_S) * COARSE_S
        if coarse > self._coarse_horizon:
            by_hour: dict[int, list[int]] = {}
            for minute in (m for m in self._folded if m < coarse):
                by_hour.setdefault(minute - minute % COARSE_S, []).append(minute)
            for hour, minutes in by_hour.items():
                if minutes != [hour]:  # not merged yet (or a late minute since)
                    self._folded[hour] = merge([self._folded.pop(m) for m in sorted(minutes)])
            self._coarse_horizon = coarse

    def _fold_into(self, minute: int, rows: np.ndarray) -> None:
        folded, held = fold(rows), self._folded.get(minute)
        self._folded[minute] = folded if held is None else merge([held, folded])

    def kept(self) -> tuple[int, int]:
        """(exact rows kept, folded blocks: minutes and hours): what the memory grows with."""
        return sum(len(rows) for rows in self._by_second.values()), len(self._folded)

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
        """The per-second bucket keys of [start_wall, end_wall]."""
        return _keys(buckets, int(start_wall), int(end_wall), 1)

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
        folded = self._folded_in(start_wall, end_wall) if start_wall < self._horizon else []
        if folded:
            return self._approximate(start_wall, end_wall, folded + ([fold(rows)] if len(rows) else []), itl)
        if not len(rows):
            return None
        status = rows[:, _STATUS]
        ok = rows[status == _OK]
        cancelled = int(np.count_nonzero(status == _CANCELLED))
        codes, counts = np.unique(rows[status == _ERROR, _ERROR_CLASS], return_counts=True)
        return self._summary(
            start_wall,
            end_wall,
            len(rows),
            len(ok),
            cancelled,
            float(ok[:, _TOKENS].sum()),
            {int(code): int(n) for code, n in zip(codes, counts)},
            [_pcts(present(ok[:, column])) for column in (_E2E, _TTFT, _ITL_P50, _TPOT, _TTFO)],
            itl,
        )

    def _folded_in(self, start_wall: float, end_wall: float) -> list[Folded]:
        """The folded minutes the window takes: those whose requests' midpoint (first to last start) is in it."""
        folded = self._folded
        first = math.floor(start_wall / COARSE_S) * COARSE_S  # an hour block's midpoint may be inside
        return [
            folded[m]
            for m in _keys(folded, first, math.floor(end_wall), FOLD_S)
            if start_wall <= folded[m].midpoint < end_wall
        ]

    def _approximate(self, start_wall: float, end_wall: float, parts: list[Folded], itl: bool) -> WindowSummary:
        """A window over folded minutes (and kept rows, folded on the fly): percentiles from merged histograms."""
        total = merge(parts)
        return self._summary(
            start_wall,
            end_wall,
            total.requests,
            total.ok,
            total.cancelled,
            total.tokens,
            dict(sorted(total.errors_by_class.items())),
            [
                histogram.percentiles(total.keys, total.counts, metric)
                for metric in (E2E_METRIC, TTFT_METRIC, ITL_P50_METRIC, TPOT_METRIC, TTFO_METRIC)
            ],
            itl,
            approx_pct=histogram.ALPHA * 100,
        )

    def _summary(
        self,
        start_wall: float,
        end_wall: float,
        requests: int,
        ok: int,
        cancelled: int,
        tokens: float,
        errors_by_code: dict[int, int],
        pcts: list[tuple],
        itl: bool,
        approx_pct: float | None = None,
    ) -> WindowSummary:
        """One window's summary from its counts and its (p50, p95, p99) of e2e, ttft, itl_p50, tpot and ttfo,
        exact or read from histograms; the pooled ITL gaps are exact in both (kept rows only)."""
        # the tool's own invalid requests are neither the service's successes nor its failures
        invalid = sum(n for code, n in errors_by_code.items() if self._classes[code] == ErrorClass.INVALID_REQUEST)
        errors = requests - ok - cancelled - invalid
        span = max(end_wall - start_wall, 1e-9)
        e2e, ttft, itl_median, tpot, ttfo = pcts
        pooled = self._pooled_gaps_us(start_wall, end_wall) if itl else None
        pooled_itl = (
            tuple(None if v is None else v / 1000.0 for v in _pcts(pooled)) if pooled is not None else (None,) * 3
        )
        return WindowSummary(
            start_wall=start_wall,
            end_wall=end_wall,
            requests=requests,
            ok=ok,
            errors=errors,
            cancelled=cancelled,
            error_rate=errors / max(ok + errors, 1),
            e2e_p50_ms=e2e[0],
            e2e_p95_ms=e2e[1],
            e2e_p99_ms=e2e[2],
            ttft_p50_ms=ttft[0],
            ttft_p95_ms=ttft[1],
            ttft_p99_ms=ttft[2],
            itl_p50_ms=itl_median[0],
            output_tokens_per_s=tokens / span,
            rps=ok / span,
            errors_by_class={self._classes[code]: n for code, n in errors_by_code.items()},
            itl_p95_ms=pooled_itl[1],
            itl_p99_ms=pooled_itl[2],
            tpot_p95_ms=tpot[1],
            tpot_p99_ms=tpot[2],
            itl_pooled_p50_ms=pooled_itl[0],
            ttfo_p95_ms=ttfo[1],
            ttfo_p99_ms=ttfo[2],
            approx_pct=approx_pct,
        )

    def _pooled_gaps_us(self, start_wall: float, end_wall: float) -> np.ndarray | None:
        """Every ITL gap (int us) of the ok requests started in the window; None when its gaps were dropped.

        Parsed here in one numpy call (~0.5 s for 7.6 M gaps: 100 req/s x 5 min of 256-token replies),
        so only windows that judge ITL ask for it."""
        if int(start_wall) < self._gaps_from:
            return None
        gaps = self._gaps_by_second
        text = " ".join(
            itl
            for sec in self._seconds(gaps, start_wall, end_wall)
            for start, itl in gaps[sec]
            if start_wall <= start < end_wall
        )
        return np.fromstring(text, dtype=np.int32, sep=" ") if text else np.empty(0, dtype=np.int32)


def _keys(buckets: dict, first: int, last: int, step: int) -> list[int]:
    """The keys of `buckets` in [first, last] (multiples of `step` from `first`), walking whichever is
    shorter: the range, or the keys that exist (a long window, e.g. from 0 for the whole run)."""
    if (last - first) // step > len(buckets):
        return sorted(key for key in buckets if first <= key <= last)
    return [key for key in range(first, last + 1, step) if key in buckets]


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


def _pcts(values: list[float] | np.ndarray) -> tuple[float | None, float | None, float | None]:
    if len(values) == 0:
        return None, None, None
    p50, p95, p99 = np.percentile(np.asarray(values), [50, 95, 99])
    return float(p50), float(p95), float(p99)
