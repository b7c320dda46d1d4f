"""A chunk read between the bytes of the last plain chunk (streaming.Reply.take's template) gives what
parsing it gives: the same pieces, finish reason, usage and failures, for any stream of chunks."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loadline.client.streaming import Reply, StreamFailure, StreamResult, chat_content, completion_content

FUZZ = settings(
    max_examples=1500, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)

# texts that are plain in JSON, and ones that are not (escapes, quotes, control characters), multi-byte
TEXT = st.sampled_from(
    [
        "a",
        "b",
        " the",
        "é",
        "日本",
        "🙂",
        '"',
        "\\",
        "\n",
        "\t",
        "\x7f",
        "\u2028",
        "}",
        '","x":"',
        "content",
        '"content":"',
        "text",
        "",
    ]
)
ENVELOPES = [  # what engines put around a chunk's choice (vLLM, llama.cpp, OpenAI), compact or not
    {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"},
    {"id": "x", "created": 2, "model": "m", "system_fingerprint": "fp", "usage": None},
    {},
]


class Parsed(Reply):
    """The reference: every chunk parsed."""

    __slots__ = ()

    def _learn(self, data, text) -> None:  # type: ignore[no-untyped-def]
        self.template = None


class Body:
    clock, read_delay_max, arrival = "user", 0.0, 0.0

    def merged(self, extra: int) -> None:
        pass


def chunk(
    envelope: dict,
    text: str | None,
    role: bool,
    finish: str | None,
    compact: bool,
    completion: bool,
    corrupt: str,
    ascii_only: bool = False,
) -> bytes:
    if completion:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
    else:
        delta = {"role": "assistant"} if role else {}
        if text is not None:
            delta["content"] = text
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    body = json.dumps(
        {**envelope, "choices": [choice]},
        ensure_ascii=ascii_only,  # True: é as \\u00e9
        separators=(",", ":") if compact else None,
    ).encode()
    if corrupt == "control":  # a raw control character inside the content: not JSON
        body = body.replace(b"TOKEN", b"TO\x01KEN")
    elif corrupt == "utf8":
        body = body.replace(b"TOKEN", b"TO\xffKEN")
    return body


@st.composite
def streams(draw) -> tuple[list[bytes], bool]:
    completion = draw(st.booleans())
    envelope = draw(st.sampled_from(ENVELOPES))
    compact = draw(st.booleans())
    ascii_only = draw(st.booleans())  # servers that escape every non-ASCII character
    events = []
    for i in range(draw(st.integers(1, 12))):
        text = draw(TEXT) if draw(st.integers(0, 9)) else "TOKEN"
        if draw(st.integers(0, 9)) == 0:
            envelope = draw(st.sampled_from(ENVELOPES))  # the envelope changes mid-stream
        corrupt = draw(st.sampled_from(["", "", "", "", "control", "utf8"])) if text == "TOKEN" else ""
        # a field before the choices that holds the content's key too, its value varying like a token
        decoy = (
            {"x": {"content": draw(st.sampled_from(["a", "b"])), "text": draw(st.sampled_from(["a", "b"]))}}
            if draw(st.integers(0, 4)) == 0
            else {}
        )
        events.append(
            chunk(
                {**decoy, **envelope},
                text,
                role=i == 0,
                finish=None,
                compact=compact,
                completion=completion,
                corrupt=corrupt,
                ascii_only=ascii_only,
            )
        )
    events.append(chunk(envelope, "", False, "stop", compact, completion, ""))
    return events, completion


def run(cls: type, events: list[bytes], completion: bool) -> tuple:
    result = StreamResult()
    reply = cls(Body(), completion_content if completion else chat_content, result)
    failure = None
    for i, event in enumerate(events):
        reply.last_arrival = float(i)
        try:
            reply.take(event)
        except StreamFailure as exc:
            failure = (i, str(exc.error_class), str(exc))
            break
    return tuple(result.pieces), tuple(result.arrivals), result.finish_reason, failure, reply


@FUZZ
@given(streams())
def test_a_chunk_read_by_its_template_gives_what_parsing_it_gives(case):
    events, completion = case
    fast, parsed = run(Reply, events, completion), run(Parsed, events, completion)
    assert fast[:4] == parsed[:4]


@pytest.mark.parametrize("completion", [False, True])
def test_chunks_that_differ_only_in_their_content_are_read_by_the_template(completion, monkeypatch):
    """The fast way is taken (a test that could not tell would pass on a template never used)."""
    events = [
        chunk(ENVELOPES[0], text, i == 0, None, True, completion, "") for i, text in enumerate(["a", "b", "é", "c"])
    ]
    parses = []
    real = orjson.loads
    monkeypatch.setattr("loadline.client.streaming._loads", lambda data: parses.append(data) or real(data))
    pieces, *_ = run(Reply, events, completion)
    assert pieces == ("a", "b", "é", "c")
    first_two = 1 if completion else 2  # a chat stream's first chunk has the role: the second sets the template
    assert len(parses) == first_two


@pytest.mark.parametrize("completion", [False, True])
def test_a_second_field_with_the_contents_key_keeps_every_chunk_parsed(completion):
    """{"x":{"content":"a"}, ...delta content "a"}: the key's first place is not the content's; a
    template around it would read x's next value as the token."""
    key = "text" if completion else "content"
    events = [chunk({"x": {key: x}}, "a", False, None, True, completion, "") for x in ("a", "b", "c")]
    assert run(Reply, events, completion)[0] == ("a", "a", "a")


