"""The SLO gate: thresholds just passed and just failed, worst phase named, JUnit XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest
from synthetic import make_requests, write_run

from loadline.analysis.data.load import load_run
from loadline.analysis.report.junit import junit_xml
from loadline.analysis.stats.phases import phase_table
from loadline.analysis.verdict.answer import compute
from loadline.analysis.verdict.gate import evaluate, gate_note, gate_passed, open_loop_criteria
from loadline.core.answer import SloSource
from loadline.core.slo import SLO


@pytest.fixture
def table(tmp_path):
    # one phase, E2E = 15, 30, ..., 1500 ms -> P95 = 95.05 x 15 = 1425.75 ms, P99 = 99.01 x 15 = 1485.15 ms
    e2e = np.arange(1, 101) * 15.0
    requests = make_requests(1000.0 + np.arange(100) * 0.1, e2e, ttft_ms=e2e / 10, output_tokens=5)
    return phase_table(load_run(write_run(tmp_path / "run", requests)))


def _criterion(criteria, name):
    return next(c for c in criteria if c.name == name)


def test_just_passed_and_just_failed(table):
    passed = evaluate(table, SLO(e2e_p95_ms=1425.76, e2e_p99_ms=1485.16, ttft_p95_ms=142.58))
    assert gate_passed(passed)
    assert _criterion(passed, "E2E P95").measured == pytest.approx(1425.75)
    failed = evaluate(table, SLO(e2e_p95_ms=1425.74, e2e_p99_ms=1485.16, ttft_p95_ms=142.58))
    assert not gate_passed(failed)
    assert _criterion(failed, "E2E P95").passed is False
    assert _criterion(failed, "E2E P99").passed is True


def test_error_rate_and_throughput_target(table):
    # whole-run phase: first start 1000.0 s, last end 1009.9 s + 1.5 s -> 100 ok / 11.4 s = 8.77 req/s
    slo = {"safety_factor": 1.5, "e2e_p95_ms": 2000, "ttft_p95_ms": None}
    enough = _criterion(evaluate(table, SLO(target_qps=5, **slo)), "throughput within SLO")
    assert enough.limit == 7.5 and enough.passed is True
    assert enough.measured == pytest.approx(100 / 11.4)
    short = _criterion(evaluate(table, SLO(target_qps=6, **slo)), "throughput within SLO")
    assert short.limit == 9.0 and short.passed is False
    assert _criterion(evaluate(table, SLO(**slo)), "error rate").passed is True


def test_unmeasured_criterion_does_not_decide(table):
    table = table.assign(ttft_p95_ms=np.nan)
    criteria = evaluate(table, SLO(e2e_p95_ms=2000, ttft_p95_ms=800))
    assert _criterion(criteria, "TTFT P95").passed is None
    assert gate_passed(criteria)
    assert gate_note(criteria) == "the SLO gate passed without judging TTFT P95 (no data in this run)"


def _answered(criteria: list, manifest: dict | None = None) -> dict:
    verdict = {
        "slo": {"criteria": [c.as_dict() for c in criteria], "unjudged": [], "passed": gate_passed(criteria)},
        "manifest": manifest or {},
        "validity": {"usable": True, "findings": []},
        "knee": {"found": False},
        "break_point": {"found": False},
        "max_slo_throughput": {"found": False},
        "safe_operating_point": {"found": False},
        "bottleneck": {},
        "time_split": {},
        "phases": [],
    }
    verdict["answer"] = compute(verdict, SLO(), SloSource("defaults", "defaults")).to_dict()
    return verdict


@pytest.mark.parametrize("limit, failed", [(1000, ["E2E P95 <= 1000 ms"]), (100_000, [])])
def test_junit_xml_fails_the_answer_and_each_failed_criterion(table, limit, failed):
    criteria = evaluate(table, SLO(e2e_p95_ms=limit))
    root = ET.fromstring(junit_xml(_answered(criteria)))
    assert int(root.get("tests")) == len(criteria) + 1  # the answer's own testcase first
    names = [case.get("name") for case in root.iter("testcase") if case.find("failure") is not None]
    assert names == (["run answer: fail, trust trusted", *failed] if failed else [])
    assert int(root.get("failures")) == len(names)


def test_junit_xml_of_a_sweep_judged_on_its_answer_has_no_failure(table):
    """The flood's failed criterion does not gate a sweep that found a compliant rate: no failure, exit 0."""
    criteria = evaluate(table, SLO(e2e_p95_ms=1000))
    verdict = _answered(criteria, {"sweep_max_rate": 4.0, "sweep": "sweep: max SLO-compliant rate 4/s"})
    root = ET.fromstring(junit_xml(verdict))
    assert verdict["answer"]["exit_code"] == 0 and root.get("failures") == "0"
    skipped = [
        case.find("skipped").get("message") for case in root.iter("testcase") if case.find("skipped") is not None
    ]
    assert any(message.startswith("not gating (the rate sweep found 4 req/s") for message in skipped)


