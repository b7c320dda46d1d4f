"""llama.cpp's captured behaviours, reproduced by the simulator's quirks, against Loadline's client stack.

Each test talks to a real simulator process through the same connection and SSE reader the users
use (Connection, read_stream), so what is checked is what a run would record.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
import requests
from sim_client import metric, run_streams, scrape, stream_chat
from spine_helpers import truth_table

from loadline.client.connection import Connection
from loadline.client.discovery import probe
from loadline.client.streaming import StreamFailure, StreamResult, chat_content, read_stream
from loadline.core.identity import next_request_id
from loadline.core.records import ErrorClass

BODY = {
    "model": "m",
    "messages": [{"role": "user", "content": "hello there"}],
    "stream": True,
    "max_tokens": 8,
    "stream_options": {"include_usage": True},
}


def _post(conn: Connection, request_id: str | None, body: dict = BODY):
    headers = {"Content-Type": "application/json", **({"X-Request-Id": request_id} if request_id else {})}
    return conn.post("/v1/chat/completions", json.dumps(body).encode(), headers)


def _stream(conn: Connection, request_id: str, body: dict = BODY):
    """One streamed chat request read like a user reads it: (response, result, StreamFailure|None, resends)."""
    response = _post(conn, request_id, body)
    result, error = StreamResult(), None
    try:
        read_stream(response, chat_content, result)
    except StreamFailure as exc:
        error = exc
    response.close()  # as LLMUser: a finished body keeps the connection
    return response, result, error, response.stale_retries


def test_close_after_stream_costs_no_request_and_every_resend_is_counted(sim_server):
    sim = sim_server("tiny", "--quirks", "close-after-stream")
    conn = Connection(sim.url, 5, 10)
    ids = [next_request_id() for _ in range(12)]
    outcomes = [_stream(conn, rid) for rid in ids]  # back to back: no think time at all
    head = outcomes[0][0]
    assert head.header("Keep-Alive") == "timeout=5, max=100" and not head.header("Connection")  # as llama-server
    assert [error for _, _, error, _ in outcomes] == [None] * 12
    resends = sum(r for _, _, _, r in outcomes)
    assert resends >= 1, "no request met the closing connection: the quirk did not reproduce the race"
    sim.stop()
    truth = truth_table(sim.truth_path)
    # the dropped first sends never reached the application: each request is in the truth once, served
    assert sorted(truth.request_id) == sorted(ids) and (truth.outcome == "ok").all()


def test_without_the_resend_the_same_server_fails_requests(sim_server):
    """The control: a plain requests session (urllib3's pool, no resend) meets the dead connections."""
    sim = sim_server("tiny", "--quirks", "close-after-stream")
    plain = requests.Session()
    failures = 0
    for _ in range(8):
        try:
            with plain.post(sim.url + "/v1/chat/completions", json=BODY, stream=True, timeout=(5, 10)) as response:
                for _ in response.iter_content(None):
                    pass
        except requests.exceptions.ConnectionError:
            failures += 1
    assert failures >= 1


def test_only_uuid_request_ids_are_accepted_and_loadline_sends_uuids(sim_server):
    sim = sim_server("tiny", "--quirks", "uuid-request-id")
    conn = Connection(sim.url, 5, 10)
    refused = _post(conn, "0f3275-3")
    assert refused.status == 400 and refused.read_all() == b"" and not refused.header("Content-Type")
    refused.close()
    assert requests.get(sim.url + "/v1/models", headers={"X-Request-Id": "x"}, timeout=5).status_code == 400
    ours = next_request_id()
    assert uuid.UUID(ours).version == 4
    _, result, error, _ = _stream(conn, ours)
    assert error is None and result.finish_reason == "length"
    anonymous = _post(conn, None, {**BODY, "stream": False})  # no header
    assert anonymous.status == 200
    anonymous.close()
    sim.stop()
    outcomes = dict(zip(truth_table(sim.truth_path).request_id, truth_table(sim.truth_path).outcome))
    assert outcomes["0f3275-3"] == "rejected" and outcomes[ours] == "ok"


def test_a_new_request_interrupts_the_stream_in_flight_which_is_truncated(sim_server):
    sim = sim_server("tiny", "--quirks", "interrupt")
    long_body = {**BODY, "max_tokens": 400, "ignore_eos": True}
    first, second = Connection(sim.url, 5, 10), Connection(sim.url, 5, 10)
    cut_id, new_id = next_request_id(), next_request_id()
    cut = _post(first, cut_id, long_body)  # returns at the first token: the stream is in flight
    _, new_result, new_error, _ = _stream(second, new_id)
    result = StreamResult()
    with pytest.raises(StreamFailure) as failure:
        read_stream(cut, chat_content, result)
    assert failure.value.error_class == ErrorClass.TRUNCATED and "[DONE] without a finish_reason" in str(failure.value)
    assert 0 < len(result.arrivals) < 400 and result.finish_reason == ""  # what arrived is kept
    assert new_error is None and new_result.finish_reason == "length"
    sim.stop()
    outcomes = dict(zip(truth_table(sim.truth_path).request_id, truth_table(sim.truth_path).outcome))
    assert outcomes == {cut_id: "interrupted", new_id: "ok"}


def test_unknown_quirk_is_refused_in_one_line(sim_server):
    from loadline.core.errors import UsageError

    with pytest.raises(UsageError, match="unknown sim quirk 'keepalive'"):
        sim_server("tiny", "--quirks", "close-after-stream+keepalive")


LLAMACPP_NAMES = {  # the vendored llama-server's /metrics (REFERENCE-llamacpp.md) plus the older kv_cache_* pair
    "llamacpp:prompt_tokens_total",
    "llamacpp:prompt_seconds_total",
    "llamacpp:tokens_predicted_total",
    "llamacpp:tokens_predicted_seconds_total",
    "llamacpp:prompt_tokens_seconds",
    "llamacpp:predicted_tokens_seconds",
    "llamacpp:requests_processing",
    "llamacpp:requests_deferred",
    "llamacpp:n_decode_total",
    "llamacpp:n_busy_slots_per_decode",
    "llamacpp:kv_cache_usage_ratio",
    "llamacpp:kv_cache_tokens",
}


def test_llamacpp_api_speaks_llama_servers_metrics_and_context_routes(sim_server):
    sim = sim_server("tiny", "--quirks", "llamacpp-api", "--set", "max_num_seqs=2")
    bodies = [{**BODY, "max_tokens": 60, "ignore_eos": True}] * 4  # 4 requests, 2 slots
    results, scrapes = asyncio.run(run_streams(sim.url, bodies, "slots"))
    assert all(r.status == 200 and r.tokens == 60 for r in results)
    names = {name for name, _ in scrapes[-1]}
    assert LLAMACPP_NAMES <= names and not any(n.startswith(("vllm:", "DCGM_")) for n in names)
    assert all(labels == () for name, labels in scrapes[-1] if name.startswith("llamacpp:"))  # unlabelled
    # slots pinned and requests deferred while 4 requests share 2 slots: the slot-cap signature
    assert max(metric(s, "llamacpp:requests_processing") for s in scrapes) == 2
    assert max(metric(s, "llamacpp:requests_deferred") for s in scrapes) >= 1
    final = scrape(sim.url)
    assert metric(final, "llamacpp:tokens_predicted_total") == 4 * 60
    assert 1 < metric(final, "llamacpp:n_busy_slots_per_decode") <= 2
    served = probe(requests.Session(), sim.url, 5.0)
    assert (served.context, served.source) == (4096, "/props default_generation_settings.n_ctx")  # per slot


@pytest.mark.parametrize("slots", [2, 8])
def test_llamacpp_api_defers_only_a_request_that_found_every_slot_busy(sim_server, slots):
    """A request that arrives during a step while a slot is free waits for the step's end (llama-server's next
    update_slots) but is not deferred; only one that finds every slot busy is. Steps of 150 ms, the other
    requests 0.3 s after the first: they land inside a step."""
    sim = sim_server(
        "tiny", "--quirks", "llamacpp-api", "--set", f"max_num_seqs={slots}", "--set", "step_overhead_ms=150"
    )
    body = {**BODY, "max_tokens": 8, "ignore_eos": True}
    url = sim.url + "/v1/chat/completions"

    async def staggered(n: int) -> list[dict]:
        first = asyncio.ensure_future(stream_chat(url, body, "defer-0", 30.0))
        await asyncio.sleep(0.3)
        rest = [asyncio.ensure_future(stream_chat(url, body, f"defer-{i}", 30.0)) for i in range(1, n)]
        scrapes = []
        for _ in range(400):  # 10 ms apart: at most ~4 s, the streams take ~2
            scrapes.append(await asyncio.to_thread(scrape, sim.url))
            if first.done() and all(t.done() for t in rest):
                break
            await asyncio.sleep(0.01)
        await asyncio.gather(first, *rest)
        return scrapes

    scrapes = asyncio.run(staggered(slots + 1))  # one more request than slots: the last finds them all busy
    processing = [metric(s, "llamacpp:requests_processing") for s in scrapes]
    deferred = [metric(s, "llamacpp:requests_deferred") for s in scrapes]
    assert max(processing) == slots and max(deferred) >= 1
    assert all(d == 0 for p, d in zip(processing, deferred) if p < slots)  # a slot free: nothing deferred