@pytest.mark.parametrize(
    "events, completion, pieces",
    [
        # keys written with an escape are the same keys to the parser, and the last of two equal keys wins
        (
            [
                b'{"x":{"content":"a"},"choices":[{"delta":{"\\u0063ontent":"a"}}]}',
                b'{"x":{"content":"EVIL"},"choices":[{"delta":{"\\u0063ontent":"a"}}]}',
            ],
            False,
            ("a", "a"),
        ),
        (
            [
                b'{"choices":[{"delta":{"content":"EVIL","\\u0063ontent":"a"}}]}',
                b'{"choices":[{"delta":{"content":"EVIL2","\\u0063ontent":"a"}}]}',
            ],
            False,
            ("a", "a"),
        ),
        (
            [
                b'{"x\\"content":"a","choices":[{"delta":{"content":"a"}}]}',
                b'{"x\\"content":"b","choices":[{"delta":{"content":"a"}}]}',
            ],
            False,
            ("a", "a"),
        ),
        (
            [
                b'{"x":{"text":"a"},"choices":[{"t\\u0065xt":"a"}]}',
                b'{"x":{"text":"EVIL"},"choices":[{"t\\u0065xt":"a"}]}',
            ],
            True,
            ("a", "a"),
        ),
    ],
)
def test_escaped_or_repeated_keys_keep_every_chunk_parsed(events, completion, pieces):
    """Counterexamples found in review: each gave the decoy's value as the token."""
    assert run(Reply, events, completion)[0] == run(Parsed, events, completion)[0] == pieces


def test_a_str_event_after_a_bytes_one_is_parsed():
    """sseclient-py hands over str events (a comment or another field in the event, CR line endings)."""
    events = [
        b'{"choices":[{"delta":{"content":"a"}}]}',
        '{"choices":[{"delta":{"content":"b"}}]}',
        b'{"choices":[{"delta":{"content":"c"}}]}',
    ]
    assert run(Reply, events, False)[0] == ("a", "b", "c")


@pytest.mark.parametrize("content", [b"1", b"true", b'["a"]', b'{"a":"b"}'])
def test_content_that_is_no_string_is_taken_as_before(content):
    events = [b'{"choices":[{"delta":{"content":' + content + b"}}]}"]
    fast, parsed = run(Reply, events, False), run(Parsed, events, False)
    assert fast[:4] == parsed[:4] and fast[3] is None