def _server(used_mib, restarts):
    import json

    rows = []
    for i, used in enumerate(used_mib):
        for gpu, share in (("0", 1.0), ("1", 0.5)):  # GPU 1 always half as full: GPU 0 decides
            labels = json.dumps({"gpu": gpu}, sort_keys=True)
            rows += [
                (100.0 + i, "sim", "DCGM_FI_DEV_FB_USED", labels, used * share),
                (100.0 + i, "sim", "DCGM_FI_DEV_FB_FREE", labels, 10_000 - used * share),
            ]
    for i, count in enumerate(restarts):
        rows.append((100.0 + i, "sim", "loadline_sim_replica_restarts_total", json.dumps({"reason": "oom"}), count))
    return pd.DataFrame(rows, columns=["ts", "source", "metric", "labels", "value"])


def test_gpu_memory_and_oom_restarts_from_server_metrics():
    from loadline.analysis.verdict.server_gate import server_criteria

    ok = {c.name: c for c in server_criteria(_server([5000, 8400, 7000], [0, 0, 0]), SLO())}
    assert ok["GPU memory"].measured == pytest.approx(0.84) and ok["GPU memory"].passed is True
    assert ok["OOM restarts"].measured == 0 and ok["OOM restarts"].passed is True
    bad = {c.name: c for c in server_criteria(_server([5000, 8600, 7000], [0, 1, 1]), SLO())}
    assert bad["GPU memory"].passed is False and bad["GPU memory"].measured == pytest.approx(0.86)
    assert bad["OOM restarts"].measured == 1 and bad["OOM restarts"].passed is False
    unmeasured = server_criteria(pd.DataFrame(columns=["ts", "source", "metric", "labels", "value"]), SLO())
    assert [c.passed for c in unmeasured] == [None, None]


def _arrival(phase: str, target: float | None, achieved: float, short: bool = False, late: float | None = 5.0) -> dict:
    return {"phase": phase, "target_rate": target, "achieved_rate": achieved, "short": short, "lateness_p95_ms": late}


@pytest.mark.parametrize(
    "phases, offered, on_time, where",
    [
        # the first step of a rate-steps run not offered: its fast replies prove nothing about 2/s
        (
            [_arrival("rate 2", 2, 1.2, short=True), _arrival("rate 4", 4, 4), _arrival("rate 8", 8, 8)],
            False,
            True,
            "rate 2",
        ),
        (
            [_arrival("rate 2", 2, 2), _arrival("rate 4", 4, 3.99), _arrival("rate 8", 8, 6, short=True)],
            False,
            True,
            "rate 8",
        ),
        # within the arrival process's noise: offered (arrivals.py decides `short`), the share still said
        ([_arrival("rate 2", 2, 1.97), _arrival("rate 4", 4, 4)], True, True, "rate 2"),
        # every arrival sent, but late: users felt the lateness that latency from sent does not show
        ([_arrival("rate 2", 2, 2), _arrival("rate 4", 4, 4, late=240.0)], True, False, "rate 2"),
    ],
)
def test_an_open_loop_run_passes_only_if_every_phase_was_offered_its_rate_on_time(phases, offered, on_time, where):
    rate, lateness = open_loop_criteria(phases, lateness_limit_ms=80.0)
    assert (rate.name, rate.passed, rate.where) == ("arrival rate offered", offered, where)
    assert rate.measured == pytest.approx(
        min(p["achieved_rate"] / p["target_rate"] for p in phases if p["phase"] == where)
    )
    assert lateness.passed is on_time and lateness.measured == max(p["lateness_p95_ms"] for p in phases)
    assert gate_passed([rate, lateness]) is (offered and on_time)


def test_open_loop_criteria_skip_closed_loop_phases_and_missing_numbers():
    nan = float("nan")
    assert open_loop_criteria([], 80.0) == []
    assert open_loop_criteria([_arrival("fixed", None, 3.0), _arrival("x", nan, 3.0)], 80.0) == []
    (rate,) = open_loop_criteria([_arrival("rate 2", 2, 2, late=nan)], 80.0)  # no lateness measured: not judged
    assert rate.passed is True
    (rate,) = open_loop_criteria([_arrival("rate 2", 2, 2)], None)  # no latency budget in the SLO
    assert rate.passed is True
