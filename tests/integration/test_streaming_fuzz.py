"""Property-based fuzz of the SSE stream reader: read_stream over an in-memory response.

`read_stream` reads its body through `read1()` (streaming.Body, what connection.Response offers):
`Body` below is that interface over chosen byte chunks, optionally ending in the transport exception
the connection raises when it is cut. No server is mocked: the reader's own input is generated.

Properties (four tests, 12,000 generated cases, about 40 s of CPU):
- a valid stream split at any bytes gives the same record as the unsplit stream;
- any corruption, truncation, huge line or non-UTF-8 byte: no exception but StreamFailure escapes,
  every outcome is classified (ok = a finish_reason; else an ErrorClass), and the reader returns
  (the input is finite and nothing waits);
- the body reader's way of taking the same reads (body_reader.py: events framed as reads come,
  unusual framings handed back to the pull path) gives the same record, times and ending.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loadline.client import body_reader
from loadline.client.connection import READ_SIZE, IncompleteBody, ReadTimeout
from loadline.client.streaming import PULL, StreamFailure, StreamResult, chat_content, read_stream
from loadline.core.records import ErrorClass

CASES = 3500  # per test: 3 x 3,500 = 10,500 generated cases
FUZZ = settings(
    max_examples=CASES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
CUTS = (None, "reset", "timeout", "incomplete")  # how the body ends: cleanly, or cut by the transport


class Body:
    """A reply's body as read_stream reads it: read1() hands over the next chunk, then b"" at the
    end, or raises the transport exception that cut the body."""

    clock = "user"
    read_delay_max = 0.0

    def __init__(self, chunks: list[bytes], cut: str | None = None):
        self.chunks = [c for c in chunks if c]
        self.cut = cut
        self.reads = 0
        self.arrival = 0.0

    def read1(self) -> bytes:
        self.reads += 1
        self.arrival = float(self.reads)
        assert self.reads < 100_000, "the reader kept reading past the end"
        if self.chunks:
            return self.chunks.pop(0)
        if self.cut == "reset":
            raise ConnectionResetError(104, "reset")
        if self.cut == "timeout":
            raise ReadTimeout("no bytes within the read timeout")
        if self.cut == "incomplete":
            raise IncompleteBody("the connection closed before the end of the reply")
        return b""

    def merged(self, extra_events: int) -> None:
        pass

    def follow(self, reply) -> str:  # type: ignore[no-untyped-def]
        return PULL  # read here, read by read (PushedBody: the body reader's way)

    def settle_merges(self, gap: float) -> None:
        pass

    def ends_within(self, seconds: float) -> bool:
        try:
            return not self.read1()
        except OSError:
            return False

    def close(self) -> None:
        pass


class PushedBody(Body):
    """The same reads the body reader's way (body_reader.py): each handed to its `_Follow` as the
    reader hands a ready socket's read, and what it hands back read by the pull path."""

    def __init__(self, chunks: list[bytes], cut: str | None = None):
        super().__init__(chunks, cut)
        self.decoded = bytearray()  # connection.Response's: decoded by the parser, not taken yet
        self.complete = False

    def read1(self) -> bytes:
        if self.decoded:  # handed back: the same read, the same stamp
            data = bytes(self.decoded)
            del self.decoded[:]
            return data
        return b"" if self.complete else super().read1()  # the end is not read twice

    def follow(self, reply) -> str:  # type: ignore[no-untyped-def]
        follow = body_reader._Follow(self, reply)
        for _ in range(100_000):
            data = super().read1()  # the transport's cut is raised here, as read_ready raises it
            self.decoded += data
            self.complete = not data
            outcome = follow.take_decoded()
            if outcome is not None:
                return outcome
        raise AssertionError("the reader kept reading past the end")


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)])]


def outcome(chunks: list[bytes], cut: str | None = None, body: type = Body) -> tuple[StreamResult, str]:
    """Read the body; "ok" or the failure's error class. Anything else raised fails the test."""
    result = StreamResult()
    try:
        read_stream(body(chunks, cut), chat_content, result)
    except StreamFailure as exc:
        assert exc.error_class in set(ErrorClass), exc.error_class
        return result, str(exc.error_class)
    assert result.finish_reason, "a stream read without failure must have ended as a finished reply"
    return result, "ok"


def record(result: StreamResult) -> tuple:
    """What a stream's record is made of (arrival times aside: they depend on when reads return)."""
    return (tuple(result.pieces), len(result.arrivals), result.finish_reason, json.dumps(result.usage), result.done)


