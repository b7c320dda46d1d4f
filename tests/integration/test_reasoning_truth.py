"""Reasoning and tool-call streams against the simulator's truth log.

The client reads as a Loadline user does (Connection + read_stream + fill_timings) from the
simulator in reasoning mode (half of each reply's tokens streamed first as reasoning): TTFT is the
first reasoning token's write, TTFO the first answer token's, both within the first-token test's
tolerance (tests/integration/test_stamp_truth.py) while the client keeps up; the reasoning and answer
counts are the server's; reasoning chunks go the no-parse way. A tool-call reply is a complete,
counted reply.
"""

from __future__ import annotations

import sys
import threading
import uuid

import orjson
import pandas as pd
import pytest
from spine_helpers import truth_table
from stream_helpers import chat_body, post_and_read

from loadline.client import streaming
from loadline.client.connection import Connection

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="kernel stamps are Linux's")

THREADS, REQUESTS_EACH, TOKENS = 3, 5, 10
STAMP_TOLERANCE_MS = 1.0  # as tests/integration/test_stamp_truth.py


def stream_some(url: str, rows: list[dict], body_extra: dict) -> None:
    conn = Connection(url, 5, 10)
    try:
        for _ in range(REQUESTS_EACH):
            rid = uuid.uuid4().hex
            body = chat_body(TOKENS, **body_extra)
            rec, result, response = post_and_read(conn, rid, body)
            usage = result.usage or {}
            rows.append(
                {
                    "request_id": rid,
                    "start_wall": response.sent_wall,
                    "ttft_ms": rec.ttft_ms,
                    "ttfo_ms": rec.ttfo_ms,
                    "reasoning_ms": rec.reasoning_ms,
                    "e2e_ms": rec.e2e_ms,
                    "tpot_ms": rec.tpot_ms,
                    "rec_output": rec.output_tokens,
                    "rec_reasoning": rec.reasoning_tokens,
                    "reasoning_chunks": result.reasoning_chunks,
                    "chunks": rec.content_chunks,
                    "answer_chunks": len(result.pieces),
                    "rec_tool_calls": rec.tool_calls,
                    "finish": rec.finish_reason,
                    "cached": rec.cached_tokens,
                    "read_delay_ms": rec.read_delay_ms,
                    "usage_reasoning": (usage.get("completion_tokens_details") or {}).get("reasoning_tokens"),
                }
            )
    finally:
        conn.close()


def run_streams(sim, body_extra: dict | None = None) -> pd.DataFrame:
    rows: list[dict] = []
    threads = [
        threading.Thread(target=stream_some, args=(sim.url, rows, body_extra or {}), daemon=True)
        for _ in range(THREADS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    sim.stop()
    records = pd.DataFrame(rows).merge(truth_table(sim.truth_path), on="request_id")
    assert len(records) >= THREADS * REQUESTS_EACH // 2, len(records)
    return records


@pytest.mark.exclusive  # client stamps against the simulator's truth to 1 ms: runs alone, as the other truth tests
@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_ttft_and_ttfo_of_reasoning_streams_match_the_simulators_truth(sim_server, field, monkeypatch):
    parses: list[bytes] = []
    real = orjson.loads
    monkeypatch.setattr(streaming, "_loads", lambda data: parses.append(data) or real(data))
    sim = sim_server(
        "tiny",
        "--set",
        "reasoning_share=0.5",
        "--set",
        f"reasoning_field={field}",
        "--set",
        "enable_prompt_tokens_details=true",
    )
    records = run_streams(sim, {"ignore_eos": True})

    assert (records.reasoning_tokens == TOKENS // 2).all()
    assert (records.rec_reasoning == records.reasoning_tokens).all()  # the server's count, from usage
    assert (records.usage_reasoning == records.reasoning_tokens).all()
    assert (records.reasoning_chunks == records.reasoning_tokens).all()  # and every one was seen
    assert (records.answer_chunks == records.output_tokens - records.reasoning_tokens).all()
    assert (records.rec_output == records.output_tokens).all() and (records.chunks == TOKENS).all()
    assert (records.cached == records.cached_tokens).all()  # prompt_tokens_details from the prefix cache

    gap_ms = (records.last_token - records.first_token) / (records.output_tokens - 1) * 1000
    kept_up = records.read_delay_ms < gap_ms
    assert kept_up.sum() >= len(records) // 2, records[["read_delay_ms"]].assign(gap_ms=gap_ms).describe()
    ttft_err = (records.start_wall + records.ttft_ms / 1000 - records.first_reasoning_token) * 1000
    ttfo_err = (records.start_wall + records.ttfo_ms / 1000 - records.first_answer_token) * 1000
    for name, err in (("TTFT", ttft_err), ("TTFO", ttfo_err)):
        assert err[kept_up].abs().max() < STAMP_TOLERANCE_MS, (name, err[kept_up].describe())
        assert (err > -STAMP_TOLERANCE_MS).all(), (name, err.describe())  # never stamped before the write
    assert (records.first_reasoning_token == records.first_token).all()
    truth_reasoning_ms = (records.first_answer_token - records.first_reasoning_token) * 1000
    assert (records.reasoning_ms - truth_reasoning_ms)[kept_up].abs().max() < 2 * STAMP_TOLERANCE_MS
    # TPOT is the answer's: from its first token over its own tokens
    answer_tpot = (records.e2e_ms - records.ttfo_ms) / (records.output_tokens - records.reasoning_tokens - 1)
    assert (records.tpot_ms - answer_tpot).abs().max() < 1e-6

    # the no-parse path: per reply the role chunk, the first reasoning and first answer chunk, the
    # finish and the usage are parsed, nothing else
    assert len(parses) <= 5 * len(records) + THREADS, (len(parses), len(records))


def test_a_tool_call_reply_is_ok_and_counted(sim_server):
    sim = sim_server("tiny", "--set", "tool_call_share=1", "--set", "reasoning_share=0.5")
    records = run_streams(sim)
    assert (records.outcome == "ok").all()
    stopped = records[records.finish_reason != "length"]
    assert len(stopped) and (stopped.finish == "tool_calls").all()
    assert (records.finish == records.finish_reason).all()
    assert (records.rec_output == records.output_tokens).all()  # never an empty reply
    with_call = records[records.output_tokens > records.reasoning_tokens]
    assert (
        len(with_call)
        and (with_call.rec_tool_calls == 1).all()
        and (with_call.tool_calls == 1).all()
        and (with_call.answer_chunks == 0).all()
    )
    assert (with_call.chunks == with_call.output_tokens).all()
    ttfo_err = (with_call.start_wall + with_call.ttfo_ms / 1000 - with_call.first_answer_token) * 1000
    assert (ttfo_err > -STAMP_TOLERANCE_MS).all(), ttfo_err.describe()
