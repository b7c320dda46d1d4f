"""The report's wording rules: headroom never stands beside a failed SLO without the reason."""

from __future__ import annotations

from html import escape as html_escape

import pytest

from loadline.analysis.report import formatting as f
from loadline.analysis.report import sections
from loadline.analysis.report.html import render_html
from loadline.analysis.report.markdown import render_markdown, verdict_sentence
from loadline.analysis.verdict.answer import compute
from loadline.core.answer import SloSource
from loadline.core.slo import SLO

FAILED = {
    "name": "TTFT P95",
    "threshold": "<= 800 ms",
    "limit": 800.0,
    "measured": 1200.0,
    "passed": False,
    "where": "fixed (32 users)",
    "unit": "ms",
}


def _verdict(layer="headroom", criteria=(FAILED,), validity=None, time_split=None) -> dict:
    verdict = {
        "name": "t",
        "run": "/tmp/run",
        "time_scale": 1.0,
        "passed": False,
        "exit_code": 1,
        "slo": {"passed": not any(c["passed"] is False for c in criteria), "criteria": list(criteria)},
        "knee": {"found": False, "reason": "one phase"},
        "break_point": {"found": False, "reason": "-"},
        "max_slo_throughput": {"found": False, "reason": "-"},
        "safe_operating_point": {"found": False},
        "phases": [],
        "error_classes": [],
        "recovery": [],
        "missing": [],
        "notes": [],
        "bottleneck": {"layer": layer, "confidence": "high", "evidence": ["no limit reached"]},
        "validity": validity or {"usable": True, "findings": [], "floor": {}},
        "time_split": time_split or {"available": False, "why": "not scraped", "phases": []},
    }
    verdict["answer"] = compute(verdict, SLO(), SloSource("defaults", "defaults")).to_dict()
    return verdict


def test_headroom_beside_a_failed_criterion_carries_the_reason_everywhere():
    verdict = _verdict(
        time_split={
            "available": True,
            "phases": [],
            "dominant": "queue",
            "sentence": "client TTFT mean 1,100 ms vs the engine's own 1,090 ms: 10 ms (1%) outside",
        }
    )
    verdict["sentence"] = verdict_sentence(verdict)
    line = sections.bottleneck_line(verdict)
    assert line.startswith("headroom (no capacity limit reached)") and "the SLO failed on TTFT P95 1,200" in line
    assert "no saturation signal" in line and "1,090 ms" in line
    for row in render_markdown(verdict).splitlines():
        if "headroom" in row:
            assert "the SLO failed on" in row, row
    html = render_html(verdict, [])
    first = html.index("headroom")  # the first mention is the headline with its reason; the details follow
    assert html[first:].startswith("headroom (no capacity limit reached)")
    assert "the SLO failed on" in html[first : html.index("</b>", first)]


def test_headroom_with_a_passing_slo_is_plain_and_other_layers_untouched():
    assert sections.bottleneck_line(_verdict(criteria=())) == "headroom (confidence high) - no limit reached"
    assert sections.bottleneck_line(_verdict(layer="scheduler")).startswith("scheduler (confidence high)")


def test_an_unusable_run_says_so_instead_of_a_verdict():
    verdict = _verdict(
        layer=None,
        validity={
            "usable": False,
            "reason": "40 of 40 requests (100%) were rejected with HTTP 401",
            "findings": [],
            "floor": {},
            "setup_failure": {
                "statuses": {"401": 40},
                "http_status": 401,
                "content_type": "application/json",
                "body_sample": "bad key",
            },
        },
    )
    verdict["bottleneck"] = {"layer": None, "not_judged": ["unusable run: 40 of 40 ..."]}
    verdict["sentence"] = verdict_sentence(verdict)
    text = render_markdown(verdict)
    assert text.startswith("## Loadline report: UNUSABLE") and "UNUSABLE RUN: 40 of 40" in text
    assert "| 401 | application/json | 40 | bad key |" in text and "headroom" not in text


@pytest.mark.parametrize(
    ("users", "said"),
    [((8.1, 10.0), "about 8-10 users"), ((3.6, 4.4), "about 4 users"), ((0.4, 0.6), "about 1 user"), (None, "")],
)
def test_the_safe_operating_point_says_whole_users(users, said):
    line = f.safe_point({"rps": [4.86, 5.66], "users": users, "reason": "60-70 % of the break point"})
    assert line.startswith("Safe operating point: 4.86-5.66 req/s") and line.endswith("(60-70 % of the break point)")
    assert (said in line) if said else ("user" not in line)


def test_no_safe_operating_point_says_why():
    line = f.safe_point({"found": False, "none": True, "reason": "none: w3 broke at 20 users, ... with time, not load"})
    assert line == "Safe operating point: none: w3 broke at 20 users, ... with time, not load"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (-0.001, "0.00"),
        (-0.004, "0.00"),
        (-0.02, "-0.02"),
        (-0.4, "-0.40"),
        (-1234.2, "-1,234"),
        (-0.0, "0"),
        (0.004, "0.00"),
        (12.34, "12.3"),
    ],
)
def test_a_number_that_rounds_to_zero_carries_no_sign(value, shown):
    """The validity table's client-minus-truth P50 is a few us either side of zero: '-0.00' claimed a sign
    the shown digits cannot carry; a real negative keeps it."""
    assert f.num(value) == shown


REST = {"kind": "watch-rested", "severity": "note", "message": "worker w0: the first-bytes watch rested ~10 s of 20 s"}
BEHIND = {"kind": "generator-behind", "severity": "note", "message": "the load generator was behind (...)"}
SATURATED = {"kind": "generator-saturated", "severity": "untrustworthy", "message": "the load generator was saturated"}


@pytest.mark.parametrize(
    "findings, starts, kept",
    [
        ([], "Valid: requests reached the engine, the generator kept up.", True),
        (
            [REST],
            "Valid: requests reached the engine, the generator kept up. Noted: worker w0: the first-bytes watch",
            True,
        ),
        ([BEHIND], "Valid: requests reached the engine. Noted: the load generator was behind", False),
        (
            [BEHIND, REST],
            "Valid: requests reached the engine. Noted: the load generator was behind (...); worker w0",
            False,
        ),
        ([SATURATED, REST], "Valid; trust: doubtful: the load generator was saturated. Noted: worker w0", False),
    ],
)
def test_the_validity_line_carries_its_notes_and_never_says_kept_up_beside_a_lag(findings, starts, kept):
    """Notes (a lag the truth log measured, a rested watch) do not lower trust, but they are said."""
    verdict = _verdict(validity={"usable": True, "findings": findings, "floor": {}})
    line = sections.validity_status(verdict)
    assert line.startswith(starts), line
    assert ("the generator kept up" in line) == kept
    for finding in findings:
        assert finding["message"] in line
    verdict["sentence"] = verdict_sentence(verdict)
    assert line in render_markdown(verdict) and html_escape(line, quote=False) in render_html(verdict, [])


@pytest.mark.parametrize("dominant, linked", [("outside-engine", True), ("queue", False), (None, False)])
def test_headroom_beside_time_spent_outside_the_engine_says_both_on_one_line(dominant, linked):
    sentence = "outside-engine: client TTFT mean 579 ms vs the engine's own 88 ms: 491 ms (85%) outside the engine"
    verdict = _verdict(
        criteria=(), time_split={"available": True, "phases": [], "dominant": dominant, "sentence": sentence}
    )
    line = sections.bottleneck_line(verdict)
    assert line.startswith("headroom")
    assert ("most of the wait is outside it" in line and sentence in line) is linked
