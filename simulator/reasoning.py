"""Reasoning and tool-call replies: what a thinking model and a function-calling one stream.

Off by default (a plain reply is written exactly as before, without this module). Options:
- `reasoning_share` (0..1): that share of each chat reply's tokens (rounded) is streamed first as
  reasoning, under `reasoning_field`: `reasoning_content` (older vLLM such as 0.10, SGLang, llama.cpp)
  or `reasoning` (new vLLM such as 0.34: REFERENCE-workloads.md section 4). The usage object then carries
  `completion_tokens_details.reasoning_tokens`, as vLLM's with a reasoning parser does, and
  `completion_tokens` counts reasoning and answer together.
- `tool_call_share` (0..1): that share of chat replies (drawn per request) answers with one tool
  call instead of content: a first chunk with the call's id, type and name, then one piece of its
  arguments per token, and `finish_reason: "tool_calls"` when the reply stopped on its own
  (`length` stays `length`, as in vLLM's `tool_calls_utils.py`).
- `enable_prompt_tokens_details` (vLLM's flag of that name): usage carries
  `prompt_tokens_details.cached_tokens`, the prompt tokens the prefix cache served.
Streams of /v1/chat/completions only: the completions API has no delta to carry them.

The truth log gets `first_reasoning_token` and `first_answer_token` (wall clock of the writes that
carried them), `reasoning_tokens`, `tool_calls` and `cached_tokens` (simulator/truth.py).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from loadline.simulator.wire import WORD_BYTES, ChunkTemplates

REASONING_FIELDS = ("reasoning_content", "reasoning")
TOOL_NAME = "get_weather"
_TAIL = b'"},"logprobs":null,"finish_reason":null}]}\n\n'  # after a text value, as wire.ChunkTemplates writes


@dataclass(frozen=True)
class ReplyOptions:
    """The simulator's reply-shape options (SimConfig), checked once."""

    reasoning_share: float = 0.0
    reasoning_field: str = "reasoning_content"
    tool_call_share: float = 0.0
    prompt_tokens_details: bool = False

    def problem(self) -> str | None:
        """Why these options are not valid (None when they are)."""
        for name in ("reasoning_share", "tool_call_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                return f"sim option {name} must be within 0..1 (got {getattr(self, name)})"
        if self.reasoning_field not in REASONING_FIELDS:
            return f"sim option reasoning_field must be one of {', '.join(REASONING_FIELDS)} (got {self.reasoning_field!r})"
        return None

    @property
    def active(self) -> bool:
        return bool(self.reasoning_share or self.tool_call_share or self.prompt_tokens_details)


class ReplyShaper:
    """Draws each request's reply shape (seeded: a run's tool-call replies repeat)."""

    def __init__(self, options: ReplyOptions, seed: int) -> None:
        self.options = options
        self.rng = random.Random(seed * 7919 + 17)

    def shape(self, chat: bool, stream: bool, output_target: int, request_id: str) -> ReplyShape | None:
        o = self.options
        if not (o.active and chat and stream):
            return None
        reasoning = min(output_target, round(o.reasoning_share * output_target))
        tool = bool(o.tool_call_share) and self.rng.random() < o.tool_call_share and reasoning < output_target
        return ReplyShape(reasoning, o.reasoning_field, tool, o.prompt_tokens_details, f"call_{request_id}")


class ReplyShape:
    """One reply's shape: which of its tokens are reasoning, whether the answer is a tool call."""

    __slots__ = ("reasoning", "field", "tool", "details", "call_id", "_prefixes")

    def __init__(self, reasoning: int, field: str, tool: bool, details: bool, call_id: str) -> None:
        self.reasoning, self.field, self.tool, self.details, self.call_id = reasoning, field, tool, details, call_id
        self._prefixes: tuple[bytes, bytes, bytes] | None = None

    def _built(self, t: ChunkTemplates) -> tuple[bytes, bytes, bytes]:
        if self._prefixes is None:
            call = json.dumps(
                {"index": 0, "id": self.call_id, "type": "function", "function": {"name": TOOL_NAME, "arguments": ""}},
                separators=(",", ":"),
            )
            self._prefixes = (
                t.head + f'{{"index":0,"delta":{{"{self.field}":"'.encode(),
                t.head + b'{"index":0,"delta":{"tool_calls":[' + call.encode() + b']},"logprobs":null,'
                b'"finish_reason":null}]}\n\n',
                t.head + b'{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"',
            )
        return self._prefixes

    def token(self, t: ChunkTemplates, index: int) -> bytes:
        """The chunk of the reply's token `index`: reasoning first, then content or the tool call."""
        if index >= self.reasoning and not self.tool:
            return t.token(index)
        reasoning, call_head, arguments = self._built(t)
        word = WORD_BYTES[index % len(WORD_BYTES)]
        if index < self.reasoning:
            return reasoning + word + _TAIL
        if index == self.reasoning:
            return call_head
        return arguments + word + b'"}}]' + _TAIL[1:]

    def finish_reason(self, reason: str) -> str:
        return "tool_calls" if self.tool and reason == "stop" else reason

    def usage_extra(self, cached_tokens: int) -> dict:
        extra: dict = {}
        if self.reasoning:
            extra["completion_tokens_details"] = {"reasoning_tokens": self.reasoning}
        if self.details:
            extra["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
        return extra

    def stamp(self, truth: dict, sent: int, generated: int, now: float) -> None:
        """The truth of a write that carried tokens [sent, generated): first thought, first answer."""
        if sent == 0 and self.reasoning and generated:
            truth["first_reasoning_token"] = now
        if sent <= self.reasoning < generated:
            truth["first_answer_token"] = now
        truth["reasoning_tokens"] = min(generated, self.reasoning)
        truth["tool_calls"] = int(self.tool and generated > self.reasoning)
