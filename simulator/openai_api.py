"""Validate an OpenAI request body and decide how many tokens the answer will have (pure functions).

Output length, as in vLLM: `max_tokens` (or `max_completion_tokens`) caps it; `ignore_eos` makes it
exactly the cap; `min_tokens` is a floor; otherwise the engine's seeded length distribution
decides where the "end of sequence" falls. A prompt plus max_tokens beyond max_model_len is a 400.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from loadline.simulator.kvcache import prefix_hashes
from loadline.simulator.tokenizer import chat_prompt_tokens, completion_prompt_tokens


class ApiError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.param = param


@dataclass(slots=True)
class Generation:
    chat: bool
    model: str
    stream: bool
    include_usage: bool
    prompt_len: int
    hashes: list[int]
    output_target: int
    finish_reason: str  # "stop" or "length"


def _int_field(body: dict, name: str, minimum: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ApiError(400, f"'{name}' must be an integer >= {minimum}", name)
    return value


def _bool_field(body: dict, name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise ApiError(400, f"'{name}' must be a boolean", name)
    return value


def parse_body(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object")
    return body


def parse_generation(chat: bool, raw: bytes, served_model: str, max_model_len: int, block_size: int,
                     prefix_caching: bool, draw_length: Callable[[], int]) -> Generation:
    body = parse_body(raw)
    model = body.get("model", served_model)
    if not isinstance(model, str):
        raise ApiError(400, "'model' must be a string", "model")
    try:
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise ApiError(400, "'messages' must be a non-empty list", "messages")
            tokens = chat_prompt_tokens(messages)
        else:
            if "prompt" not in body:
                raise ApiError(400, "'prompt' is required", "prompt")
            tokens = completion_prompt_tokens(body["prompt"])
    except ValueError as exc:
        raise ApiError(400, str(exc), "messages" if chat else "prompt") from None
    stream = _bool_field(body, "stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise ApiError(400, "'stream_options' must be an object", "stream_options")
    include_usage = bool(options.get("include_usage", False))
    max_tokens = _int_field(body, "max_completion_tokens", 1)
    if max_tokens is None:
        max_tokens = _int_field(body, "max_tokens", 1)
    min_tokens = _int_field(body, "min_tokens", 0) or 0
    ignore_eos = _bool_field(body, "ignore_eos")
    prompt_len = len(tokens)
    room = max_model_len - prompt_len
    if room <= 0 or (max_tokens is not None and max_tokens > room):
        asked = prompt_len + (max_tokens or 0)
        raise ApiError(400, f"This model's maximum context length is {max_model_len} tokens. However, you "
                            f"requested {asked} tokens ({prompt_len} in the messages, {max_tokens or 0} in "
                            "the completion). Please reduce the length of the messages or completion.",
                       "max_tokens")
    cap = max_tokens if max_tokens is not None else room
    if min_tokens > cap:
        raise ApiError(400, f"min_tokens ({min_tokens}) must be <= max_tokens ({cap})", "min_tokens")
    if ignore_eos:
        target, reason = cap, "length"
    else:
        natural = max(draw_length(), min_tokens)
        target, reason = (natural, "stop") if natural < cap else (cap, "length")
    hashes = prefix_hashes(tokens, block_size) if prefix_caching else []
    return Generation(chat, model, stream, include_usage, prompt_len, hashes, target, reason)
