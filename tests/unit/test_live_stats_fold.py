"""The live view on long runs: rows older than the retention folded into minutes (then hours) of counts
and histograms; recent windows exact, older ones within the histograms' bound, memory by the hour."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from loadline.core.records import COLUMNS
from loadline.runtime import histogram, live
from loadline.runtime.live import LiveStats, to_model_time
from loadline.runtime.webui import _approx, _approx_note

T0 = 1_800_000_000.0  # a multiple of 60: minute edges are T0 + k * 60
BOUND = histogram.ALPHA * (1 + 1e-9)  # float rounding at a bucket's edge
_I = {name: COLUMNS.index(name) for name in COLUMNS}


def row(start: float, e2e: float | None, status: str = "ok", error_class: str | None = None, tokens: int = 64) -> list:
    values = [None] * len(COLUMNS)

    def part(divisor: float) -> float | None:
        return None if e2e is None else e2e / divisor

    for name, value in (
        ("start_wall", start),
        ("status", status),
        ("e2e_ms", e2e),
        ("ttft_ms", part(7)),
        ("output_tokens", tokens),
        ("error_class", error_class),
        ("itl_p50_ms", part(70)),
        ("tpot_ms", part(65)),
        ("itl_us", ""),
    ):
        values[_I[name]] = value
    return values


def latencies(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "lognormal":
        return rng.lognormal(6.5, 0.6, n)
    if kind == "bimodal":  # cache hits and misses: two modes a decade apart
        return np.where(rng.random(n) < 0.7, rng.normal(300, 20, n), rng.normal(3000, 200, n))
    return np.full(n, 812.5)


def feed(stats: LiveStats, kind: str, seconds: int, per_second: int, seed: int = 7) -> list[list]:
    """Rows started evenly over `seconds` from T0, ingested one second at a time in time order; a few
    errors and cancelled streams among them."""
    rng = np.random.default_rng(seed)
    everything = []
    for second in range(seconds):
        batch = []
        for i, e2e in enumerate(latencies(kind, per_second, rng)):
            start = T0 + second + i / per_second
            if (second * per_second + i) % 97 == 0:
                batch.append(row(start, None, "error", "http_5xx" if i % 2 else "timeout", tokens=0))
            elif (second * per_second + i) % 89 == 0:
                batch.append(row(start, None, "cancelled", tokens=3))
            else:
                batch.append(row(start, float(e2e)))
        stats.ingest(batch)
        everything += batch
    return everything


def exact(rows: list[list], start: float, end: float) -> dict:
    """What the window should say, from the raw rows with numpy."""
    inside = [r for r in rows if start <= r[_I["start_wall"]] < end]
    ok = [r for r in inside if r[_I["status"]] == "ok"]
    errors = [r for r in inside if r[_I["status"]] == "error"]
    by_class: dict[str, int] = {}
    for r in errors:
        by_class[r[_I["error_class"]]] = by_class.get(r[_I["error_class"]], 0) + 1
    values = {name: np.array([r[_I[name]] for r in ok]) for name in ("e2e_ms", "ttft_ms", "itl_p50_ms", "tpot_ms")}
    return {
        "requests": len(inside),
        "ok": len(ok),
        "errors": len(errors),
        "cancelled": len(inside) - len(ok) - len(errors),
        "errors_by_class": by_class,
        "tokens": sum(r[_I["output_tokens"]] for r in ok),
        **values,
    }


PERCENTILES = (
    ("e2e_p50_ms", "e2e_ms", 50),
    ("e2e_p95_ms", "e2e_ms", 95),
    ("e2e_p99_ms", "e2e_ms", 99),
    ("ttft_p50_ms", "ttft_ms", 50),
    ("ttft_p95_ms", "ttft_ms", 95),
    ("ttft_p99_ms", "ttft_ms", 99),
    ("itl_p50_ms", "itl_p50_ms", 50),
    ("tpot_p95_ms", "tpot_ms", 95),
    ("tpot_p99_ms", "tpot_ms", 99),
)


@pytest.mark.parametrize("kind", ["lognormal", "bimodal", "constant"])
def test_recent_windows_are_exactly_what_a_store_that_never_folds_says(kind):
    stats = LiveStats()
    rows = feed(stats, kind, 1800, 5)  # 30 minutes: the first ~14 are folded
    assert stats.kept()[1] > 0
    for start, end in (
        (T0 + 1700, T0 + 1800),
        (T0 + 1790.5, T0 + 1800),
        (T0 + 1200.25, T0 + 1500.75),
        (T0 + 1800 - live.ROW_RETENTION_S + 60, T0 + 1800),
    ):
        fresh = LiveStats()  # sees only the window's rows: nothing to fold
        fresh.ingest([r for r in rows if start <= r[_I["start_wall"]] < end])
        got, want = stats.window(start, end), fresh.window(start, end)
        assert got.approx_pct is None
        assert dataclasses.asdict(got) == dataclasses.asdict(want)


@pytest.mark.parametrize("kind", ["lognormal", "bimodal", "constant"])
def test_windows_over_folded_minutes_count_exactly_at_minute_edges_and_percentiles_hold_the_bound(kind):
    stats = LiveStats()
    rows = feed(stats, kind, 2400, 8)  # 40 minutes, the first ~24 folded
    for start, end in ((T0, T0 + 600), (T0 + 120, T0 + 1320), (T0 + 300, T0 + 2400), (0.0, T0 + 2401)):
        got, want = stats.window(start, end), exact(rows, start, end)
        assert got.approx_pct == histogram.ALPHA * 100
        assert (got.requests, got.ok, got.errors, got.cancelled) == (
            want["requests"],
            want["ok"],
            want["errors"],
            want["cancelled"],
        )
        assert got.errors_by_class == want["errors_by_class"]
        assert got.output_tokens_per_s == pytest.approx(want["tokens"] / (end - start))
        assert got.rps == pytest.approx(want["ok"] / (end - start))
        for field, column, p in PERCENTILES:
            truth = float(np.percentile(want[column], p))
            assert abs(getattr(got, field) - truth) <= BOUND * truth, (field, start, end)


def test_a_window_edge_inside_a_folded_minute_takes_it_whole_when_its_midpoint_is_inside():
    stats = LiveStats()
    rows = feed(stats, "lognormal", 1800, 4)
    # minute [T0 + 60, T0 + 120): requests from T0 + 60 to T0 + 119.75, midpoint T0 + 89.875
    assert stats.window(T0 + 80, T0 + 600).requests == exact(rows, T0 + 60, T0 + 600)["requests"]
    assert stats.window(T0 + 95, T0 + 600).requests == exact(rows, T0 + 120, T0 + 600)["requests"]
    assert stats.window(T0 + 60, T0 + 80) is None  # no folded minute's midpoint, no kept rows: nothing
    whole = stats.window(T0 - 0.5, T0 + 1800.5)  # the web UI's whole-run column: every request, edges or not
    assert whole.requests == len(rows) and whole.approx_pct is not None


RATE = 20  # requests per second: what is bounded is rows per second of retention, whatever the rate


@pytest.mark.parametrize("scale", [1.0, 5.0, 20.0])
def test_two_hours_at_20_per_second_keep_a_bounded_number_of_rows(scale):
    stats = LiveStats(time_scale=scale)
    retention_wall = max(live.ROW_RETENTION_S / scale, live.MIN_GAP_RETENTION_WALL_S)
    most = 0
    for second in range(7200):
        stats.ingest([row(T0 + second + i / RATE, 500.0 + i) for i in range(RATE)])
        most = max(most, stats.kept()[0])
    assert len(stats) == 7200 * RATE
    assert most <= (retention_wall + 60 + 1) * RATE  # the retention plus the minute not folded yet
    assert stats.kept()[1] <= 7200 / 60  # minutes (and hours), not requests
    assert stats.window(T0, T0 + 7200).requests == 7200 * RATE


def test_a_day_folds_minutes_into_hours():
    stats = LiveStats()
    for hour in range(24):  # 1 request/s for 24 hours, an hour per call
        stats.ingest([row(T0 + hour * 3600 + s, 400.0 + s % 50) for s in range(3600)])
    kept_rows, blocks = stats.kept()
    assert kept_rows <= live.ROW_RETENTION_S + 60
    assert blocks <= 3 * 60 + 24  # the last 2-3 hours by minute (hours merge when whole), the rest by hour
    whole = stats.window(T0, T0 + 86400)
    assert whole.requests == 86400
    truth = float(np.percentile([400.0 + s % 50 for s in range(3600)], 95))
    assert abs(whole.e2e_p95_ms - truth) <= BOUND * truth


def test_a_late_row_for_a_folded_minute_joins_it():
    stats = LiveStats()
    feed(stats, "constant", 1800, 2)
    before = stats.window(T0, T0 + 120).requests
    stats.ingest([row(T0 + 70.0, 9000.0)])  # a request that started in minute 1 and ended 28 minutes later
    after = stats.window(T0, T0 + 120)
    assert after.requests == before + 1 and after.approx_pct is not None


def test_a_pinned_phase_stays_exact_however_long_and_folds_once_unpinned():
    stats = LiveStats()
    stats.pin(T0 + 100.0)  # a judged step from T0 + 100 (shapes/base.py pins it when it begins)
    rows = feed(stats, "lognormal", 2400, 3)
    judged = stats.window(T0 + 100.0, T0 + 2395.0)
    assert judged.approx_pct is None
    assert judged.requests == exact(rows, T0 + 100.0, T0 + 2395.0)["requests"]
    stats.pin(None)
    stats.ingest([row(T0 + 2400.5, 500.0)])
    assert stats.window(T0 + 120.0, T0 + 600.0).approx_pct is not None
    assert stats.kept()[0] <= (live.ROW_RETENTION_S + 61) * 3


@pytest.mark.parametrize("values", [[0.0, 0.0], [42.0], [0.5, 5.0, 50.0, 5e5], list(np.linspace(1, 1e4, 1001))])
def test_histogram_percentiles_match_numpy_within_the_bound(values):
    values = np.array(values)
    keys, counts = histogram.compact(histogram.keys(2, values))
    got = histogram.percentiles(keys, counts, 2, (0, 10, 50, 95, 99, 100))
    assert histogram.percentiles(keys, counts, 1) == (None, None, None)  # another metric: empty
    for p, value in zip((0, 10, 50, 95, 99, 100), got):
        truth = float(np.percentile(values, p))
        assert abs(value - truth) <= BOUND * truth


def test_approximate_summaries_keep_their_bound_in_model_time_and_the_web_ui_marks_them():
    stats = LiveStats()
    feed(stats, "lognormal", 1800, 2)
    whole = stats.window(T0, T0 + 1800)
    assert to_model_time(whole, 5.0).approx_pct == whole.approx_pct
    assert _approx(whole, "e2e_p95_ms", " ms").startswith("≈ ")
    assert not _approx(whole, "requests", "").startswith("≈")  # counts are not percentiles
    recent = stats.window(T0 + 1770, T0 + 1800)
    assert not _approx(recent, "e2e_p95_ms", " ms").startswith("≈")
    assert _approx_note(recent, whole) == [
        {"metric": "≈", "last": "", "run": "≈ percentiles within 1 %: older minutes are kept as histograms"}
    ]
    assert _approx_note(recent, SimpleNamespace(approx_pct=None)) == []
