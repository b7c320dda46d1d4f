"""Whole runs against the simulator behaving like llama.cpp (simulator/quirks.py): true verdicts.

What the real servers do: llama-server's close after every stream cost 2.8 % of
requests (RemoteDisconnected) and failed the run; llama-cpp-python's interrupted streams counted as
`ok` and the report said PASS; its UUID-only X-Request-Id turned every request into a 400.
"""

from __future__ import annotations

import json

from spine_helpers import assert_every_request_once, loadline, requests_table, truth_table

SHORT_THINK = ["--think-mean", "0.05", "--think-p90", "0.1", "--prompt-mix", "short=1", "--max-tokens", "24"]


def test_a_server_closing_after_every_stream_costs_no_request(tmp_path):
    done = loadline(
        "run",
        "--sim-profile",
        "tiny",
        "--sim-option",
        "quirks=close-after-stream",
        "--users",
        "4",
        "--run-time",
        "6s",
        "--out",
        str(tmp_path),
        "--no-report",
        "--",
        *SHORT_THINK,
    )
    assert done.code == 0, done.stderr[-3000:]
    records, truth = requests_table(done.run_dir), truth_table(done.run_dir / "truth.jsonl")
    finished = records[records.status != "cancelled"]
    assert len(finished) >= 8 and (finished.status == "ok").all(), finished.error_class.value_counts()
    assert records.stale_retries.sum() > 0  # the dead connections were met, and resent
    assert_every_request_once(records, truth)


def test_interrupted_streams_are_truncated_failures_and_the_run_does_not_pass(tmp_path):
    quirks = "quirks=interrupt+uuid-request-id+close-after-stream"
    done = loadline(
        "run",
        "--sim-profile",
        "tiny",
        "--sim-option",
        quirks,
        "--users",
        "4",
        "--run-time",
        "6s",
        "--out",
        str(tmp_path),
        "--no-charts",
        "--",
        *SHORT_THINK,
    )
    assert done.code == 1, done.stderr[-3000:]  # the report's gate failed (error rate), not a crash
    records, truth = requests_table(done.run_dir), truth_table(done.run_dir / "truth.jsonl")
    failed = records[records.status == "error"]
    # the only failures are the ones the server caused: no 400 for our ids, no reset on its closes
    assert set(failed.error_class) == {"truncated"}, failed.error_class.value_counts()
    assert (truth.outcome != "rejected").all()
    interrupted = set(truth.request_id[truth.outcome == "interrupted"])
    cancelled = set(records.request_id[records.status == "cancelled"])  # the stop may beat the [DONE]
    assert interrupted and interrupted - cancelled <= set(failed.request_id)
    assert (failed.output_tokens > 0).any() and failed[failed.output_tokens > 0].ttft_ms.notna().all()
    assert_every_request_once(records, truth)
    verdict = json.loads((done.run_dir / "report" / "verdict.json").read_text())
    assert verdict["passed"] is False


def test_without_an_id_header_nothing_is_refused_and_rows_match_the_truth_by_count(tmp_path):
    done = loadline(
        "run",
        "--sim-profile",
        "tiny",
        "--sim-option",
        "quirks=uuid-request-id",
        "--users",
        "3",
        "--run-time",
        "5s",
        "--out",
        str(tmp_path),
        "--no-report",
        "--",
        *SHORT_THINK,
        "--request-id-header",
        "",
    )
    assert done.code == 0, done.stderr[-3000:]
    records, truth = requests_table(done.run_dir), truth_table(done.run_dir / "truth.jsonl")
    assert (records.status != "error").all() and records.request_id.is_unique
    assert truth.request_id.str.startswith("sim-").all()  # the server never saw our ids...
    # ...and lost nothing: every answered request has its row; a stop may cut one before its answer
    answered = records[records.ttfb_ms.notna()]
    assert len(answered) <= len(truth) <= len(records) and (truth.outcome != "rejected").all()
    assert 0 < (records.status == "ok").sum() <= (truth.outcome == "ok").sum()
