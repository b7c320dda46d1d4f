"""Reasoning and tool-call streams: every token kind is timed, the answer's first token is TTFO,
reasoning chunks keep to the no-parse path, and a tool-call reply is a complete, counted reply."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loadline.client.measure import fill_timings
from loadline.client.streaming import Reply, StreamResult, chat_content, read_stream
from loadline.core.records import RequestRecord

ENVELOPE = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}


def chunk(delta: dict, finish: str | None = None, envelope: dict = ENVELOPE, usage: dict | None = None) -> bytes:
    body = {**envelope, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
    if usage is not None:
        body["usage"] = usage
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


class Body:
    clock, read_delay_max, arrival = "user", 0.0, 0.0

    def merged(self, extra: int) -> None:
        pass


class Parsed(Reply):
    """The reference: every chunk parsed."""

    __slots__ = ()

    def _learn(self, data, text) -> None:  # type: ignore[no-untyped-def]
        self.template = None

    def _learn_reasoning(self, data, text, key) -> None:  # type: ignore[no-untyped-def]
        self.reasoning_template = None


def take_all(events: list[bytes], cls: type = Reply, start: float = 1.0, step: float = 0.01) -> StreamResult:
    result = StreamResult()
    reply = cls(Body(), chat_content, result)
    for i, event in enumerate(events):
        reply.last_arrival = start + i * step
        reply.take(event)
    return result


def record() -> RequestRecord:
    return RequestRecord("r", "w", "u", "C", "s", 0, "/v1/chat/completions", "m", 0.0)


# vLLM >= 0.17 (`reasoning`, absent fields left out), vLLM 0.10 / llama.cpp (`reasoning_content`), SGLang (nulls)
DIALECTS = {
    "vllm-new": lambda text: {"reasoning": text},
    "vllm-old": lambda text: {"reasoning_content": text},
    "sglang": lambda text: {"role": None, "content": None, "reasoning_content": text, "tool_calls": None},
}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_reasoning_stream_times_its_first_thought_and_its_first_answer_token(dialect):
    thought = DIALECTS[dialect]
    events = (
        [chunk({"role": "assistant", "content": ""})]
        + [chunk(thought(w)) for w in ("Let", " me", " think")]
        + [chunk({"content": w}) for w in ("The", " answer")]
        + [
            chunk({}, "stop"),
            chunk(
                {},
                usage={
                    "prompt_tokens": 5,
                    "completion_tokens": 5,
                    "completion_tokens_details": {"reasoning_tokens": 3},
                },
            ),
        ]
    )
    # arrivals 1.00 (role), 1.01-1.03 thoughts, 1.04-1.05 answer
    result = take_all(events)
    assert result.arrivals == pytest.approx([1.01, 1.02, 1.03, 1.04, 1.05])
    assert (result.reasoning_chunks, result.text, result.finish_reason) == (3, "The answer", "stop")
    rec = record()
    fill_timings(rec, result, t0=1.0, end=1.06)
    assert rec.ttft_ms == pytest.approx(10.0)
    assert rec.ttfo_ms == pytest.approx(40.0)
    assert rec.reasoning_ms == pytest.approx(30.0)
    assert (rec.output_tokens, rec.reasoning_tokens, rec.content_chunks) == (5, 3, 5)
    assert rec.itl_us == "10000 10000 10000 10000"  # every token, reasoning and answer
    assert rec.tpot_ms == pytest.approx((60.0 - 40.0) / (2 - 1))  # the answer's two tokens


def test_without_usage_reasoning_tokens_are_the_reasoning_chunks():
    events = [chunk({"reasoning": "a"}), chunk({"reasoning": "b"}), chunk({"content": "c"}), chunk({}, "stop")]
    rec = record()
    fill_timings(rec, take_all(events), t0=0.5, end=1.05)
    assert (rec.output_tokens, rec.reasoning_tokens, rec.tokens_source) == (3, 2, "chunks")
    assert rec.tpot_ms is None  # one answer token


def test_sglang_top_level_reasoning_tokens_count():
    events = [
        chunk({"reasoning_content": "a"}),
        chunk({"content": "c"}),
        chunk({}, "stop"),
        chunk({}, usage={"prompt_tokens": 1, "completion_tokens": 9, "reasoning_tokens": 4}),
    ]
    rec = record()
    fill_timings(rec, take_all(events), t0=0.5, end=1.05)
    assert rec.reasoning_tokens == 4


def test_a_plain_stream_has_ttfo_equal_to_ttft_and_no_reasoning():
    events = [chunk({"content": w}) for w in ("a", "b", "c")] + [chunk({}, "stop")]
    rec = record()
    fill_timings(rec, take_all(events), t0=0.5, end=1.05)
    assert rec.ttfo_ms == rec.ttft_ms
    assert (rec.reasoning_tokens, rec.reasoning_ms, rec.cached_tokens, rec.tool_calls) == (None, None, None, 0)


def test_a_reply_cut_while_reasoning_has_no_ttfo_and_reasons_to_its_last_thought():
    events = [chunk({"reasoning": "a"}), chunk({"reasoning": "b"}), chunk({}, "length")]
    rec = record()
    fill_timings(rec, take_all(events), t0=0.5, end=1.05)
    assert rec.ttfo_ms is None and rec.tpot_ms is None
    assert rec.reasoning_ms == pytest.approx(10.0)


def test_cached_prompt_tokens_come_from_usage_or_llamacpps_timings():
    events = [
        chunk({"content": "a"}),
        chunk({}, "stop"),
        chunk({}, usage={"prompt_tokens": 100, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 64}}),
    ]
    rec = record()
    fill_timings(rec, take_all(events), t0=0.5, end=1.05)
    assert rec.cached_tokens == 64
    llama = [
        chunk({"content": "a"}),
        chunk({}, "stop", envelope={**ENVELOPE, "timings": {"cache_n": 12, "prompt_n": 3}}),
    ]
    rec = record()
    fill_timings(rec, take_all(llama), t0=0.5, end=1.05)
    assert rec.cached_tokens == 12


class Stream:
    """A body of SSE events, read in one piece each."""

    clock, read_delay_max, arrival = "user", 0.0, 1.0

    def __init__(self, events: list[bytes]) -> None:
        self.reads = [b"data: " + e + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]

    def read1(self) -> bytes:
        self.arrival += 0.01
        return self.reads.pop(0) if self.reads else b""

    def ends_within(self, seconds: float) -> bool:
        return not self.reads

    def merged(self, extra: int) -> None:
        pass

    def settle_merges(self, gap: float) -> None:
        pass

    def follow(self, reply: Reply) -> str:
        return "pull"


def test_a_tool_call_reply_is_complete_and_its_tokens_are_counted():
    """vLLM/SGLang/llama.cpp shape: id, type and name on a call's first chunk, pieces of arguments after."""
    events = [
        chunk({"role": "assistant", "content": ""}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "Paris"}'}}]}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": "{}"},
                    }
                ]
            }
        ),
        chunk({}, "tool_calls"),
        chunk({}, usage={"prompt_tokens": 5, "completion_tokens": 12}),
    ]
    result = StreamResult()
    read_stream(Stream(events), chat_content, result)  # no StreamFailure: a finished reply
    assert (result.finish_reason, result.tool_calls, len(result.arrivals), result.text) == ("tool_calls", 2, 4, "")
    rec = record()
    fill_timings(rec, result, t0=1.0, end=result.ended_at)
    assert (rec.output_tokens, rec.content_chunks, rec.tool_calls) == (12, 4, 2)
    assert rec.ttft_ms == rec.ttfo_ms == pytest.approx(20.0)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_reasoning_chunks_that_differ_only_in_their_text_are_read_by_the_template(dialect, monkeypatch):
    """The fast way is taken for reasoning too: only the first chunk of each kind is parsed."""
    thought = DIALECTS[dialect]
    events = [chunk(thought(w)) for w in ("a", "b", "é", "c")] + [chunk({"content": w}) for w in ("x", "y", "z")]
    parses = []
    real = orjson.loads
    monkeypatch.setattr("loadline.client.streaming._loads", lambda data: parses.append(data) or real(data))
    result = take_all(events)
    assert (result.reasoning_chunks, result.text, len(result.arrivals)) == (4, "xyz", 7)
    assert parses == [events[0], events[4]]


