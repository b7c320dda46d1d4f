"""The run's answer: one status, trust and set of capacity figures, computed once, valid against its schema."""

from __future__ import annotations

import json

import jsonschema
import pytest

from loadline.analysis.verdict.answer import compute, safe_of, time_split_of
from loadline.core.answer import Answer, Load, Point, SloSource, Status, Trust, answer_schema, exit_code
from loadline.core.slo import SLO

SCHEMA = answer_schema()
FAILED = {
    "name": "TTFT P95",
    "threshold": "<= 800 ms",
    "limit": 800.0,
    "measured": 923.0,
    "passed": False,
    "where": "step-4 (16 users)",
    "unit": "ms",
}
PASSED = {**FAILED, "measured": 500.0, "passed": True}


def verdict(criteria=(PASSED,), manifest=None, validity=None, best=None, safe=None, bottleneck=None, **extra) -> dict:
    return {
        "slo": {"criteria": list(criteria), "unjudged": extra.pop("unjudged", [])},
        "manifest": manifest or {},
        "validity": validity if validity is not None else {"usable": True, "findings": []},
        "knee": {"found": False, "reason": "one level"},
        "break_point": {"found": False, "reason": "-"},
        "max_slo_throughput": best or {"found": True, "users": 8.0, "rps": 4.7, "label": "step-3 (8 users)"},
        "safe_operating_point": safe or {"found": True, "rps": [2.8, 3.3], "users": [5.0, 6.0], "reason": "r"},
        "bottleneck": bottleneck or {},
        "time_split": extra.pop("time_split", {}),
        "phases": extra.pop("phases", []),
        "capacity": extra.pop("capacity", {}),
        **extra,
    }


def answer(v: dict, slo: SLO | None = None, untrusted: str | None = None) -> Answer:
    a = compute(v, slo or SLO(), SloSource("default.toml", "run"), untrusted)
    written = json.loads(json.dumps(a.to_dict()))  # as verdict.json holds it
    jsonschema.validate(written, SCHEMA)  # every answer these tests make is a valid verdict.json answer
    assert Answer.from_dict(written) == a  # and survives the file
    return a


@pytest.mark.parametrize(
    "v, status, code",
    [
        (verdict(), Status.PASS, 0),
        (verdict(criteria=(FAILED,)), Status.FAIL, 1),
        (verdict(unjudged=["TTFT P95"]), Status.INCOMPLETE, 1),
        (verdict(manifest={"status": "interrupted", "interrupted_by": "SIGINT"}), Status.INTERRUPTED, 1),
        (verdict(manifest={"status": "stopped", "ended_by": "user"}), Status.STOPPED_BY_USER, 1),
        (
            verdict(
                validity={"usable": False, "reason": "40 of 40 requests were rejected with HTTP 401", "findings": []}
            ),
            Status.UNUSABLE,
            2,
        ),
    ],
)
def test_status_and_exit_code(v, status, code):
    a = answer(v)
    assert (a.status, a.exit_code) == (status, code)
    assert a.log_line().startswith(f"{status.headline} (exit {code})")


@pytest.mark.parametrize(
    "findings, note, trust, code",
    [
        ([], None, Trust.TRUSTED, 0),
        ([{"severity": "note", "message": "a note"}], None, Trust.TRUSTED, 0),
        ([{"severity": "untrustworthy", "message": "the generator was saturated"}], None, Trust.DOUBTFUL, 0),
        ([{"severity": "untrustworthy", "message": "saturated"}], "TTFT P95 within the lag", Trust.UNTRUSTED, 2),
    ],
)
def test_trust_is_one_term_and_untrusted_exits_2(findings, note, trust, code):
    a = answer(verdict(validity={"usable": True, "findings": findings}), untrusted=note)
    assert (a.trust, a.exit_code) == (trust, code)
    assert a.headline == ("PASS, NOT TRUSTED" if trust is Trust.UNTRUSTED else "PASS")


def test_every_status_has_an_exit_code():
    assert {exit_code(s, Trust.TRUSTED) for s in Status} == {0, 1, 2}
    assert all(exit_code(s, Trust.UNTRUSTED) == 2 for s in Status)


