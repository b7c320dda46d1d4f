"""The stepped stop rule: pure judging, and the shape ending the run at the break point."""

import csv
import json
from types import SimpleNamespace

import pytest
from shape_fakes import drive, make_shape

from loadline.core import runfolder
from loadline.core.slo import SLO
from loadline.shapes.stepped import StepShape
from loadline.shapes.stop_rule import judge_window


def summary(
    requests=100,
    errors=0,
    e2e_p95=500.0,
    e2e_p99=900.0,
    ttft_p95=200.0,
    ttft_p99=300.0,
    itl_p95=12.0,
    itl_p99=20.0,
    tpot_p95=11.0,
    tpot_p99=14.0,
):
    return SimpleNamespace(
        requests=requests,
        ok=requests - errors,
        errors=errors,
        cancelled=0,
        error_rate=(errors / requests if requests else 0.0),
        e2e_p50_ms=300.0,
        e2e_p95_ms=e2e_p95,
        e2e_p99_ms=e2e_p99,
        ttft_p95_ms=ttft_p95,
        ttft_p99_ms=ttft_p99,
        itl_p95_ms=itl_p95,
        itl_p99_ms=itl_p99,
        tpot_p95_ms=tpot_p95,
        tpot_p99_ms=tpot_p99,
        output_tokens_per_s=50.0,
        rps=5.0,
    )


def test_a_healthy_window_passes():
    assert judge_window(summary(), SLO(), 0.05, 10.0) is None


def test_latency_and_error_breaches_are_named_with_their_numbers():
    reason = judge_window(summary(errors=10, e2e_p95=2310.0, ttft_p95=900.0), SLO(), 0.05, 10.0)
    assert reason == "E2E P95 2,310 ms > 1,500 ms; TTFT P95 900 ms > 800 ms; error rate 10.00% > 5.00% (10 of 100)"


def test_error_threshold_is_the_step_option_not_the_slo_gate():
    assert judge_window(summary(errors=1), SLO(max_error_rate=0.0), 0.05, 10.0) is None


def test_unset_slo_fields_are_not_checked():
    slo = SLO(e2e_p95_ms=None, e2e_p99_ms=None, ttft_p95_ms=None)
    assert judge_window(summary(e2e_p95=99_999.0, e2e_p99=99_999.0, ttft_p95=99_999.0), slo, 0.05, 10.0) is None


def test_too_few_requests_are_not_judged():
    assert judge_window(summary(requests=5, errors=1), SLO(), 0.05, 10.0, min_requests=10) is None
    assert judge_window(summary(requests=10, errors=1), SLO(), 0.05, 10.0, min_requests=10) is not None


def test_no_completed_request_breaks_only_when_the_window_outlasts_the_slo():
    assert judge_window(summary(requests=0), SLO(), 0.05, 2.0) is None  # too short to know
    assert "no request completed within 4.0 s" in judge_window(summary(requests=0), SLO(), 0.05, 4.0)
    assert judge_window(None, SLO(), 0.05, 60.0) is None  # no live stats: cannot judge


class FakeLive:
    """Live stats where every step at or above `breaks_at` users is too slow."""

    def __init__(self, shape, breaks_at):
        self.shape, self.breaks_at, self.calls = shape, breaks_at, []

    def __call__(self, environment, start_wall, end_wall):
        self.calls.append((start_wall, end_wall))
        users = self.shape.runner.user_count
        return summary(ttft_p95=2500.0 if users >= self.breaks_at else 400.0)


@pytest.fixture
def run_dir(tmp_path):
    runfolder.set_active(runfolder.ActiveRun(path=tmp_path, started_wall=0.0))
    yield tmp_path
    runfolder.set_active(None)


