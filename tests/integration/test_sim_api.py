"""The simulator speaks the OpenAI API: official client, exact wire format, errors, auth, startup."""

from __future__ import annotations

import asyncio
import json
import socket
import urllib.error
import urllib.request
from urllib.parse import urlparse

import openai
import pytest
from sim_client import metric, read_truth, scrape, stream_chat


def test_openai_client_streams_chat_and_completion(sim_server):
    sim = sim_server("tiny", "--time-scale", "10")
    client = openai.OpenAI(base_url=sim.url + "/v1", api_key="unused", max_retries=0)
    stream = client.chat.completions.create(
        model="loadline/tiny-sim",
        messages=[{"role": "user", "content": "Say hello, please."}],
        max_tokens=7,
        stream=True,
        stream_options={"include_usage": True},
        extra_headers={"X-Request-Id": "chat-1"},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == " lorem ipsum dolor sit amet consectetur adipiscing"
    assert chunks[-1].usage.completion_tokens == 7
    # "Say hello, please." = Say hell o , plea se . = 7 tokens, + 4 per message + 3 for the reply primer
    assert chunks[-1].usage.prompt_tokens == 14
    completion = client.completions.create(model="loadline/tiny-sim", prompt="One two three", max_tokens=4, stream=True)
    pieces = [c.choices[0].text for c in completion if c.choices]
    assert "".join(pieces) == " lorem ipsum dolor sit"
    whole = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=3)
    assert whole.choices[0].message.content == " lorem ipsum dolor"
    assert whole.usage.completion_tokens == 3 and whole.choices[0].finish_reason == "length"
    assert [m.id for m in client.models.list()] == ["loadline/tiny-sim"]
    assert sim.stop() == 0
    truth = {r["request_id"]: r for r in read_truth(sim.truth_path)}
    assert truth["chat-1"]["output_tokens"] == 7 and truth["chat-1"]["outcome"] == "ok"
    assert truth["chat-1"]["arrival"] <= truth["chat-1"]["queue_start"] <= truth["chat-1"]["first_token"]
    assert truth["chat-1"]["first_token"] < truth["chat-1"]["last_token"]


def _raw_exchange(url: str, request: bytes, timeout: float = 10.0) -> bytes:
    parsed = urlparse(url)
    with socket.create_connection((parsed.hostname, parsed.port), timeout=timeout) as sock:
        sock.sendall(request)
        data = b""
        while not data.endswith(b"0\r\n\r\n"):
            part = sock.recv(65536)
            if not part:
                break
            data += part
    return data


def _dechunk(body: bytes) -> bytes:
    out = b""
    while True:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return out
        out += body[:size]
        body = body[size + 2 :]


