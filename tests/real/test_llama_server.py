"""Loadline against llama.cpp's C++ `llama-server` (8 slots, one thread, the tiny model).

What is checked, and against what truth:
- token counts: the records' output tokens against the server's own counter
  (`llamacpp:tokens_predicted_total`) and its per-request log;
- timings: the client's TTFT and TPOT against the server's own per-request timings (its
  `print_timing` log lines: the same prompt_ms / predicted_per_token_ms its usage chunk reports);
- errors: none that the server did not cause (no dropped kept-alive connection counted as a failure);
- verdicts: 16 users on 8 slots is a slot/scheduler limit with llama.cpp's metrics as evidence;
  1-2 users is headroom.
"""

from __future__ import annotations

import re

import make_tiny_gguf  # a script beside this file (tests/real is on sys.path)
import pandas as pd
import pytest
from real_helpers import stages_file

from loadline.analysis.verdict.thresholds import Thresholds

MAX_TOKENS = 64  # the tiny model never emits EOS (make_tiny_gguf.py): every reply is exactly this long
# Loadline's own noise floors (analysis/verdict/context.py): a TTFT difference below the latency
# floor, or a per-token difference below the token floor, is noise to every verdict.
TTFT_FLOOR_MS = Thresholds().noise_floor_ms
# The client's TPOT and the server's per-token time span the same 63 steps; they differ only by
# when the first and last chunks reached the client, a delay the TTFT bound above already limits.
TPOT_BOUND_MS = TTFT_FLOOR_MS / (MAX_TOKENS - 1)
SINGLE = ("--scenario", "single")
FAST_EVENTS = (
    "--max-tokens",
    str(MAX_TOKENS),
    "--event-interval",
    "0.1",
    "--prompt-mix",
    "short=1",
    "--scrape-interval",
    "2",
)


def _token_bounds(rows: pd.DataFrame) -> tuple[int, int]:
    """What the server's generated-token counter may read for these records.

    Finished requests count exactly; a stream cut when the run stopped (status cancelled) was
    generating until the server noticed, so it adds at least what reached the client and at most
    max_tokens.
    """
    ok = rows[rows["status"] == "ok"]
    cut = rows[rows["status"] != "ok"]
    received = int(pd.to_numeric(rows["output_tokens"], errors="coerce").fillna(0).sum())
    return received, int(ok["output_tokens"].sum()) + MAX_TOKENS * len(cut)


def _finding(verdict: dict, layer: str) -> dict | None:
    """The verdict's finding for `layer`, primary or secondary (None: the verdict does not name it)."""
    b = verdict["bottleneck"]
    if b["layer"] == layer:
        return {"layer": layer, "evidence": b["evidence"], "primary": True}
    for other in b.get("secondary") or []:
        if other.get("layer") == layer:
            return {**other, "primary": False}
    return None


def _slot_limit_named(run, slots: int, real_summary) -> None:
    """The verdict names the slot/scheduler limit, with llama.cpp's busy slots and deferred requests."""
    verdict = run.verdict
    b = verdict["bottleneck"]
    found = _finding(verdict, "scheduler")
    others = [x.get("layer") for x in b.get("secondary") or []]
    real_summary(
        "verdict",
        f"{b['layer']} ({b['confidence']}), also {others or 'nothing'}; scheduler "
        + ("primary" if found and found["primary"] else "secondary" if found else "NOT named"),
    )
    assert found is not None, b
    evidence = " ".join(found["evidence"])
    real_summary("scheduler evidence", evidence[:400])
    assert re.search(rf"\b{slots}\b", evidence) and re.search(r"wait|defer", evidence), evidence


def _errors_not_from_the_server(rows: pd.DataFrame) -> pd.DataFrame:
    """Failed rows without an HTTP error status from the server: the client's or the network's doing."""
    failed = rows[rows["status"] == "error"]
    status = pd.to_numeric(failed["http_status"], errors="coerce").fillna(0)
    return failed[status < 400]


