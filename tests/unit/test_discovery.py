"""Context discovery against the routes each engine answers (a tiny in-process HTTP server per case)."""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from loadline.client.discovery import ServedModel, context_in_refusal, learn_from_refusal, learned_context, probe
from loadline.client.options import header_name
from loadline.core.errors import UsageError

# What each engine answers (trimmed to the fields read); anything else is a 404.
VLLM = {"/v1/models": {"data": [{"id": "llama", "max_model_len": 8192}]}}
LLAMA_SERVER = {  # /v1/models meta.n_ctx is the whole context (4 slots x 2048); /props is per slot
    "/v1/models": {"data": [{"id": "tiny.gguf", "meta": {"n_ctx": 8192, "n_ctx_train": 2048}}]},
    "/props": {"default_generation_settings": {"n_ctx": 2048}, "total_slots": 4},
}
LLAMA_CPP_PYTHON = {"/v1/models": {"data": [{"id": "tiny.gguf", "object": "model"}]}}
SGLANG_NATIVE = {
    "/v1/models": {"data": [{"id": "qwen"}]},
    "/get_model_info": {"model_path": "qwen", "context_length": 32768},
}
TGI = {
    "/v1/models": {"data": [{"id": "tgi"}]},
    "/info": {"max_total_tokens": 4096, "max_input_tokens": 3000, "model_id": "m"},
}


@contextmanager
def serving(routes: dict[str, object]):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            body = json.dumps(routes[self.path]).encode() if self.path in routes else b'{"error": "not found"}'
            self.send_response(200 if self.path in routes else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # a short poll: shutdown() waits for the loop's next look (0.5 s by default, per test)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    "routes, expected",
    [
        (VLLM, ServedModel("llama", 8192, 0, "/v1/models max_model_len")),
        (LLAMA_SERVER, ServedModel("tiny.gguf", 2048, 0, "/props default_generation_settings.n_ctx")),
        (LLAMA_CPP_PYTHON, ServedModel("tiny.gguf", 0, 0, "")),
        (SGLANG_NATIVE, ServedModel("qwen", 32768, 0, "/get_model_info context_length")),
        (TGI, ServedModel("tgi", 4096, 3000, "/info max_total_tokens")),
    ],
    ids=["vllm", "llama-server", "llama-cpp-python", "sglang", "tgi"],
)
def test_each_engine_says_its_context_somewhere(routes, expected):
    with serving(routes) as url:
        assert probe(requests.Session(), url, 5.0) == expected


def test_no_model_listing_is_not_cached_as_an_answer():
    with serving({}) as url:
        assert probe(requests.Session(), url, 5.0) is None


def test_request_id_header_names_are_checked():
    assert header_name(" X-Correlation-Id ") == "X-Correlation-Id" and header_name("") == ""
    with pytest.raises(UsageError, match="not a valid HTTP header name"):
        header_name("X Request Id")


@pytest.mark.parametrize(
    "body, limit",
    [
        (
            '{"error":{"code":400,"message":"request (4476 tokens) exceeds the available context size (4096 tokens)",'
            '"type":"exceed_context_size_error","n_prompt_tokens":4476,"n_ctx":4096}}',
            4096,
        ),  # llama-server
        (
            '{"error":{"message":"Requested tokens (2100) exceed context window of 2048","type":"invalid_request_error"}}',
            2048,
        ),  # llama-cpp-python
        (
            '{"error":{"message":"This model\'s maximum context length is 8192 tokens. However, you requested 9000 tokens",'
            '"type":"BadRequestError","code":400}}',
            8192,
        ),  # vLLM (and the simulator)
        ('{"error":{"message":"\'messages\' must be a non-empty list"}}', 0),
        ("<html>Bad Request</html>", 0),
    ],
)
def test_a_refusal_that_states_the_context_length_is_read(body, limit):
    assert context_in_refusal(body) == limit


def test_the_smallest_stated_limit_is_kept_per_host():
    learn_from_refusal("http://a", "exceed context window of 4096")
    learn_from_refusal("http://a", "exceed context window of 2048")
    learn_from_refusal("http://a", "exceed context window of 8192")
    learn_from_refusal("http://a", "nothing useful")
    assert learned_context("http://a") == 2048 and learned_context("http://b") == 0
