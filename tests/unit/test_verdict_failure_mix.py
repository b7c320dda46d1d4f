"""A limit no layer's metrics explain (no engine metrics scraped, requests failing): the verdict stays
`unidentified` and says which failures there were, with what the leading class points at (as
llama_cpp.server's interrupted streams do)."""

from __future__ import annotations

import numpy as np
import pytest
from synthetic import make_requests, write_run

from loadline.analysis.data.load import load_run
from loadline.analysis.stats.phases import phase_table
from loadline.analysis.verdict.bottleneck import judge

T0 = 1_700_000_000.0


def one_phase_run(tmp_path, failures: dict[str, int], ok: int = 40):
    classes = [cls for cls, n in failures.items() for _ in range(n)] + [""] * ok
    n = len(classes)
    status = ["error" if cls else "ok" for cls in classes]
    rows = make_requests(
        T0 + np.linspace(0, 30, n),
        np.full(n, 300.0),
        ttft_ms=np.full(n, 50.0),
        status=status,
        error_class=classes,
        http_status=[500 if c == "http" else 200 for c in classes],
        finish_reason=["" if cls else "stop" for cls in classes],
    )
    phases = [
        {
            "index": 0,
            "label": "whole-run",
            "kind": "run",
            "start_wall": T0,
            "end_wall": T0 + 31,
            "target_users": 4,
            "spawn_rate": 4,
            "users_start": 4,
            "users_end": 4,
            "note": "",
        }
    ]
    run = load_run(write_run(tmp_path, rows, phases))
    failure = {
        "name": "error rate",
        "measured": sum(failures.values()) / n,
        "threshold": "<= 0.00%",
        "unit": "fraction",
        "where": "whole-run",
    }
    return judge(run, phase_table(run), slo_failures=[failure])


@pytest.mark.parametrize(
    "failures, lead, hint",
    [
        ({"truncated": 30}, "truncated", "request-interruption"),
        ({"truncated": 12, "stream_error": 3}, "truncated", "request-interruption"),
        ({"not_event_stream": 20, "truncated": 2}, "not_event_stream", "what answers in front of the engine"),
        ({"invalid_request": 20, "truncated": 2}, "invalid_request", "in the server's tokens"),
    ],
)
def test_the_leading_failure_class_is_named_with_what_it_points_at(tmp_path, failures, lead, hint):
    verdict = one_phase_run(tmp_path, failures)
    assert verdict["layer"] == "unidentified" and verdict["confidence"] == "low"
    mix = next(line for line in verdict["evidence"] if line.startswith("the failures:"))
    for cls, n in failures.items():
        assert f"{n} {cls}" in mix
    assert f"; {lead}:" in mix
    assert hint in verdict["actions"][0] and hint in verdict["sentence"]


def test_a_class_without_a_known_cause_is_listed_but_no_cause_is_guessed(tmp_path):
    verdict = one_phase_run(tmp_path, {"http": 10})  # HTTP 500s: the engine's or anything's
    mix = next(line for line in verdict["evidence"] if line.startswith("the failures:"))
    assert "10 http" in mix and "; http:" not in mix
    assert verdict["actions"][0].startswith("scrape the engine's /metrics")


def test_the_headline_is_not_repeated_and_the_slo_value_is_a_percentage(tmp_path):
    verdict = one_phase_run(tmp_path, {"truncated": 10}, ok=30)
    assert len(verdict["evidence"]) == len(set(verdict["evidence"]))
    assert "error rate 25.00% (limit <= 0.00%)" in " ".join(verdict["evidence"])