def test_one_user_matches_the_servers_own_timings_and_counts(llama_server, loadline_run, real_summary):
    server = llama_server(parallel=8)
    run = loadline_run(server.url, *SINGLE, "--users", "1", "--run-time", "25s", locust=FAST_EVENTS)
    rows = run.requests.sort_values("start_wall").reset_index(drop=True)
    ok = rows[rows["status"] == "ok"]
    timings = server.timings()
    assert len(ok) >= 20, run.output[-3000:]
    # one user: requests are sequential, so the server's log is in the records' order
    assert rows["status"].iloc[: len(ok)].eq("ok").all(), "a request after a failed or cut one"
    assert len(ok) <= len(timings) <= len(rows)
    server_side = pd.DataFrame(timings[: len(ok)])
    assert (ok["output_tokens"].to_numpy() == server_side["predicted_n"].to_numpy()).all()
    assert (ok["output_tokens"] == MAX_TOKENS).all() and (ok["finish_reason"] == "length").all()

    gap = ok["ttft_ms"].to_numpy() - server_side["prompt_ms"].to_numpy()
    tpot = ok["tpot_ms"].to_numpy() - server_side["predicted_per_token_ms"].to_numpy()
    predicted = server.metrics()["llamacpp:tokens_predicted_total"]
    low, high = _token_bounds(rows)
    real_summary("llamacpp:tokens_predicted_total vs records", f"{predicted:.0f} vs {low}..{high}")
    real_summary(
        "TTFT client - server prompt_ms (median, min, max)",
        f"{pd.Series(gap).median():.1f} ms, {gap.min():.1f}, {gap.max():.1f} ({len(ok)} requests)",
    )
    real_summary(
        "TPOT client - server per-token ms (median |diff|, max |diff|)",
        f"{pd.Series(abs(tpot)).median():.3f} ms, {abs(tpot).max():.3f} ms",
    )
    real_summary(
        "client TTFB below 0 (headers before the request was sent)",
        f"{int((ok['ttfb_ms'] < 0).sum())} of {len(ok)} (min {ok['ttfb_ms'].min():.1f} ms)",
    )
    assert low <= predicted <= high
    assert pd.Series(gap).median() < TTFT_FLOOR_MS
    assert pd.Series(abs(tpot)).median() < TPOT_BOUND_MS
    # the server stops its prompt timer before it samples the first token (server-common.h,
    # t_prompt_last), and the client's clock starts when the request is sent: a first token seen
    # earlier than prompt_ms after sending means the client's clocks disagree with each other
    assert (ok["ttfb_ms"] >= 0).all(), "response headers stamped before the request was sent"
    assert gap.min() > 0, "the client saw a first token before the server had computed it"


def test_sixteen_users_on_eight_slots_is_a_slot_limit(llama_server, loadline_run, real_summary, real_dir):
    server = llama_server(parallel=8)
    assert server.props()["total_slots"] == 8
    stages = stages_file(real_dir / "stages.toml", ("2 users", 2, 40), ("16 users", 16, 40))
    run = loadline_run(server.url, *SINGLE, "--shape", "stages", locust=("--stages-file", str(stages), *FAST_EVENTS))
    rows = run.requests
    predicted = server.metrics()["llamacpp:tokens_predicted_total"]
    low, high = _token_bounds(rows)
    real_summary(
        "llamacpp:tokens_predicted_total vs records",
        f"{predicted:.0f} vs {low}..{high} "
        f"({(rows['status'] == 'ok').sum()} ok, {(rows['status'] != 'ok').sum()} not ok)",
    )
    assert low <= predicted <= high

    foreign = _errors_not_from_the_server(rows)
    real_summary("errors the server did not cause", f"{len(foreign)} of {len(rows)}")
    assert foreign.empty, foreign[["error_class", "error_message"]].value_counts().to_dict()

    _slot_limit_named(run, 8, real_summary)


def test_four_users_on_one_slot_is_a_slot_limit(llama_server, loadline_run, real_summary, real_dir):
    """One slot: the batch never grows, so per-token time stays put while requests are deferred:
    a pure slot cap, with no compute saturation to share the blame."""
    server = llama_server(parallel=1)
    stages = stages_file(real_dir / "stages.toml", ("1 user", 1, 30), ("4 users", 4, 30))
    run = loadline_run(server.url, *SINGLE, "--shape", "stages", locust=("--stages-file", str(stages), *FAST_EVENTS))
    assert _errors_not_from_the_server(run.requests).empty
    _slot_limit_named(run, 1, real_summary)


def test_one_and_two_users_have_headroom(llama_server, loadline_run, real_summary, real_dir):
    server = llama_server(parallel=8)
    stages = stages_file(real_dir / "stages.toml", ("1 user", 1, 30), ("2 users", 2, 30))
    # Users who pause ~1 s between requests (as people do): 1-2 req/s offered against the ~4 req/s
    # one thread serves (measured: 16 users with no pause get 4-5 req/s). Without a pause even
    # two users keep the single thread busy and double each other's per-token time: not headroom.
    paced = (
        "--max-tokens",
        str(MAX_TOKENS),
        "--event-interval",
        "1",
        "--prompt-mix",
        "short=1",
        "--scrape-interval",
        "2",
    )
    run = loadline_run(server.url, *SINGLE, "--shape", "stages", locust=("--stages-file", str(stages), *paced))
    verdict = run.verdict["bottleneck"]
    real_summary(
        "verdict at 1-2 users", f"{verdict['layer']} ({verdict['confidence']}): {' '.join(verdict['evidence'])[:300]}"
    )
    assert verdict["layer"] == "headroom", verdict
    assert _errors_not_from_the_server(run.requests).empty