def test_exact_wire_format_over_raw_socket(sim_server):
    sim = sim_server("tiny", "--time-scale", "10")
    payload = json.dumps(
        {
            "model": "x",
            "messages": [{"role": "user", "content": "a b c"}],
            "max_tokens": 3,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    ).encode()
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(payload)
    )
    raw = _raw_exchange(sim.url, head + payload)
    headers, _, body = raw.partition(b"\r\n\r\n")
    assert headers.startswith(b"HTTP/1.1 200 OK")
    assert b"Content-Type: text/event-stream" in headers and b"Transfer-Encoding: chunked" in headers
    events = _dechunk(body).split(b"\n\n")
    assert events[-1] == b"" and events[-2] == b"data: [DONE]"
    frames = [json.loads(e[len(b"data: ") :]) for e in events[:-2]]
    assert all(e.startswith(b"data: {") for e in events[:-2])  # no `event:` lines
    role, *tokens, finish, usage = frames
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [t["choices"][0]["delta"]["content"] for t in tokens] == [" lorem", " ipsum", " dolor"]
    assert all(f["object"] == "chat.completion.chunk" and f["model"] == "x" for f in frames)
    assert finish["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "length"}
    # "a b c" = 3 tokens + 4 + 3 of chat template
    assert usage["choices"] == [] and usage["usage"] == {
        "prompt_tokens": 10,
        "completion_tokens": 3,
        "total_tokens": 13,
    }


def test_keep_alive_serves_many_sequential_requests(sim_server):
    sim = sim_server("tiny", "--time-scale", "20")
    parsed = urlparse(sim.url)
    payload = json.dumps({"prompt": "x", "max_tokens": 2, "stream": True}).encode()
    head = b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(payload)
    with socket.create_connection((parsed.hostname, parsed.port), timeout=10) as sock:
        for _ in range(20):
            sock.sendall(head + payload)
            data = b""
            while not data.endswith(b"0\r\n\r\n"):
                part = sock.recv(65536)
                assert part, "server closed a keep-alive connection"
                data += part
            assert data.count(b"data: [DONE]") == 1


def _post(url: str, body: bytes, headers: dict | None = None) -> tuple[int, dict, dict]:
    request = urllib.request.Request(url, data=body, headers=headers or {}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())


@pytest.mark.parametrize(
    "body, param",
    [
        (b"{not json", None),
        (b"[1, 2]", None),
        (b'{"messages": []}', "messages"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": -1}', "max_tokens"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5000}', "max_tokens"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "stream": "yes"}', "stream"),
    ],
)
def test_bad_requests_get_400_json(sim_server, body, param):
    sim = sim_server("tiny")
    status, _, error = _post(sim.url + "/v1/chat/completions", body)
    assert status == 400
    assert error["error"]["type"] == "BadRequestError" and error["error"]["param"] == param
    assert error["error"]["code"] == 400 and error["error"]["message"]


def test_api_key_required_and_never_logged(sim_server, tmp_path):
    secret = "sk-sim-very-secret-42"
    sim = sim_server("tiny", "--api-key", secret, "--time-scale", "10")
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}).encode()
    status, _, error = _post(sim.url + "/v1/chat/completions", body)
    assert status == 401 and error["error"]["code"] == 401
    status, _, _ = _post(sim.url + "/v1/chat/completions", body, {"Authorization": "Bearer wrong"})
    assert status == 401
    status, _, ok = _post(sim.url + "/v1/chat/completions", body, {"Authorization": f"Bearer {secret}"})
    assert status == 200 and ok["usage"]["completion_tokens"] == 2
    sim.stop()
    for path in tmp_path.iterdir():
        assert secret not in path.read_text(errors="replace"), path


def test_queue_cap_answers_503_with_retry_after(sim_server):
    sim = sim_server("tiny", "--max-queue", "1", "--set", "max_num_seqs=1", "--time-scale", "1")

    async def burst():
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 30, "ignore_eos": True}
        return await asyncio.gather(*(stream_chat(sim.url + "/v1/chat/completions", body, f"q{i}") for i in range(6)))

    results = asyncio.run(burst())
    statuses = sorted(r.status for r in results)
    assert statuses.count(200) >= 1 and statuses.count(503) >= 1, statuses
    assert all(r.headers.get("retry-after") == "1" for r in results if r.status == 503)
    assert all(r.done and r.tokens == 30 for r in results if r.status == 200)
    sim.stop()
    rejected = [r for r in read_truth(sim.truth_path) if r["outcome"] == "rejected"]
    assert rejected and all(r["status"] == 503 for r in rejected)


def test_health_and_metrics_names(sim_server):
    sim = sim_server("tiny")
    with urllib.request.urlopen(sim.url + "/health", timeout=5) as response:
        assert response.status == 200
    samples = scrape(sim.url)
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:num_preemptions_total",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:time_to_first_token_seconds_count",
        "vllm:inter_token_latency_seconds_count",
        "vllm:e2e_request_latency_seconds_count",
        "vllm:request_queue_time_seconds_count",
        "vllm:request_prefill_time_seconds_count",
        "vllm:request_decode_time_seconds_count",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
    ):
        assert any(n == name for n, _ in samples), name
    assert metric(samples, "vllm:num_requests_running", model_name="loadline/tiny-sim", engine="0") == 0
    assert (
        "vllm:time_to_first_token_seconds_bucket",
        (("engine", "0"), ("le", "0.04"), ("model_name", "loadline/tiny-sim")),
    ) in samples
