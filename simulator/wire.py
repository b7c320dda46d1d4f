"""The OpenAI wire format as bytes: SSE chunks for streaming, whole bodies otherwise, error objects.

Streaming chunks are assembled from per-request prefix/suffix templates so a token costs one
bytes join; the generated words need no JSON escaping (see simulator/tokenizer.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from loadline.simulator.tokenizer import WORDS, output_text

WORD_BYTES: tuple[bytes, ...] = tuple(w.encode() for w in WORDS)
DONE = b"data: [DONE]\n\n"

ERROR_TYPES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    404: "NotFoundError",
    405: "MethodNotAllowed",
    411: "LengthRequired",
    413: "RequestTooLarge",
    429: "RateLimitError",
    500: "InternalServerError",
    503: "ServiceUnavailableError",
}


def error_object(
    message: str, status: int, param: str | None = None, error_type: str | None = None, fields: dict | None = None
) -> dict:
    """OpenAI's error object; `error_type` and `fields` give an engine's own (llama.cpp's type and counts)."""
    error = {"message": message, "type": error_type or ERROR_TYPES.get(status, "Error"), "param": param, "code": status}
    if fields:
        error.update(fields)
    return {"error": error}


def error_body(
    message: str, status: int, param: str | None = None, error_type: str | None = None, fields: dict | None = None
) -> bytes:
    return json.dumps(error_object(message, status, param, error_type, fields)).encode()


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


@dataclass(frozen=True)
class ChunkTemplates:
    """Byte templates for one streamed response (chat or completion)."""

    head: bytes  # `data: {"id":...,"choices":[` shared by every chunk
    token_prefix: bytes
    token_suffix: bytes
    chat: bool

    @classmethod
    def build(cls, chat: bool, response_id: str, created: int, model: str) -> ChunkTemplates:
        obj = "chat.completion.chunk" if chat else "text_completion"
        head = (
            f'data: {{"id":{json.dumps(response_id)},"object":"{obj}","created":{created},'
            f'"model":{json.dumps(model)},"choices":['
        )
        if chat:
            prefix = '{"index":0,"delta":{"content":"'
            suffix = '"},"logprobs":null,"finish_reason":null}]}\n\n'
        else:
            prefix = '{"index":0,"text":"'
            suffix = '","logprobs":null,"finish_reason":null}]}\n\n'
        return cls(head.encode(), head.encode() + prefix.encode(), suffix.encode(), chat)

    def role(self) -> bytes:
        return self.head + (
            b'{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'
        )

    def token(self, index: int) -> bytes:
        return self.token_prefix + WORD_BYTES[index % len(WORD_BYTES)] + self.token_suffix

    def finish(self, reason: str) -> bytes:
        body = '{"index":0,"delta":{},' if self.chat else '{"index":0,"text":"",'
        return self.head + f'{body}"logprobs":null,"finish_reason":"{reason}"}}]}}\n\n'.encode()

    def usage(self, prompt_tokens: int, completion_tokens: int, extra: dict | None = None) -> bytes:
        counts = usage(prompt_tokens, completion_tokens)
        if extra:  # token details (simulator/reasoning.py)
            counts.update(extra)
        body = json.dumps({"usage": counts}, separators=(",", ":"))
        return self.head + b"]," + body[1:].encode() + b"\n\n"


def stream_error(message: str, status: int = 500) -> bytes:
    """An error after the 200 went out: an error object inside the stream (then [DONE])."""
    return b"data: " + error_body(message, status) + b"\n\n"


def full_response(
    chat: bool,
    response_id: str,
    created: int,
    model: str,
    prompt_tokens: int,
    completion_tokens: int,
    finish_reason: str,
) -> bytes:
    text = output_text(completion_tokens)
    if chat:
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "logprobs": None,
            "finish_reason": finish_reason,
        }
        obj = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        obj = "text_completion"
    return json.dumps(
        {
            "id": response_id,
            "object": obj,
            "created": created,
            "model": model,
            "choices": [choice],
            "usage": usage(prompt_tokens, completion_tokens),
        }
    ).encode()
