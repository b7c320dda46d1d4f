"""The one SLO judge: which criteria apply, the one comparison, and the stop rule and gate agreeing."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from shape_fakes import drive, make_shape

from loadline.analysis.stats.compliance import phase_violations
from loadline.analysis.stats.phases import goodput_thresholds
from loadline.analysis.verdict.gate import evaluate, gate_note, gate_passed
from loadline.core.errors import UsageError
from loadline.core.judge import FAILED, NOT_JUDGED, PASSED, judge
from loadline.core.slo import SLO
from loadline.shapes import stepped
from loadline.shapes.stepped import StepShape
from loadline.shapes.stop_rule import judge_window

# A healthy streaming step on the default profile: 256-token replies at ~10 ms a token take ~2.6 s
# end to end, while the first token comes in 300 ms.
HEALTHY_STREAM = {
    "e2e_p95_ms": 2600.0,
    "e2e_p99_ms": 2900.0,
    "ttft_p95_ms": 300.0,
    "ttft_p99_ms": 450.0,
    "itl_p95_ms": 12.0,
    "itl_p99_ms": 20.0,
    "tpot_p95_ms": 11.0,
    "tpot_p99_ms": 12.0,
    "error_rate": 0.0,
}


def window(requests: int = 100, errors: int = 0, **values: float | None) -> SimpleNamespace:
    """A live window summary (loadline.runtime.live.WindowSummary's judged fields)."""
    fields = {**HEALTHY_STREAM, "error_rate": errors / requests, **values}
    return SimpleNamespace(requests=requests, ok=requests - errors, errors=errors, **fields)


def phase_table(**values: float | None) -> pd.DataFrame:
    """A one-phase report table (loadline.analysis.stats.phases.PHASE_TABLE_COLUMNS' judged fields, model time)."""
    return pd.DataFrame([{"label": "step-1 (8 users)", "ok": 100, "errors": 0, "rps": 5.0, **HEALTHY_STREAM, **values}])


def stop_rule_breaks(slo: SLO, streaming: bool | None, **values: float | None) -> bool:
    return judge_window(window(**values), slo, slo.max_error_rate, 60.0, streaming=streaming) is not None


def gate_fails(slo: SLO, streaming: bool | None, **values: float | None) -> bool:
    return not gate_passed(evaluate(phase_table(**values), slo, streaming))


@pytest.mark.parametrize(
    "key,limit", [("ttft_p95_ms", 800.0), ("itl_p99_ms", 50.0), ("tpot_p95_ms", 30.0), ("e2e_p95_ms", 1500.0)]
)
@pytest.mark.parametrize("offset,breaks", [(-0.5, False), (0.0, False), (0.5, True)])
def test_stop_rule_and_gate_agree_on_the_same_numbers_including_exactly_at_the_limit(key, limit, offset, breaks):
    slo = SLO(**{key: limit})
    streaming = key != "e2e_p95_ms"  # each criterion on the traffic it applies to
    values = {key: limit + offset}
    assert stop_rule_breaks(slo, streaming, **values) is breaks
    assert gate_fails(slo, streaming, **values) is breaks
    assert bool(phase_violations(phase_table(**values).iloc[0], slo, streaming)) is breaks


def test_exactly_at_the_error_limit_passes_everywhere():
    slo = SLO(max_error_rate=0.05)
    assert judge(slo, {**HEALTHY_STREAM, "error_rate": 0.05}, True).passed is True
    assert judge_window(window(errors=5), slo, 0.05, 60.0, streaming=True) is None
    assert gate_passed(evaluate(phase_table(error_rate=0.05), slo, True))
    assert not gate_passed(evaluate(phase_table(error_rate=0.06), slo, True))


def test_a_healthy_streaming_run_is_not_failed_by_e2e_while_a_non_streaming_one_is():
    slo = SLO()  # DOMAIN.md defaults: E2E P95 1,500 ms, P99 3,000 ms, TTFT P95 800 ms
    assert not stop_rule_breaks(slo, streaming=True)
    assert not gate_fails(slo, streaming=True)
    assert stop_rule_breaks(slo, streaming=False)
    assert gate_fails(slo, streaming=False)
    streamed = judge(slo, HEALTHY_STREAM, streaming=True)
    assert [c.name for c in streamed.checks] == ["TTFT P95", "error rate"]
    assert dict(streamed.not_applied)["E2E P95"].startswith("streaming:")
    called = judge(slo, HEALTHY_STREAM, streaming=False)
    assert [(c.name, c.outcome) for c in called.checks] == [
        ("E2E P95", FAILED),
        ("E2E P99", PASSED),
        ("error rate", PASSED),
    ]
    assert "TTFT P95" in dict(called.not_applied)


def test_the_slo_file_can_ask_for_e2e_on_streams(tmp_path):
    path = tmp_path / "slo.toml"
    path.write_text("[slo]\ngate_e2e_on_streams = true\n")
    slo = SLO.from_file(path)
    assert stop_rule_breaks(slo, streaming=True)
    assert gate_fails(slo, streaming=True)
    check = next(c for c in judge(slo, HEALTHY_STREAM, True).checks if c.name == "E2E P95")
    assert "gate_e2e_on_streams" in check.why


def test_unknown_traffic_applies_every_latency_criterion():
    judgement = judge(SLO(ttft_p99_ms=1000), HEALTHY_STREAM, streaming=None)
    assert [c.name for c in judgement.checks] == ["E2E P95", "E2E P99", "TTFT P95", "TTFT P99", "error rate"]
    assert judgement.not_applied == ()


def test_a_criterion_without_data_is_not_judged_and_the_pass_says_so():
    slo = SLO(itl_p99_ms=50.0)
    judgement = judge(slo, {**HEALTHY_STREAM, "itl_p99_ms": None}, streaming=True)
    itl = next(c for c in judgement.checks if c.name == "ITL P99")
    assert itl.outcome == NOT_JUDGED and itl.passed is None and itl.measured is None
    assert judgement.passed is None  # not True: the pass is incomplete
    assert judgement.summary() == "no criterion failed, but not judged (no data): ITL P99"
    # the stop rule does not stop on it, the gate does not fail on it but says so
    assert judge_window(window(itl_p99_ms=None), slo, 0.0, 60.0, streaming=True) is None
    criteria = evaluate(phase_table(itl_p99_ms=float("nan")), slo, True)
    assert gate_passed(criteria)
    assert gate_note(criteria) == "the SLO gate passed without judging ITL P99 (no data in this run)"
    # a failure elsewhere still fails: missing data never hides one
    assert judge(slo, {**HEALTHY_STREAM, "itl_p99_ms": None, "ttft_p95_ms": 900.0}, True).passed is False


class SlowTokensAt:
    """Live windows where per-token time breaks from `users` on; TTFT and E2E stay healthy."""

    def __init__(self, shape, users: int, **slow: float):
        self.shape, self.users, self.slow = shape, users, slow

    def __call__(self, environment, start_wall, end_wall):
        return window(**(self.slow if self.shape.runner.user_count >= self.users else {}))


@pytest.mark.parametrize("slo_key,name", [("itl_p99_ms", "ITL P99"), ("tpot_p95_ms", "TPOT P95")])
def test_per_token_limits_stop_a_stepped_run(tmp_path, slo_key, name):
    slo_file = tmp_path / "slo.toml"
    slo_file.write_text(f"[slo]\n{slo_key} = 40\n")
    shape = make_shape(StepShape, time_scale=10.0, slo_file=str(slo_file), step_max_users=160)
    shape.window_function = SlowTokensAt(shape, 40, **{slo_key: 55.0})
    drive(shape)
    last = shape.state.timeline.rows[-1]
    assert last.label == "step-3 (40 users)"
    assert last.note == f"{name} 55 ms > 40 ms"


def test_a_non_streaming_stepped_run_stops_on_e2e():
    shape = make_shape(StepShape, time_scale=10.0, step_max_users=160, non_streaming=True)
    shape.window_function = lambda environment, start_wall, end_wall: window()  # E2E P95 2,600 ms
    drive(shape)
    assert shape.state.timeline.rows[-1].note == "E2E P95 2,600 ms > 1,500 ms"


@pytest.mark.parametrize(
    "text,message",
    [
        ('ttft_p95_ms = "fast"', 'ttft_p95_ms must be a number or "none"'),
        ("e2e_p95_ms = -1", "e2e_p95_ms must be >= 0"),
        ("max_error_rate = 1.5", "max_error_rate must be between 0 and 1"),
        ('max_error_rate = "none"', 'max_error_rate cannot be "none"'),
        ("max_oom_restarts = 0.5", "max_oom_restarts must be a whole number"),
        ('gate_e2e_on_streams = "yes"', "gate_e2e_on_streams must be true or false"),
        ("itl_p99_ms = true", "itl_p99_ms must be a number"),
    ],
)
def test_the_slo_loader_rejects_wrong_types_and_ranges_in_one_line(tmp_path, text, message):
    path = tmp_path / "slo.toml"
    path.write_text(f"[slo]\n{text}\n")
    with pytest.raises(UsageError) as raised:
        SLO.from_file(path)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_every_shipped_slo_file_loads():
    for path in sorted(Path(__file__).resolve().parents[2].joinpath("configs", "slo").glob("*.toml")):
        assert isinstance(SLO.from_file(path), SLO), path


def test_goodput_counts_a_request_by_the_criteria_that_apply_to_its_traffic():
    slo = SLO(tpot_p95_ms=40.0, itl_p99_ms=50.0)
    assert goodput_thresholds(slo, streaming=True) == {"ttft_ms": 800.0, "tpot_ms": 40.0}
    assert goodput_thresholds(slo, streaming=False) == {"e2e_ms": 1500.0}


@pytest.mark.parametrize("slo_text,asks", [("", False), ("itl_p99_ms = 50\n", True)])
def test_the_stop_rule_asks_the_live_window_for_pooled_itl_only_when_the_slo_judges_it(
    tmp_path, monkeypatch, slo_text, asks
):
    slo_file = tmp_path / "slo.toml"
    slo_file.write_text("[slo]\n" + slo_text)
    calls: list[bool] = []

    def live(environment, start_wall, end_wall, itl=False):
        calls.append(itl)
        return window()

    monkeypatch.setattr(stepped, "live_window", live)
    drive(make_shape(StepShape, time_scale=10.0, step_max_users=20, slo_file=str(slo_file)))
    assert calls and any(calls) is asks
