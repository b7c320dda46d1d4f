"""A generator that read its sockets later than one token gap is said to be behind, and the gate says so
: a warning when every criterion is far from its limit, exit 2 when one lies within
the error the lag implies."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from loadline.analysis.report.build import build_report
from loadline.analysis.verdict import validity
from loadline.analysis.verdict.generator import behind_evidence, behind_phases
from loadline.core.slo import SLO
from tests.synthetic import make_requests, write_run

PHASES = pd.DataFrame({"label": ["step 1", "step 2"], "start_wall": [1000.0, 1010.0], "end_wall": [1010.0, 1020.0]})
N = 40  # per phase, above READ_DELAY_MIN_RECORDS


def _run(delay_ms: tuple[float, float], itl_ms: float = 20.0, clock: str = "kernel") -> pd.DataFrame:
    starts = np.concatenate([np.linspace(1000.5, 1009.0, N), np.linspace(1010.5, 1019.0, N)])
    delay = np.concatenate([np.full(N, delay_ms[0]), np.full(N, delay_ms[1])])
    return make_requests(
        starts,
        np.full(2 * N, 500.0),
        ttft_ms=100.0,
        itl_p50_ms=itl_ms,
        clock=clock,
        read_delay_ms=delay if clock == "kernel" else np.nan,
    )


def _criterion(measured: float, limit: float = 200.0) -> dict:
    return {
        "name": "TTFT P95",
        "limit": limit,
        "measured": measured,
        "passed": measured <= limit,
        "where": "step 2",
        "unit": "ms",
    }


def test_a_read_delay_above_the_token_gap_marks_its_phase_behind():
    (behind,) = behind_phases(_run((2.0, 35.0)), PHASES)
    assert behind["phase"] == "step 2" and behind["records"] == N
    assert abs(behind["read_delay_p99_ms"] - 35.0) < 1e-9 and behind["threshold_ms"] == 20.0
    # the gap sets the bar: slow tokens (60 ms apart) make a 35 ms read delay harmless
    assert behind_phases(_run((2.0, 35.0), itl_ms=60.0), PHASES) == []
    # user-clock records (TLS) carry no read delay: nothing to judge here (the loop lag speaks)
    assert behind_phases(_run((2.0, 35.0), clock="user"), PHASES) == []


def test_a_behind_generator_is_a_validity_finding_with_its_error_in_model_time():
    result = validity.assess(_run((2.0, 35.0)), PHASES, None, [_criterion(100.0)], 10.0)
    assert not result["trustworthy"] and result["confidence_steps"] == 1
    (finding,) = [f for f in result["findings"] if f["kind"] == "generator-behind"]
    assert "step 2" in finding["message"] and "350.0 ms" in finding["message"]  # 35 ms x time scale 10
    assert abs(result["generator"]["lag_error_model_ms"] - 350.0) < 1e-9
    healthy = validity.assess(_run((2.0, 3.0)), PHASES, None, [_criterion(100.0)], 10.0)
    assert healthy["generator"]["behind"] == [] and healthy["generator"]["lag_error_model_ms"] is None
    assert validity.generator_gate_note(healthy, True) == (None, False)


def test_a_pass_within_the_lags_error_is_not_trustworthy_and_a_far_one_is_a_warning():
    close = validity.assess(_run((2.0, 35.0)), PHASES, None, [_criterion(180.0)], 1.0)  # 20 ms from the limit
    note, untrustworthy = validity.generator_gate_note(close, passed=True)
    assert untrustworthy and note.startswith("PASS, but the load generator was behind: trust: untrusted")
    assert "TTFT P95 passed by 20 ms" in note

    far = validity.assess(_run((2.0, 35.0)), PHASES, None, [_criterion(100.0)], 1.0)  # 100 ms from it
    note, untrustworthy = validity.generator_gate_note(far, passed=True)
    assert not untrustworthy and note.startswith("PASS, but the load generator was behind")
    assert "verdict stands" in note

    failed = validity.assess(_run((2.0, 35.0)), PHASES, None, [_criterion(210.0)], 1.0)
    note, untrustworthy = validity.generator_gate_note(failed, passed=False)
    assert untrustworthy and note.startswith("FAIL, but") and "TTFT P95 failed by 10 ms" in note


def test_a_saturated_self_check_counts_as_behind_with_its_loop_lag_as_the_error():
    generator = pd.DataFrame(
        {
            "ts": np.arange(1000.0, 1020.0),
            "worker_id": "w0",
            "cpu_percent": 97.0,
            "loop_lag_ms": 30.0,
            "users": 8,
            "inflight": 8,
        }
    )
    result = validity.assess(_run((2.0, 3.0), clock="user"), PHASES, generator, [_criterion(180.0)], 1.0)
    assert result["generator"]["saturated"] and abs(result["generator"]["lag_error_model_ms"] - 30.0) < 1e-9
    note, untrustworthy = validity.generator_gate_note(result, passed=True)
    assert untrustworthy and "within the 30 ms" in note


def _behind_run(path):
    # 100 streamed replies well inside the default SLO, but read 35 ms late against 20 ms between tokens
    requests = make_requests(
        1000.0 + np.arange(100) * 0.1,
        np.full(100, 900.0),
        ttft_ms=200.0,
        output_tokens=64,
        itl_p50_ms=20.0,
        clock="kernel",
        read_delay_ms=35.0,
    )
    return write_run(path, requests, manifest={"name": "behind", "streaming": True, "status": "finished"})


def test_the_report_warns_on_a_far_pass_and_exits_2_on_a_pass_within_the_lag(tmp_path):
    far = build_report(_behind_run(tmp_path / "far"), SLO(), charts=False)  # TTFT P95 200 vs 800 ms
    assert far.exit_code == 0 and far.verdict["slo"]["passed"]
    assert "Note: PASS, but the load generator was behind" in far.summary and "verdict stands" in far.summary

    close = build_report(_behind_run(tmp_path / "close"), dataclasses.replace(SLO(), ttft_p95_ms=220.0), charts=False)
    assert close.exit_code == 2 and close.verdict["slo"]["passed"]
    assert "trust: untrusted" in close.summary and "TTFT P95 passed by 20 ms" in close.summary


def test_gaps_merged_to_zero_fall_back_to_the_loop_lag_bound_and_say_why():
    (behind,) = behind_phases(_run((2.0, 35.0), itl_ms=0.0), PHASES)
    assert behind["threshold_ms"] == 20.0 and behind["itl_p50_ms"] == 0.0
    (line,) = behind_evidence([behind])
    assert "> 20 ms (ITL p50 0 ms: most gaps merged away)" in line
    # a busy generator's merged reads are what counts (idle_clock.py); the reading of a server that
    # wrote them together is still said, since a busy generator's bound cannot rule it out
    assert "while the generator was busy or waiting for its core" in line
    assert "a server that wrote them together" in line


def test_a_failure_the_lag_cannot_flip_keeps_exit_1_even_with_a_doubtful_criterion():
    close = validity.assess(_run((2.0, 35.0)), PHASES, None, [_criterion(180.0)], 1.0)
    stopped = {"name": validity.COMPLETION, "passed": False, "unit": "run", "measured": None, "limit": None}
    note, untrustworthy = validity.generator_gate_note(close, False, [_criterion(180.0), stopped])
    assert not untrustworthy and note.startswith("FAIL, but the load generator was behind") and "fails anyway" in note
    far_fail = {**_criterion(400.0), "name": "TTFT P99"}  # failed by 200 ms, beyond the 35 ms error
    assert validity.generator_gate_note(close, False, [_criterion(180.0), far_fail])[1] is False
    assert validity.generator_gate_note(close, True, [_criterion(180.0)], unjudged=["ITL P95"])[1] is False
    assert validity.generator_gate_note(close, True, [_criterion(180.0)])[1] is True


def _truth(requests: pd.DataFrame, overhead_ms: float) -> pd.DataFrame:
    """The simulator's truth for `requests`: its first token `overhead_ms` before the client's TTFT."""
    arrival = requests["start_wall"].to_numpy(dtype=float)
    first = arrival + (requests["ttft_ms"].to_numpy(dtype=float) - overhead_ms) / 1000
    last = arrival + (requests["e2e_ms"].to_numpy(dtype=float) - overhead_ms) / 1000
    return pd.DataFrame(
        {"request_id": requests["request_id"], "arrival": arrival, "first_token": first, "last_token": last}
    )


def _itl_criterion(measured: float, limit: float) -> dict:
    return {
        "name": "ITL P99",
        "limit": limit,
        "measured": measured,
        "passed": measured <= limit,
        "where": "step 2",
        "unit": "ms",
    }


def test_with_the_simulators_truth_a_small_measured_floor_outranks_the_read_delay_proxy():
    """Read 35 ms late against 20 ms between tokens, but the truth log says TTFT and E2E were off by
    0.5 ms: the proxy is a note, the run is trustworthy, and the gate has nothing to doubt."""
    requests = _run((2.0, 35.0))
    for criterion in (_criterion(180.0), _criterion(100.0)):  # close to and far from the limit
        result = validity.assess(requests, PHASES, None, [criterion], 1.0, truth=_truth(requests, 0.5))
        assert result["trustworthy"] and result["confidence_steps"] == 0, result["findings"]
        (finding,) = [f for f in result["findings"] if f["kind"] == "generator-behind"]
        assert finding["severity"] == "note" and "truth log measured" in finding["message"]
        assert result["generator"]["behind"] == [] and result["generator"]["behind_seen"]
        assert validity.generator_gate_note(result, passed=True) == (None, False)


def test_with_truth_the_proxy_still_speaks_for_token_gaps_near_their_limit():
    """Merged stamps move ITL, which the truth log (first and last token) does not time."""
    requests = _run((2.0, 35.0))
    truth = _truth(requests, 0.5)
    close = validity.assess(requests, PHASES, None, [_criterion(100.0), _itl_criterion(90.0, 100.0)], 1.0, truth=truth)
    assert not close["trustworthy"] and close["generator"]["behind"]
    assert [d["criterion"] for d in close["generator"]["gate_doubts"]] == ["ITL P99"]
    far = validity.assess(requests, PHASES, None, [_criterion(100.0), _itl_criterion(20.0, 100.0)], 1.0, truth=truth)
    assert far["trustworthy"] and far["generator"]["gate_doubts"] == []


def test_with_truth_a_large_measured_floor_still_makes_the_run_untrustworthy():
    requests = _run((2.0, 35.0))
    result = validity.assess(requests, PHASES, None, [_criterion(180.0)], 1.0, truth=_truth(requests, 15.0))
    assert not result["trustworthy"] and result["floor"]["material"]