def test_stepped_run_ends_at_the_step_that_breaks_the_slo_and_says_so(run_dir):
    shape = make_shape(StepShape, time_scale=10.0, step_settle=2.0)
    shape.window_function = FakeLive(shape, breaks_at=40)
    ticks = drive(shape)
    assert ticks[-1][1] is None and max(t[0] for _, t in ticks[:-1]) == 40  # never went to 80 users

    with open(run_dir / runfolder.PHASES, newline="") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == runfolder.PHASE_COLUMNS
    assert [r["label"] for r in rows] == ["baseline", "step-1 (10 users)", "step-2 (20 users)", "step-3 (40 users)"]
    assert [r["note"] for r in rows[:3]] == ["", "", ""]
    assert rows[3]["note"] == "TTFT P95 2,500 ms > 800 ms"
    manifest = json.loads((run_dir / runfolder.MANIFEST).read_text())
    assert manifest["stop_reason"] == "step-3 (40 users): TTFT P95 2,500 ms > 800 ms"

    # steps only (not the baseline), each window = the 18 s step minus the 2 s settle
    calls = shape.window_function.calls
    assert len(calls) == 3 and all(end - start == pytest.approx(16.0) for start, end in calls)
    # the window each step was judged on is on its row, so the report judges the same requests
    assert rows[0]["judged_until_wall"] == ""
    for row, (start, end) in zip(rows[1:], calls):
        assert float(row["start_wall"]) == pytest.approx(start) and float(row["judged_until_wall"]) == pytest.approx(
            end
        )
        assert float(row["end_wall"]) - float(row["judged_until_wall"]) == pytest.approx(2.0)


def test_stop_rule_state_lists_each_judged_step_for_the_web_ui(run_dir):
    shape = make_shape(StepShape, time_scale=10.0, step_settle=2.0)
    shape.window_function = FakeLive(shape, breaks_at=20)
    drive(shape)
    state = shape.stop_rule_state()
    assert state["enabled"] is True and state["max_error_rate"] == shape.settings.max_error_rate
    assert state["verdicts"] == [
        {"phase": "step-1 (10 users)", "verdict": "held the SLO"},
        {"phase": "step-2 (20 users)", "verdict": "broke the SLO: TTFT P95 2,500 ms > 800 ms"},
    ]


def test_stop_rule_off_runs_every_step(run_dir):
    shape = make_shape(StepShape, time_scale=10.0, step_stop_on_slo="false", step_max_users=80)
    shape.window_function = FakeLive(shape, breaks_at=20)
    drive(shape)
    assert shape.window_function.calls == []
    assert shape.state.timeline.rows[-1].label == "step-4 (80 users)"
    assert not (run_dir / runfolder.MANIFEST).exists()


def test_slo_file_option_is_used(tmp_path):
    slo_file = tmp_path / "slo.toml"
    slo_file.write_text("[slo]\nttft_p95_ms = 3000\n")
    shape = make_shape(StepShape, time_scale=10.0, step_max_users=40, slo_file=str(slo_file))
    shape.window_function = FakeLive(shape, breaks_at=40)  # 2,500 ms is inside this SLO
    drive(shape)
    assert shape.state.timeline.rows[-1].note == ""


def test_missing_slo_file_fails_the_start(tmp_path):
    shape = make_shape(StepShape, slo_file=str(tmp_path / "nope.toml"))
    assert shape.tick() is None and shape.runner.environment.process_exit_code == 2


def test_a_step_in_which_nothing_completes_is_the_break_point():
    """loadline.runtime.live.window returns None for an empty window; earlier records prove stats flow."""
    shape = make_shape(StepShape, time_scale=10.0, step_settle=0.0)
    first_step_start = shape.clock.wall() + 6.0

    def live(environment, start_wall, end_wall):
        if start_wall < first_step_start:  # the baseline and everything before the steps
            return summary()
        return None if shape.runner.user_count >= 20 else summary()

    shape.window_function = live
    drive(shape)
    assert shape.state.timeline.rows[-1].label == "step-2 (20 users)"
    # 18 s of wall time at --time-scale 10 is 180 s of model time, the clock loadline.runtime.live reports in
    assert shape.state.timeline.rows[-1].note == "no request completed within 180.0 s (SLO allows 3,000 ms)"


def test_without_any_live_stats_steps_are_not_judged():
    shape = make_shape(StepShape, time_scale=10.0, step_max_users=40)
    shape.window_function = lambda environment, start_wall, end_wall: None
    drive(shape)
    assert [r.note for r in shape.state.timeline.rows] == ["", "", "", ""]


def test_a_failing_live_window_is_logged_and_the_shape_goes_on(caplog):
    shape = make_shape(StepShape, time_scale=10.0, step_max_users=20)

    def broken(environment, start_wall, end_wall):
        raise RuntimeError("live stats exploded")

    shape.window_function = broken
    drive(shape)
    assert shape.state.timeline.rows[-1].label == "step-2 (20 users)"
    assert "judging step-1 (10 users) failed" in caplog.text
