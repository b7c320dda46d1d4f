"""POST /tokenize and /detokenize as llama-server and vLLM answer them (REFERENCE-workloads.md section 1).

The request's fields say which dialect it speaks: llama.cpp's `content` -> `{"tokens": [ids]}`
(`with_pieces`: `[{"id", "piece"}]`); vLLM's `prompt` (completion style) or `messages` (chat style,
the chat template applied) -> `{"count", "max_model_len", "tokens", "token_strs"}`. /detokenize
answers `{"content"}` as llama-server or `{"prompt"}` as vLLM, by the simulated engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loadline.simulator.openai_api import ApiError, parse_body
from loadline.simulator.tokenizer import Tokenizer


def tokenize(raw: bytes, tokenizer: Tokenizer, max_model_len: int, llamacpp: bool) -> dict[str, Any]:
    body = parse_body(raw)
    if isinstance(body.get("content"), str):  # llama.cpp
        text = body["content"]
        ids = tokenizer.encode(text)
        if body.get("with_pieces"):
            return {"tokens": [{"id": i, "piece": p} for i, p in zip(ids, tokenizer.tokens(text))]}
        return {"tokens": ids}
    if isinstance(body.get("prompt"), str):  # vLLM, completion style
        pieces = tokenizer.tokens(body["prompt"])
    elif isinstance(body.get("messages"), list):  # vLLM, chat style: the template's tokens too
        try:
            pieces = tokenizer.chat_prompt_tokens(body["messages"])
        except ValueError as exc:
            raise ApiError(400, str(exc), "messages") from None
    else:
        raise ApiError(400, "give 'content' (llama.cpp), 'prompt' or 'messages' (vLLM)", "prompt")
    ids = tokenizer.ids_of(pieces)
    return {
        "count": len(ids),
        "max_model_len": max_model_len,
        "tokens": ids,
        "token_strs": pieces if body.get("return_token_strs") else None,
    }


def detokenize(raw: bytes, tokenizer: Tokenizer, max_model_len: int, llamacpp: bool) -> dict[str, Any]:
    body = parse_body(raw)
    ids = body.get("tokens")
    if not isinstance(ids, list):
        raise ApiError(400, "'tokens' must be a list of token ids", "tokens")
    try:
        text = tokenizer.decode(ids)
    except ValueError as exc:
        raise ApiError(400, str(exc), "tokens") from None
    return {"content": text} if llamacpp else {"prompt": text}


TOKENIZE_ROUTES: dict[str, Callable[[bytes, Tokenizer, int, bool], dict[str, Any]]] = {
    "/tokenize": tokenize,
    "/detokenize": detokenize,
}
