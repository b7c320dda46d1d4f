"""The rate sweep's search (shapes/rate_sweep.py), driven phase by phase against a judge that knows
the server's true limit: the answer is bounded only by rates that were probed."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from shape_fakes import drive, make_shape

from loadline.shapes.rate_steps import RateShape
from loadline.shapes.rate_sweep import RateSweepShape

OPTIONS = dict(
    sweep_start_rate=0.5,
    sweep_max_rate=100.0,
    sweep_hold=30.0,
    sweep_probes=6,
    sweep_precision=0.05,
    step_max_error_rate=0.01,
    step_min_requests=10,
    step_settle=5.0,
    time_scale=1.0,
    slo_file="",
    non_streaming=False,
)


def sweep(monkeypatch, limit: float, flood_rps: float, **options):
    """Run the sweep against a server that meets the SLO at rates <= `limit` and completes `flood_rps`
    per second under the flood. Returns (probed rates, the answer, the finishing note, and the phase
    count the log and web UI were told at the end minus the phases that ran: 0 when they agree)."""
    probed: list[float] = []

    def judge(self, phase, start_wall, end_wall):  # the SLO judge and the carried-rate check, as one
        probed.append(phase.target_rate)
        return None if phase.target_rate <= limit else f"over the limit {limit}"

    monkeypatch.setattr(RateShape, "on_phase_end", judge)
    shape = make_shape(RateSweepShape, **{**OPTIONS, **options})
    shape.window_function = lambda environment, start, end: SimpleNamespace(rps=flood_rps, e2e_p50_ms=2000.0)
    drive(shape, tick_every=5.0)
    notes = [row.note for row in shape.state.timeline.rows if row.note]
    timeline = shape.state.timeline
    return probed, shape.search.answer, notes[-1], timeline.planned_phases - len(timeline.rows)


@pytest.mark.parametrize("limit, flood_rps", [(17.6, 14.5), (30.0, 10.0), (50.0, 45.0)])
def test_a_limit_above_the_floods_throughput_is_found_by_raising_the_ceiling(monkeypatch, limit, flood_rps):
    """An overloaded server can complete fewer requests per second under the flood than it serves at a
    lower rate (seen: 14.5/s under a 100/s flood, 17.6/s met the SLO): the 1.25x ceiling is a guess,
    probed first, and doubled while it holds."""
    probed, answer, note, unrun = sweep(monkeypatch, limit, flood_rps)
    assert probed[2] == pytest.approx(1.25 * flood_rps, abs=0.001)
    failed = [rate for rate in probed[2:] if rate > limit]
    assert failed and answer <= limit < min(failed), probed  # a probe above the limit failed: a real bound
    assert "bracket" in note and answer >= 0.9 * limit, (probed, note)
    assert unrun == 0


@pytest.mark.parametrize("limit, flood_rps, probes", [(60.0, 12.0, 2), (90.0, 4.0, 3), (99.0, 2.0, 5)])
def test_probes_that_never_fail_give_an_at_least_answer(monkeypatch, limit, flood_rps, probes):
    """The guess held every time and the probes ran out below the flood's rate: no rate bounds the answer."""
    probed, answer, note, unrun = sweep(monkeypatch, limit, flood_rps, sweep_probes=probes)
    assert unrun == 0 and len(probed) == 2 + probes
    assert all(rate <= limit for rate in probed[2:]), probed
    assert answer == max(probed[2:])
    assert [b / a for a, b in zip(probed[2:], probed[3:])] == pytest.approx([2.0] * (probes - 1), rel=0.001)
    assert note.startswith("sweep: max SLO-compliant rate") and "at least" in note and "bracket" not in note


def test_a_doubled_guess_stops_at_the_floods_rate_which_failed(monkeypatch):
    probed, answer, note, unrun = sweep(monkeypatch, 70.0, 16.0)  # guesses 20, 40, then 80 > limit
    assert probed[2:5] == [20.0, 40.0, 80.0] and 40.0 <= answer <= 70.0 and unrun == 0
    probed, answer, note, unrun = sweep(monkeypatch, 99.0, 30.0)  # 37.5, 75, then the flood's 100 bounds it
    assert probed[2:4] == [37.5, 75.0] and all(rate < 100.0 for rate in probed[2:]) and "..100/s" in note


@pytest.mark.parametrize("limit, flood_rps", [(8.0, 20.0), (3.0, 10.0), (11.0, 9.5)])
def test_a_limit_below_the_ceiling_is_bracketed_by_probes(monkeypatch, limit, flood_rps):
    probed, answer, note, _ = sweep(monkeypatch, limit, flood_rps)
    failed = [rate for rate in probed[2:] if rate > limit]
    assert failed and answer <= limit < min(failed)
    assert "bracket" in note and (min(failed) - answer) / min(failed) < 0.05 or len(probed) == 2 + 6, (probed, note)


def test_a_flood_that_meets_the_slo_ends_the_sweep_there(monkeypatch):
    probed, answer, note, unrun = sweep(monkeypatch, 200.0, 100.0)
    assert probed == [0.5, 100.0] and answer == 100.0 and unrun == 0
    assert "raise --sweep-max-rate" in note