# --- valid streams ------------------------------------------------------------------------------------
# Token texts: multi-byte UTF-8 (2, 3 and 4 bytes), SSE and JSON syntax inside content, empty deltas.
# Sampled rather than st.text(): generating free text costs most of a case's time.
TEXT = st.sampled_from(
    [
        "",
        " a",
        " the",
        "é",
        "ß",
        "日本",
        "語",
        "🙂",
        "👩‍💻",
        "\n",
        "\r\n",
        "data: [DONE]",
        "\n\ndata: x",
        '"',
        "\\",
        "{",
        "}",
        ":",
        "\u2028",
        "\x00",
    ]
)


def chunk_line(obj: dict, eol: bytes) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + eol + eol


@st.composite
def valid_streams(draw) -> bytes:
    eol = draw(st.sampled_from([b"\n", b"\r\n"]))
    parts = [b": keep-alive comment" + eol + eol] if draw(st.booleans()) else []
    for text in draw(st.lists(TEXT, max_size=12)):
        parts.append(chunk_line({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}, eol))
    parts.append(
        chunk_line(
            {"choices": [{"index": 0, "delta": {}, "finish_reason": draw(st.sampled_from(["stop", "length"]))}]}, eol
        )
    )
    if draw(st.booleans()):
        tokens = draw(st.integers(0, 10_000))
        parts.append(chunk_line({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": tokens}}, eol))
    if draw(st.booleans()):
        parts.append(b"data: [DONE]" + eol + eol)
    return b"".join(parts)


@FUZZ
@given(valid_streams(), st.lists(st.integers(min_value=0), max_size=24))
def test_a_valid_stream_split_at_any_bytes_gives_the_same_record(stream, cuts):
    whole, status = outcome([stream])
    assert status == "ok"
    pieces, status = outcome(split(stream, cuts))
    assert status == "ok" and record(pieces) == record(whole)


# --- corrupted, truncated, huge, not UTF-8 ---------------------------------------------------------------
@st.composite
def corrupted_streams(draw) -> bytes:
    data = bytearray(draw(valid_streams()))
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "non-utf8", "huge", "garbage-event"]))
        at = draw(st.integers(0, len(data)))
        if kind == "flip" and data:
            data[at % len(data)] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(max_size=32))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 32))]
        elif kind == "truncate":
            del data[at:]
        elif kind == "non-utf8":
            data[at:at] = draw(st.sampled_from([b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\x80\x80"]))
        elif kind == "huge":  # one line longer than a read: 1-3 reads' worth without a newline
            data[at:at] = b"data: " + b"x" * draw(st.integers(READ_SIZE // 2, 3 * READ_SIZE))
        else:
            data[at:at] = b"data: " + draw(st.binary(max_size=64)).replace(b"\n", b"") + b"\n\n"
    return bytes(data)


@FUZZ
@given(corrupted_streams(), st.lists(st.integers(min_value=0), max_size=20), st.sampled_from(CUTS))
def test_any_corruption_ends_in_a_classified_outcome(stream, cuts, cut):
    _, status = outcome(split(stream, cuts), cut)
    assert status == "ok" or status in set(ErrorClass)


@FUZZ
@given(st.binary(max_size=2048), st.lists(st.integers(min_value=0), max_size=20), st.sampled_from(CUTS))
def test_random_bytes_end_in_a_classified_outcome(body, cuts, cut):
    _, status = outcome(split(body, cuts), cut)
    assert status != "ok" or b"finish_reason" in body  # random bytes that pass must have said how the reply ended


# --- the body reader's way ------------------------------------------------------------------------------
PUSH_CASES = settings(FUZZ, max_examples=1500)


def everything(result: StreamResult) -> tuple:
    return (*record(result), tuple(result.arrivals), result.ended_at, result.body_complete)


@PUSH_CASES
@given(
    st.one_of(valid_streams(), corrupted_streams()),
    st.lists(st.integers(min_value=0), max_size=20),
    st.sampled_from(CUTS),
)
def test_the_body_reader_and_the_pull_path_give_the_same_record(stream, cuts, cut):
    pulled, pulled_status = outcome(split(stream, cuts), cut)
    pushed, pushed_status = outcome(split(stream, cuts), cut, PushedBody)
    assert pushed_status == pulled_status
    assert everything(pushed) == everything(pulled)
