"""Workloads in tokens, true to the server: whole `loadline run`s against the simulator as llama-server
(per-slot n_ctx 2048, its /tokenize, its context 400), where a word count would overflow the context.

1. Sized in the server's tokens: every prompt has the length asked for as the server counts it,
   every reply exactly max_tokens, and no request is refused.
2. Never trimmed (--max-context-tokens 0): the overflows are the tool's own `invalid_request`s, with
   llama-server's words, and the run is unusable (exit 2) instead of blaming the service.
"""

from __future__ import annotations

import json

from tests.spine_helpers import loadline, requests_table

SIM = [
    "--sim-profile",
    "tiny",
    "--sim-option",
    "quirks=llamacpp-api",
    "--sim-option",
    "max_model_len=2048",
    "--time-scale",
    "10",
]
FAST = ["--event-interval", "0.3", "--ignore-eos"]


def test_prompts_and_replies_have_the_lengths_asked_for_in_the_servers_tokens(tmp_path):
    done = loadline(
        "run",
        *SIM,
        "--scenario",
        "single",
        "--users",
        "4",
        "--run-time",
        "12s",
        "--out",
        str(tmp_path),
        "--no-charts",
        "--",
        *FAST,
        "--prompt-tokens",
        "uniform:20-2400",
        "--output-tokens",
        "uniform:8-64",
    )
    records = requests_table(done.run_dir)
    finished = records[records.status != "cancelled"]
    assert len(finished) >= 40 and (finished.status == "ok").all(), finished.error_message.unique()[:3]
    assert (finished.token_counter == "server").all()  # the simulator's /tokenize was found and used
    # exact from the first request: the chat template's tokens too were learned from /tokenize
    assert (finished.prompt_tokens == finished.prompt_tokens_requested).mean() >= 0.98
    assert (finished.output_tokens == finished.output_tokens_requested).all()
    # asked up to 2,400 tokens of a 2,048 context: the longest were sized to fit beside their reply
    assert (finished.prompt_tokens + finished.output_tokens_requested <= 2048).all()
    assert finished.prompt_tokens.max() > 1500


def test_prompts_over_the_context_are_the_tools_invalid_requests_and_the_run_is_unusable(tmp_path):
    done = loadline(
        "run",
        *SIM,
        "--scenario",
        "single",
        "--users",
        "2",
        "--run-time",
        "8s",
        "--out",
        str(tmp_path),
        "--no-charts",
        "--",
        *FAST,
        "--max-tokens",
        "16",
        "--prompt-tokens",
        "uniform:1000-4000",
        "--max-context-tokens",
        "0",
    )
    assert done.code == 2, done.stderr[-3000:]
    records = requests_table(done.run_dir)
    refused = records[records.http_status == 400]
    assert len(refused) and (refused.error_class == "invalid_request").all()
    assert refused.error_message.str.contains("exceeds the available context size").all()
    assert (records[records.status == "ok"].prompt_tokens < 2048).all()
    verdict = json.loads((done.run_dir / "report" / "verdict.json").read_text())
    invalid = verdict["validity"]["invalid_requests"]
    assert invalid["unusable"] and invalid["count"] == len(refused)
    reasons = [line for line in done.stderr.splitlines() if line.startswith("loadline run: unusable run:")]
    assert len(reasons) == 1 and "refused by the server as invalid" in reasons[0]


def test_without_the_servers_tokenize_prompts_are_calibrated_from_usage_and_stay_inside_the_context(tmp_path):
    # ~3 tokens per word (pieces of 2 characters), as real engines count some text: a word count would
    # overflow the 2,048-token slot; calibration learns the ratio from the replies' usage
    done = loadline(
        "run",
        *SIM,
        "--sim-option",
        "tokenizer_piece_chars=2",
        "--sim-option",
        "serve_tokenize=false",
        "--scenario",
        "single",
        "--users",
        "4",
        "--run-time",
        "12s",
        "--out",
        str(tmp_path),
        "--no-charts",
        "--",
        *FAST,
        "--prompt-tokens",
        "uniform:20-2400",
        "--max-tokens",
        "32",
    )
    records = requests_table(done.run_dir)
    finished = records[records.status != "cancelled"]
    assert len(finished) >= 40 and (finished.status == "ok").all(), finished.error_message.unique()[:3]
    assert (finished.token_counter == "calibrated").all()
    later = finished.sort_values("start_wall").iloc[len(finished) // 2 :]  # once a few replies taught the ratio
    error = (later.prompt_tokens - later.prompt_tokens_requested).abs() / later.prompt_tokens_requested
    long = later.prompt_tokens_requested >= 200  # a few words' luck is a large share of a short prompt
    assert error.median() < 0.05 and error[long].max() < 0.12, error.describe()
    assert finished.prompt_tokens.max() <= 2048 - 32