@pytest.mark.parametrize("think", ["0.05", "1"])
def test_chat_at_short_and_long_think_times_has_no_client_made_errors(think, llama_server, loadline_run, real_summary):
    """llama-server closes the connection after each streamed response while advertising keep-alive:
    a client that reuses it must not turn that into failed requests."""
    server = llama_server(parallel=8)
    run = loadline_run(
        server.url,
        "--scenario",
        "chat",
        "--users",
        "4",
        "--run-time",
        "30s",
        locust=(
            "--max-tokens",
            "32",
            "--think-mean",
            think,
            "--think-p90",
            str(2 * float(think)),
            "--prompt-mix",
            "short=1",
            "--scrape-interval",
            "2",
        ),
    )
    rows = run.requests
    foreign = _errors_not_from_the_server(rows)
    disconnected = rows["error_message"].astype(str).str.contains("RemoteDisconnected").sum()
    retries = int(pd.to_numeric(rows.get("stale_retries", pd.Series(dtype=float)), errors="coerce").fillna(0).sum())
    real_summary(
        f"chat, think {think} s: errors the server did not cause / RemoteDisconnected / stale retries",
        f"{len(foreign)} / {disconnected} / {retries} of {len(rows)} requests",
    )
    assert len(rows) >= 20
    assert disconnected == 0 and foreign.empty, foreign[["error_class", "error_message"]].value_counts().to_dict()


def test_prompts_sized_in_the_servers_tokens_fit_its_context_and_have_their_length(
    llama_server, loadline_run, real_summary
):
    # Prompts up to past the 2,048-token slot: sized by llama-server's own /tokenize, the longest are
    # cut to fit beside their reply, none is refused, and the server counts what was asked for
    # (the chat template's tokens are learned from the first reply of each user's message count).
    server = llama_server(parallel=2)
    run = loadline_run(
        server.url,
        *SINGLE,
        "--users",
        "2",
        "--run-time",
        "40s",
        locust=(
            "--max-tokens",
            str(MAX_TOKENS),
            "--event-interval",
            "0.1",
            "--prompt-tokens",
            "uniform:50-2400",
            "--scrape-interval",
            "2",
        ),
    )
    rows = run.requests
    ok = rows[rows["status"] == "ok"]
    refused = rows[rows["http_status"] == 400]
    later = ok.sort_values("start_wall").groupby("user_id").tail(-1)
    exact = (later["prompt_tokens"] == later["prompt_tokens_requested"]).mean()
    real_summary(
        "llama-server: prompts exact / refused / longest prompt",
        f"{exact:.1%} of {len(later)} / {len(refused)} / {ok['prompt_tokens'].max():.0f} tokens",
    )
    assert refused.empty, refused["error_message"].unique()[:3]
    assert (ok["token_counter"] == "server").all()
    assert exact >= 0.9
    assert (ok["prompt_tokens"] + MAX_TOKENS <= make_tiny_gguf.N_CTX).all()


@pytest.mark.parametrize(
    "slot_ctx, mix",
    [(2048, None), (2048, "medium=0.5,long=0.5"), (512, "medium=0.5,long=0.5")],
    ids=["2048-default-mix", "2048-long", "512-long"],
)
def test_chats_with_growing_histories_stay_inside_the_slot_and_have_their_length(
    slot_ctx, mix, llama_server, loadline_run, real_summary
):
    # Six-turn chats whose histories grow past the slot: every prompt (history, template, new message)
    # and its reply fit the slot's context in llama-server's own tokens; none is refused; each prompt
    # is the length asked for (within 1 % or 2 tokens) and each reply exactly max_tokens long.
    server = llama_server(parallel=2, slot_ctx=slot_ctx)
    run = loadline_run(
        server.url,
        "--scenario",
        "chat",
        "--users",
        "2",
        "--run-time",
        "40s",
        locust=(
            "--max-tokens",
            "32",
            "--ignore-eos",
            "--think-mean",
            "0.05",
            "--think-p90",
            "0.1",
            "--turns-mean",
            "6",
            "--turns-max",
            "6",
            *(("--prompt-mix", mix) if mix else ()),
            "--scrape-interval",
            "2",
        ),
    )
    rows = run.requests
    ok = rows[rows["status"] == "ok"]
    refused = rows[(rows["http_status"] == 400) | (rows["error_class"] == "invalid_request")]
    later = ok.sort_values("start_wall").groupby("user_id").tail(-1)  # the template learned from a first reply
    asked = later["prompt_tokens_requested"].astype(float)
    close = (later["prompt_tokens"] - asked).abs() <= (asked * 0.01).clip(lower=2)
    exact_replies = (ok["output_tokens"] == ok["output_tokens_requested"]).mean()
    real_summary(
        f"chat, slot {slot_ctx}, mix {mix or 'default'}: within 1 % or 2 tokens / refused / replies exact / longest",
        f"{close.mean():.1%} of {len(later)} / {len(refused)} / {exact_replies:.1%} / {ok['prompt_tokens'].max():.0f}",
    )
    assert len(later) >= 10
    assert refused.empty, refused["error_message"].unique()[:3]
    assert close.mean() >= 0.99, later[~close][["prompt_tokens", "prompt_tokens_requested"]].head()
    assert exact_replies == 1.0
    assert (ok["prompt_tokens"] + 32 <= slot_ctx).all()
