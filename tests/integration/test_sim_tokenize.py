"""The simulator's tokenizer seen from outside: /tokenize and /detokenize in llama.cpp's and vLLM's
shapes, and the context refusal each engine gives, with the counts usage reports."""

from __future__ import annotations

import pytest
import requests

from loadline.simulator.tokenizer import Tokenizer

TEXT = "Load capacity, measured in tokens."


def _post(url: str, path: str, body: dict) -> requests.Response:
    return requests.post(url + path, json=body, timeout=5)


def test_tokenize_speaks_llama_cpp_and_vllm_and_ids_round_trip(sim_server):
    sim = sim_server("tiny")
    llama = _post(sim.url, "/tokenize", {"content": TEXT}).json()
    assert len(llama["tokens"]) == Tokenizer().count(TEXT) == 10
    pieces = _post(sim.url, "/tokenize", {"content": TEXT, "with_pieces": True}).json()["tokens"]
    assert "".join(p["piece"] for p in pieces) == TEXT and [p["id"] for p in pieces] == llama["tokens"]
    vllm = _post(sim.url, "/tokenize", {"prompt": TEXT, "return_token_strs": True}).json()
    assert (vllm["count"], vllm["max_model_len"], vllm["tokens"]) == (10, 4096, llama["tokens"])
    assert "".join(vllm["token_strs"]) == TEXT
    chat = _post(sim.url, "/tokenize", {"messages": [{"role": "user", "content": TEXT}]}).json()
    assert chat["count"] == 10 + 4 + 3  # the chat template's tokens, as vLLM's chat-style /tokenize counts
    assert _post(sim.url, "/detokenize", {"tokens": llama["tokens"]}).json() == {"prompt": TEXT}
    assert _post(sim.url, "/tokenize", {"nothing": 1}).status_code == 400
    assert _post(sim.url, "/detokenize", {"tokens": [10**9]}).status_code == 400


def test_usage_counts_what_tokenize_counts(sim_server):
    sim = sim_server("tiny", "--time-scale", "20")
    messages = [{"role": "user", "content": TEXT}]
    counted = _post(sim.url, "/tokenize", {"messages": messages}).json()["count"]
    reply = _post(sim.url, "/v1/chat/completions", {"messages": messages, "max_tokens": 2}).json()
    assert reply["usage"]["prompt_tokens"] == counted


@pytest.mark.parametrize(
    "quirks, expected_error",
    [
        ((), {"type": "BadRequestError", "code": 400, "param": None}),
        (
            ("--quirks", "llamacpp-api"),
            {"type": "exceed_context_size_error", "code": 400, "n_prompt_tokens": 101, "n_ctx": 100},
        ),
    ],
)
def test_a_prompt_over_the_context_gets_the_engines_own_400(sim_server, quirks, expected_error):
    sim = sim_server("tiny", "--set", "max_model_len=100", *quirks)
    content = " ".join(["ab"] * 94)  # 94 + 4 + 3 = 101 tokens
    response = _post(
        sim.url, "/v1/chat/completions", {"messages": [{"role": "user", "content": content}], "max_tokens": 4}
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert {k: error[k] for k in expected_error} == expected_error
    assert "101" in error["message"] and "100" in error["message"]
    if quirks:
        assert _post(sim.url, "/detokenize", {"tokens": []}).json() == {"content": ""}  # llama-server's field


def test_the_client_finds_the_servers_tokenize_and_learns_the_chat_template_from_it(sim_server):
    from loadline.client.sizing import open_space
    from loadline.simulator.tokenizer import MESSAGE_OVERHEAD, REPLY_PRIMER

    sim = sim_server("tiny")
    space = open_space(requests.Session, sim.url, "", 5.0)
    assert space.source == "server" and space.count(TEXT) == 10
    for n in (1, 2, 3, 7):  # learned for 1 and 2 messages before any reply, the line through them beyond
        assert space.overhead.of("chat", n) == MESSAGE_OVERHEAD * n + REPLY_PRIMER
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": TEXT}]
    reply = _post(sim.url, "/v1/chat/completions", {"messages": messages, "max_tokens": 2}).json()
    assert reply["usage"]["prompt_tokens"] == space.prompt_tokens("chat", messages)


def test_without_a_tokenize_route_the_client_calibrates(sim_server):
    from loadline.client.sizing import open_space

    sim = sim_server("tiny")
    space = open_space(requests.Session, sim.url + "/nothing-here", "", 5.0)
    assert space.source == "calibrated" and not space.exact


def test_a_named_tokenizer_counts_and_the_server_still_tells_the_template(sim_server, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers

    from loadline.client.sizing import open_space
    from loadline.simulator.tokenizer import MESSAGE_OVERHEAD, REPLY_PRIMER

    words = Tokenizer(0)  # one token per word: a tokenizer.json that counts as the simulator's word level does
    vocabulary = {w: i for i, w in enumerate(["[UNK]", "Load", "capacity", ",", "measured", "in", "tokens", "."])}
    tokenizer = tokenizers.Tokenizer(models.WordLevel(vocabulary, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    sim = sim_server("tiny", "--set", "tokenizer_piece_chars=0")
    space = open_space(requests.Session, sim.url, str(path), 5.0)
    assert space.source == "hf" and space.count(TEXT) == words.count(TEXT) == 7
    assert space.overhead.of("chat", 2) == 2 * MESSAGE_OVERHEAD + REPLY_PRIMER  # from the server's /tokenize
