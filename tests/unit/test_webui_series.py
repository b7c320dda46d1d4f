"""The web UI charts' series (loadline/runtime/series.py): points, settling, bounds, model time."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from loadline.runtime import series as series_mod
from loadline.runtime.series import COARSE_EVERY, FINE_POINTS, SETTLE_S, PhaseSpan, Series

START = 1_000_000.0


class FakeRecords:
    """A window function over (start_wall, ttft_ms, error_class|None) rows, like loadline.runtime.live.window."""

    def __init__(self) -> None:
        self.rows: list[tuple[float, float, str | None]] = []
        self.itl_calls: list[tuple[float, float]] = []

    def __call__(self, start: float, end: float, itl: bool):
        if itl:
            self.itl_calls.append((start, end))
        rows = [r for r in self.rows if start <= r[0] < end]
        if not rows:
            return None
        ok = sorted(r[1] for r in rows if r[2] is None)
        errors: dict[str, int] = {}
        for r in rows:
            if r[2] is not None:
                errors[r[2]] = errors.get(r[2], 0) + 1
        return SimpleNamespace(
            requests=len(rows),
            ttft_p95_ms=max(ok) if ok else None,
            rps=len(ok) / (end - start),
            errors_by_class=errors,
            itl_p99_ms=(max(ok) / 10 if ok else None) if itl else None,
        )


def test_a_point_covers_the_trailing_window_and_later_records_settle_it():
    records = FakeRecords()
    s = Series(START, 1.0, records, window_s=10.0)
    records.rows.append((START + 1, 100.0, None))
    first = s.sample(START + 4, users=2, phase="baseline")
    assert (first.start_wall, first.end_wall, first.t) == (START, START + 4, 4.0)  # clamped at the run's start
    assert first.values["requests"] == 1 and first.values["ttft_p95_ms"] == 100.0
    # a slow request that started inside the first window is recorded only later: the point is redone
    records.rows.append((START + 3, 900.0, None))
    s.sample(START + 6, users=2, phase="baseline")
    assert s.points()[0].values["ttft_p95_ms"] == 900.0
    # once older than SETTLE_S a point is computed one last time, then left alone
    records.rows.append((START + 3.5, 5000.0, None))
    s.sample(START + 4 + SETTLE_S + 1, users=2, phase="baseline")
    assert s.points()[0].settled and s.points()[0].values["ttft_p95_ms"] == 5000.0
    records.rows.append((START + 3.7, 9000.0, None))
    s.sample(START + 4 + SETTLE_S + 3, users=2, phase="baseline")
    assert s.points()[0].values["ttft_p95_ms"] == 5000.0


def test_pooled_itl_is_computed_when_a_point_is_new_and_when_it_settles_only():
    records = FakeRecords()
    records.rows.append((START + 1, 100.0, None))
    s = Series(START, 1.0, records, window_s=10.0)
    first = s.sample(START + 4, users=1, phase="")
    assert first.values["itl_p99_ms"] == 10.0
    records.rows.append((START + 2, 700.0, None))
    for k in range(1, int(SETTLE_S / 2) + 2):
        s.sample(START + 4 + 2 * k, users=1, phase="")
        if not first.settled:
            assert first.values["itl_p99_ms"] == 10.0  # provisional: kept while the point settles
    assert first.settled and first.values["itl_p99_ms"] == 70.0 and first.values["ttft_p95_ms"] == 700.0
    assert records.itl_calls.count((first.start_wall, first.end_wall)) == 2
    s.finish(START + 100)  # the run ends: every point left is settled, with its ITL
    assert all(p.settled for p in s.points())
    assert all(records.itl_calls.count((p.start_wall, p.end_wall)) == 2 for p in s.points())


def test_no_records_gives_zero_requests_and_no_latency():
    s = Series(START, 1.0, FakeRecords())
    point = s.sample(START + 2, users=0, phase="")
    assert point.values["requests"] == 0 and point.values["ttft_p95_ms"] is None and point.errors_per_s == {}


def test_time_scaled_run_speaks_model_time_on_the_x_axis_and_in_error_rates():
    records = FakeRecords()
    records.rows += [(START + 1, 10.0, "timeout"), (START + 2, 10.0, "timeout"), (START + 3, 10.0, "http_5xx")]
    s = Series(START, 20.0, records, window_s=10.0)
    s.sample(START + 10, users=4, phase="step-1", phases=[PhaseSpan("step-1", "step", START + 5, None)])
    data = s.as_json()
    point = data["points"][0]
    assert point["t"] == 200.0  # 10 wall seconds x 20
    # 2 timeouts in 10 wall seconds = 200 model seconds
    assert point["errors_per_s"] == {"http_5xx": pytest.approx(1 / 200), "timeout": pytest.approx(2 / 200)}
    assert data["phases"] == [{"label": "step-1", "kind": "step", "start_t": 100.0, "end_t": None}]


def test_phases_survive_the_end_of_the_run_and_since_keeps_later_points():
    s = Series(START, 1.0, FakeRecords())
    spans = [PhaseSpan("baseline", "baseline", START, START + 3), PhaseSpan("step-1", "step", START + 3, None)]
    for second in (2, 4, 6):
        s.sample(START + second, users=1, phase="", phases=spans)
    s.sample(START + 8, users=0, phase="", phases=[])  # the timeline is gone after the run
    s.finish(START + 9)
    data = s.as_json(since_t=4.0)
    assert [p["t"] for p in data["points"]] == [6.0, 8.0]
    assert all(p["settled"] for p in data["points"])  # the page keeps these and asks only for later ones
    assert [p["label"] for p in data["phases"]] == ["baseline", "step-1"]
    assert data["ended_wall"] == START + 9


def test_history_is_bounded_and_thinned_beyond_two_hours(monkeypatch):
    monkeypatch.setattr(series_mod, "SETTLE_S", 0.0)  # no resampling: the bound is what is tested
    records = FakeRecords()
    s = Series(START, 1.0, records)
    extra = 5 * COARSE_EVERY
    for n in range(FINE_POINTS + extra):
        s.sample(START + 2.0 * (n + 1), users=1, phase="")
    assert len(s.fine) == FINE_POINTS
    assert len(s.coarse) == extra // COARSE_EVERY
    times = [p.t for p in s.points()]
    assert times == sorted(times)
    assert times[0] == 2.0 and times[1] == 2.0 * (COARSE_EVERY + 1)  # one in ten of the oldest
