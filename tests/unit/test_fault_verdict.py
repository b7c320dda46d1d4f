"""A drill's own fault accounts for the run's failures: the bottleneck verdict says so (analysis/verdict/faults.py)."""

from __future__ import annotations

import pytest

from loadline.analysis.verdict.faults import explain_by_faults

UNIDENTIFIED = {
    "layer": "unidentified",
    "confidence": "low",
    "sentence": "A limit was reached but no measured layer explains it; read the server's log.",
    "evidence": ["unidentified: a limit was reached (error rate 0.36%)", "the failures: 4 stream_error"],
    "actions": ["read the server's log for the aborted requests"],
}
KILL = 'POST /admin/replicas/0/kill {"restart_after_s": 60} ok'


def event(failed: int, faults: list[str], recovered: bool = True, phase: str = "surge + kill") -> dict:
    return {
        "event": "surge x3 + fault",
        "phase": phase,
        "failed": failed,
        "faults": faults,
        "recovered": recovered,
        "recovery_s": 2.0 if recovered else None,
    }


@pytest.mark.parametrize(
    "events, failed",
    [
        ([event(4, [KILL])], 4),  # the drill-kill-replica profile on h100, x20
        ([event(3, [KILL]), event(2, ['POST /admin/faults {"error_rate": 0.5} ok'], phase="fault 2")], 5),  # two
        ([event(9, [KILL], recovered=False)], 9),
    ],
)
def test_failures_that_all_came_after_injected_faults_are_the_drills_result(events, failed):
    out = explain_by_faults(UNIDENTIFIED, events, failed)
    assert out["layer"] == "unidentified" and out["confidence"] == "low"
    assert (
        out["actions"][0].startswith("judge the drill by its recovery")
        and out["actions"][1:] == UNIDENTIFIED["actions"]
    )
    line = out["evidence"][1]
    assert line.startswith(f"every failed request ({failed}) ended after a fault the run injected")
    assert all(e["faults"][0] in line for e in events) and "not a capacity limit" in line
    assert ("did not recover in the phase" in line) == any(not e["recovered"] for e in events)
    assert "the failures came with the fault the run injected" in out["sentence"]
    assert UNIDENTIFIED["actions"] == ["read the server's log for the aborted requests"]  # not changed in place


@pytest.mark.parametrize(
    "bottleneck, events, failed",
    [
        (UNIDENTIFIED, [event(4, [KILL])], 6),  # two failures came elsewhere
        (UNIDENTIFIED, [event(4, [])], 4),  # a surge without a fault
        (UNIDENTIFIED, [], 4),  # no recovery event
        (UNIDENTIFIED, [event(4, [KILL])], 0),  # nothing failed
        ({**UNIDENTIFIED, "layer": "gateway"}, [event(4, [KILL])], 4),  # a layer explains them
    ],
)
def test_otherwise_the_verdict_is_left_as_it_was(bottleneck, events, failed):
    assert explain_by_faults(bottleneck, events, failed) is bottleneck
