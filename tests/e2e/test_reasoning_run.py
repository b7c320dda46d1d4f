"""A whole `loadline run` against a reasoning, tool-calling simulator with prompt-cache reports:
the rows carry what the server sent (reasoning and cached tokens, tool calls) and when (TTFO), tool
calls are ok replies, and the report's phase table shows the columns such a run has."""

from __future__ import annotations

import pytest
from spine_helpers import loadline, requests_table, truth_table


@pytest.mark.exclusive  # TTFO to 2 ms against the truth, as the spine's TTFT: the machine to itself
def test_a_reasoning_run_records_and_reports_every_token_kind(tmp_path):
    done = loadline(
        "run",
        "--sim-profile",
        "tiny",
        "--sim-option",
        "reasoning_share=0.5",
        "--sim-option",
        "tool_call_share=0.3",
        "--sim-option",
        "enable_prompt_tokens_details=true",
        "--users",
        "4",
        "--spawn-rate",
        "4",
        "--run-time",
        "6s",
        "--out",
        str(tmp_path),
        "--no-charts",
        "--",
        "--think-mean",
        "0.3",
        "--think-p90",
        "0.6",
        "--prompt-mix",
        "short=1",
        "--max-tokens",
        "32",
    )
    assert done.code in (0, 1), done.stderr[-3000:]
    records, truth = requests_table(done.run_dir), truth_table(done.run_dir / "truth.jsonl")
    rows = records.merge(truth, on="request_id", suffixes=("", "_truth"))
    assert (rows.status != "error").all(), rows[rows.status == "error"][["error_class", "error_message"]]
    ok = rows[rows.status == "ok"]
    assert len(ok) >= 10
    assert (ok.finish_reason == ok.finish_reason_truth).all() and (ok.finish_reason == "tool_calls").any()
    assert (ok.output_tokens == ok.output_tokens_truth).all()
    assert (ok.reasoning_tokens == ok.reasoning_tokens_truth).all()
    assert (ok.tool_calls == ok.tool_calls_truth).all()
    assert (ok.cached_tokens == ok.cached_tokens_truth).all()
    # each reply exact to 2 ms within its own read delay, as the plain spine's TTFT (test_run_spine.py)
    ttfo_err = (ok.start_wall + ok.ttfo_ms / 1000 - ok.first_answer_token).abs() * 1000
    assert (ttfo_err <= ok.read_delay_ms + 2.0).all(), ok.assign(err=ttfo_err)[["err", "read_delay_ms"]]
    summary = (done.run_dir / "report" / "summary.md").read_text()
    header = next(line for line in summary.splitlines() if line.startswith("| phase | users |"))
    assert header.rstrip(" |").endswith("TTFO P95 | reasoning | cache hits"), header
