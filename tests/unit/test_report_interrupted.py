"""A report never passes a run it cannot fully judge: one that did not end on its own (SIGTERM/SIGINT,
or a master that died) and one where a criterion that applies had no data (a plain Locust CSV has no TTFT)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loadline.analysis.report.build import build_report
from loadline.analysis.verdict import validity
from loadline.analysis.verdict.ending import ending
from loadline.core.slo import SLO
from tests.synthetic import make_requests, write_run


def _healthy_run(path, **manifest):
    # 100 streamed replies well inside the default SLO: a finished run with these records passes
    requests = make_requests(1000.0 + np.arange(100) * 0.1, np.full(100, 900.0), ttft_ms=200.0, output_tokens=64)
    return write_run(path, requests, manifest={"name": "healthy", "streaming": True, **manifest})


def test_a_finished_healthy_run_passes(tmp_path):
    result = build_report(_healthy_run(tmp_path / "run", status="finished"), SLO(), charts=False)
    assert result.exit_code == 0 and result.summary.startswith("## Loadline report: PASS")
    assert validity.COMPLETION not in result.summary


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT"])
def test_an_interrupted_run_fails_the_run_completed_criterion_and_says_by_what(tmp_path, signal_name):
    run = _healthy_run(tmp_path / "run", status="interrupted", interrupted_by=signal_name)
    result = build_report(run, SLO(), charts=False)
    assert result.exit_code == 1 and result.verdict["slo"]["passed"] is False
    first = result.summary.splitlines()[0]
    assert first.startswith(f"## Loadline report: INTERRUPTED by {signal_name}"), first
    assert result.verdict["sentence"].startswith(f"INTERRUPTED by {signal_name}:")
    row = next(c for c in result.verdict["slo"]["criteria"] if c["name"] == validity.COMPLETION)
    assert row["passed"] is False and signal_name in row["why"]
    junit = (run / "report" / "junit.xml").read_text()
    assert 'failures="2"' in junit and validity.COMPLETION in junit  # the answer's testcase and the criterion


def test_a_run_whose_manifest_still_says_running_is_incomplete(tmp_path):
    result = build_report(_healthy_run(tmp_path / "run", status="running"), SLO(), charts=False)
    assert result.exit_code == 1 and result.summary.startswith("## Loadline report: INTERRUPTED")
    assert "master died" in result.summary


def test_a_folder_without_a_status_is_not_judged_on_completion():
    # plain `locust --csv` exports and hand-made folders carry no status: nothing to say about their end
    assert validity.completion({}) is None and validity.completion(None) is None
    assert validity.completion_criterion({"status": "finished"}) is None


def _plain_locust_export(folder):
    # what `locust --csv mytest` leaves: no requests.csv, no manifest, so no TTFT anywhere
    folder.mkdir()
    pd.DataFrame(
        [
            {
                "Type": "POST",
                "Name": "/v1/chat/completions",
                "Request Count": 200,
                "Failure Count": 0,
                "Requests/s": 4.0,
                "50%": 400,
                "90%": 700,
                "95%": 900,
                "99%": 1400,
                "Max Response Time": 2100.5,
            },
            {
                "Type": "",
                "Name": "Aggregated",
                "Request Count": 200,
                "Failure Count": 0,
                "Requests/s": 4.0,
                "50%": 400,
                "90%": 700,
                "95%": 900,
                "99%": 1400,
                "Max Response Time": 2100.5,
            },
        ]
    ).to_csv(folder / "mytest_stats.csv", index=False)
    return folder


def test_a_plain_locust_export_without_ttft_is_incomplete_not_a_silent_pass(tmp_path):
    result = build_report(_plain_locust_export(tmp_path / "plain"), SLO(), charts=False)
    assert result.verdict["slo"]["passed"] is True  # nothing failed...
    assert result.exit_code == 1 and result.verdict["slo"]["unjudged"] == ["TTFT P95"]  # ...but TTFT was never judged
    assert result.summary.startswith("## Loadline report: INCOMPLETE")
    assert "TTFT P95 applies to this run but had no data" in result.verdict["sentence"]


def test_an_slo_that_switches_the_unmeasurable_criterion_off_passes_the_export(tmp_path):
    result = build_report(_plain_locust_export(tmp_path / "plain"), SLO(ttft_p95_ms=None), charts=False)
    assert result.exit_code == 0 and result.summary.startswith("## Loadline report: PASS")


def test_a_run_stopped_in_the_web_ui_is_stopped_by_user_and_never_passes(tmp_path):
    run = _healthy_run(tmp_path / "run", status="stopped", ended_by="user")
    result = build_report(run, SLO(), charts=False)
    assert result.exit_code == 1 and result.verdict["slo"]["passed"] is False
    assert result.summary.startswith("## Loadline report: STOPPED BY USER"), result.summary.splitlines()[0]
    assert result.verdict["sentence"].startswith("STOPPED BY USER:")
    row = next(c for c in result.verdict["slo"]["criteria"] if c["name"] == validity.COMPLETION)
    assert row["passed"] is False and "web UI" in row["why"]


def test_the_manifest_end_maps_to_one_status_word():
    assert ending({"status": "finished", "ended_by": "test"}) is None and ending({}) is None
    assert ending({"status": "stopped", "ended_by": "user"}).headline == "STOPPED BY USER"
    assert (
        ending({"status": "interrupted", "ended_by": "signal", "interrupted_by": "SIGINT"}).headline
        == "INTERRUPTED by SIGINT"
    )
    assert ending({"status": "running"}).headline == "INTERRUPTED"


def test_a_run_whose_disk_refused_a_batch_says_records_were_lost():
    full = ending({"status": "failed", "write_error": "No space left on device: a batch of 3 records could not be"})
    assert full.headline == "INTERRUPTED" and "could not be written whole (No space left on device" in full.reason
    assert "records were lost" in full.reason
    assert "write" not in ending({"status": "failed"}).reason  # a worker's failure says no such thing
