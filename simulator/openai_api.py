"""Validate an OpenAI request body and decide how many tokens the answer will have (pure functions).

Output length, as in vLLM: `max_tokens` (or `max_completion_tokens`) caps it; `ignore_eos` makes it
exactly the cap; `min_tokens` is a floor; otherwise the engine's seeded length distribution
decides where the "end of sequence" falls.

Too long for the context (REFERENCE-workloads.md section 2), in the dialect of the engine simulated:
- vLLM (0.10.2's `_validate_input`): a prompt of >= max_model_len tokens, or a prompt plus max_tokens
  above it, is a 400 with vLLM's words in `{"error": {"message", "type", "param", "code"}}`;
- llama.cpp (llamacpp-api quirk): a prompt of >= the slot's n_ctx tokens is a 400 of type
  `exceed_context_size_error` carrying `n_prompt_tokens` and `n_ctx`; max_tokens is not counted, the
  reply stops for "length" where the context ends instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loadline.simulator.kvcache import prefix_hashes
from loadline.simulator.tokenizer import DEFAULT, Tokenizer


class ApiError(Exception):
    """A refusal; `fields` are extra members of the error object (llama.cpp's n_prompt_tokens, n_ctx)
    and `error_type` replaces the type the status implies."""

    def __init__(
        self,
        status: int,
        message: str,
        param: str | None = None,
        error_type: str | None = None,
        fields: dict | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.param = param
        self.error_type = error_type
        self.fields = fields or {}


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


def context_check(prompt_len: int, max_tokens: int | None, max_model_len: int, llamacpp: bool) -> int:
    """The room left for the reply, or the engine's 400 for a request that does not fit."""
    room = max_model_len - prompt_len
    if llamacpp:
        if room <= 0:  # llama-server: prompt tokens >= the slot's n_ctx; n_predict is not counted
            raise ApiError(
                400,
                f"request ({prompt_len} tokens) exceeds the available context size "
                f"({max_model_len} tokens), try increasing it",
                error_type="exceed_context_size_error",
                fields={"n_prompt_tokens": prompt_len, "n_ctx": max_model_len},
            )
        return room
    if room <= 0:
        raise ApiError(
            400,
            f"This model's maximum context length is {max_model_len} tokens. However, your request "
            f"has {prompt_len} input tokens. Please reduce the length of the input messages.",
        )
    if max_tokens is not None and max_tokens > room:
        raise ApiError(
            400,
            f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's "
            f"maximum context length is {max_model_len} tokens and your request has {prompt_len} "
            f"input tokens ({max_tokens} > {max_model_len} - {prompt_len}).",
            "max_tokens",
        )
    return room


def parse_generation(
    chat: bool,
    raw: bytes,
    served_model: str,
    max_model_len: int,
    block_size: int,
    prefix_caching: bool,
    draw_length: Callable[[], int],
    tokenizer: Tokenizer = DEFAULT,
    llamacpp: bool = False,
) -> Generation:
    body = parse_body(raw)
    model = body.get("model", served_model)
    if not isinstance(model, str):
        raise ApiError(400, "'model' must be a string", "model")
    try:
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise ApiError(400, "'messages' must be a non-empty list", "messages")
            tokens = tokenizer.chat_prompt_tokens(messages)
        else:
            if "prompt" not in body:
                raise ApiError(400, "'prompt' is required", "prompt")
            tokens = tokenizer.completion_prompt_tokens(body["prompt"])
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
    # llama-server has no min_tokens (REFERENCE-workloads.md section 3): it ignores the field
    min_tokens = 0 if llamacpp else _int_field(body, "min_tokens", 0) or 0
    ignore_eos = _bool_field(body, "ignore_eos")
    prompt_len = len(tokens)
    room = context_check(prompt_len, max_tokens, max_model_len, llamacpp)
    cap = min(max_tokens, room) if max_tokens is not None else room
    if min_tokens > cap:
        raise ApiError(400, f"min_tokens ({min_tokens}) must be <= max_tokens ({cap})", "min_tokens")
    if ignore_eos:
        target, reason = cap, "length"
    else:
        natural = max(draw_length(), min_tokens)
        target, reason = (natural, "stop") if natural < cap else (cap, "length")
    hashes = prefix_hashes(tokens, block_size) if prefix_caching else []
    return Generation(chat, model, stream, include_usage, prompt_len, hashes, target, reason)