# ---- the template gives what parsing gives, for streams mixing every token kind -------------------
TEXT = st.sampled_from(["a", " the", "é", "🙂", '"', "\\", "\n", "}", '","reasoning":"', "reasoning", "content", ""])
FUZZ = settings(
    max_examples=800, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


@st.composite
def mixed_streams(draw) -> list[bytes]:
    events = []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(
            st.sampled_from(
                [
                    "reasoning",
                    "reasoning_content",
                    "both_keys",
                    "content",
                    "content+reasoning",
                    "tool",
                    "sglang",
                    "empty",
                ]
            )
        )
        text = draw(TEXT)
        delta: dict = {
            "reasoning": {"reasoning": text},
            "reasoning_content": {"reasoning_content": text},
            "both_keys": {"reasoning": text, "reasoning_content": text},
            "content": {"content": text},
            "content+reasoning": {"content": text, "reasoning_content": draw(TEXT)},
            "tool": {"tool_calls": [{"index": draw(st.integers(0, 2)), "function": {"arguments": text}}]},
            "sglang": {"content": None, "reasoning_content": text, "tool_calls": None},
            "empty": {},
        }[kind]
        decoy = {"x": {"reasoning": draw(st.sampled_from(["a", "b"]))}} if draw(st.integers(0, 5)) == 0 else {}
        events.append(chunk(delta, envelope={**decoy, **ENVELOPE}))
    events.append(chunk({}, "stop"))
    return events


def summary(result: StreamResult) -> tuple:
    return (
        tuple(result.arrivals),
        tuple(result.pieces),
        result.reasoning_chunks,
        result.reasoning_end,
        result.answer_at,
        result.tool_calls,
        result.finish_reason,
    )


@FUZZ
@given(mixed_streams())
def test_reasoning_and_tool_chunks_read_by_template_give_what_parsing_gives(events):
    assert summary(take_all(events, Reply)) == summary(take_all(events, Parsed))