@pytest.mark.parametrize(
    "band, best, expect_high, untested",
    [
        ((4.94, 5.76), 4.70, 4.70, 4.70),  # the demo's: 60-70 % of the break point lay above the best that passed
        ((2.8, 3.3), 4.70, 3.3, None),  # below it: as computed
        ((4.0, 5.0), 4.5, 4.5, 4.5),  # straddling it
    ],
)
def test_the_safe_point_never_lies_above_the_highest_load_that_met_the_slo(band, best, expect_high, untested):
    safe = safe_of(
        {"found": True, "rps": list(band), "users": [6.0, 7.0], "reason": "60-70 % of the break point"},
        Point(True, Load(users=8.0, rps=best, phase="step-3 (8 users)")),
    )
    assert safe.found and safe.rps[1] == pytest.approx(expect_high) and safe.rps[0] <= safe.rps[1] <= best
    assert safe.untested_above == untested
    assert ("untested above" in safe.text()) is (untested is not None)


def test_no_load_met_the_slo_leaves_no_safe_point():
    safe = safe_of({"found": True, "rps": [1.0, 1.2], "reason": "60-70 % of the break point"}, Point(False, None, "-"))
    assert not safe.found and "untested" in safe.reason


@pytest.mark.parametrize(
    "target, rate, status",
    [(None, 4.02, Status.PASS), (2.0, 4.02, Status.PASS), (3.0, 4.02, Status.FAIL), (None, None, Status.FAIL)],
)
def test_a_sweep_is_judged_on_its_answer_not_its_flood(target, rate, status):
    phases = [
        {"label": "flood (100/s)", "target_rate": 100.0, "rps": 14.5, "users": None},
        {"label": "probe-3", "target_rate": 4.02, "rps": 3.98, "users": None},
    ]
    v = verdict(
        criteria=(FAILED,),
        manifest={"sweep_max_rate": rate, "sweep": "sweep: ..."},
        phases=phases,
        capacity={"replicas_in_run": 2, "replicas_how": "from the manifest"},
    )
    a = answer(v, SLO(target_qps=target))
    assert a.status is status
    if rate is not None:  # the max compliant load is the sweep's probe, and the plan reads it
        assert a.max_compliant.load.offered_rps == rate and a.max_compliant.load.rps == pytest.approx(3.98)
        assert a.per_replica_rps == pytest.approx(3.98 / 2)
        assert a.safe.rps == pytest.approx((3.98 * 0.6, 3.98 * 0.7), abs=1e-3)
        assert (a.replicas is not None) is (target is not None)


def test_replicas_for_a_target_are_the_plan_of_the_max_compliant_load():
    a = answer(verdict(capacity={"replicas_in_run": 1, "replicas_how": "assumed"}), SLO(target_qps=10.0))
    assert a.replicas is not None and a.replicas.per_replica_rps == pytest.approx(4.7)
    assert a.replicas.replicas == 5 and a.replicas.steps[-1].endswith("= 5")  # 10/4.7 x 1.2 = 2.55 -> 4 at 70 %, +1


@pytest.mark.parametrize("gpu_seen, name", [(False, "compute"), (True, "gpu-compute"), (None, "gpu-compute")])
def test_the_layer_is_named_for_the_engine(gpu_seen, name):
    b = {
        "layer": "gpu-compute",
        "confidence": "medium",
        "sentence": "Capacity is limited by gpu-compute in x",
        "measured": [{"signal": "per-token time rising", "measured": "2.1", "threshold": ">= 1.5"}] * 4,
        "actions": ["add replicas"],
        **({} if gpu_seen is None else {"gpu_seen": gpu_seen}),
    }
    a = answer(verdict(bottleneck=b))
    assert a.layer.name == name and len(a.layer.evidence) == 3
    assert a.layer.evidence[0].text() == "per-token time rising: 2.1 (threshold >= 1.5)"


@pytest.mark.parametrize("share, shown, caveat", [(0.83, 0.83, False), (-0.02, 0.0, True), (None, None, False)])
def test_a_negative_outside_share_is_the_measurements_limit(share, shown, caveat):
    split = {"run": {"ttft": {"outside_share": share}}, "sentence": "s"}
    ts = time_split_of(split)
    assert ts.outside_share == shown and bool(ts.caveat) is caveat


@pytest.mark.parametrize(
    ("evidence", "text"),
    [
        (("KV usage p90", "97 %", ">= 90 %"), "KV usage p90: 97 % (threshold >= 90 %)"),
        (("running requests p50", "8"), "running requests p50: 8"),
        (("no limit showed up to step-4, 1.22 req/s",), "no limit showed up to step-4, 1.22 req/s"),
    ],
)
def test_evidence_reads_as_measured_against_threshold_or_as_words(evidence, text):
    from loadline.core.answer import Evidence

    signal, measured, threshold = (*evidence, "", "")[:3]
    assert Evidence(signal, measured, threshold).text() == text  # never a dangling "...:"
