"""The per-token hot path: read one streamed (SSE) response and time every token.

Why not Locust's ready-made paths: `HttpUser` stops the clock at the headers and
`FastHttpUser.iter_content` waits for ~1 KB before handing bytes over (see REFERENCE-locust.md).
Here each `read1()` returns as soon as *any* bytes arrived, and every SSE event completed by those
bytes gets their arrival time: the kernel's receive stamp of that read on a plain-HTTP connection
(connection.py, kernel_clock.py), else `perf_counter()` right after the read. sse.py does the SSE
framing (events split across reads, several events in one read; comments, multi-line data and CR
line endings through sseclient-py). A chunk whose bytes repeat the last plain content chunk's but for
its content is read without parsing its JSON (`Reply.take`): 10 % of the heavy path's CPU. Reasoning
chunks get a template of their own (the same idea, another key), so a thinking model's stream stays
on that path; tool-call chunks are few (a name, then pieces of arguments) and are parsed.

Tokens of every kind are counted as they arrive (REFERENCE-workloads.md section 4): `content`, the
reasoning text (`delta.reasoning` in new vLLM, e.g. 0.34; `delta.reasoning_content` in older vLLM, e.g.
0.10, SGLang and llama.cpp: `reasoning ?? reasoning_content`, as AIPerf reads it) and `delta.tool_calls`. Every
such chunk is one arrival (TTFT, ITL); the first non-reasoning one is the answer's first (TTFO).

A stream counts as complete only when it ends the way the API says a finished reply ends: a
finish_reason, then `data: [DONE]` or a clean end of the body. `[DONE]` or a clean end without a
finish_reason is `truncated` (llama-cpp-python's server cuts a stream that way when a new request
interrupts it); a connection cut before the end is `reset`. Neither is ever a success. Nothing is
read after `[DONE]` but the end of the body, for at most DONE_GRACE_S (`Body.ends_within`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from time import perf_counter
from typing import Protocol

import orjson

from loadline.client.failures import TRANSPORT_EXCEPTIONS, classify
from loadline.client.kernel_clock import USER
from loadline.client.sse import event_data
from loadline.core.records import ErrorClass

# After [DONE], how long the end of the body may lag it before the connection is given up (closed,
# not reused): the end is written right behind [DONE] (uvicorn: the empty last chunk), so this only
# bounds what a server that holds the body open can cost a user; it never moves a measured time.
DONE_GRACE_S = 0.05
# How a body reader's turn with a reply ended: at [DONE], at the clean end of the body, or with
# the rest of the body left for read_stream to pull (body_reader.py)
DONE, END, PULL = "done", "end", "pull"


class StreamFailure(Exception):
    """The stream ended badly, for the reason `error_class` names."""

    def __init__(self, error_class: ErrorClass, message: str):
        super().__init__(message)
        self.error_class = error_class


@dataclass(slots=True)
class StreamResult:
    """What one stream delivered, with arrival times from perf_counter()."""

    arrivals: list[float] = field(default_factory=list)  # one per chunk carrying a token of any kind
    pieces: list[str] = field(default_factory=list)  # the content, to grow chat history
    usage: dict | None = None
    finish_reason: str = ""
    done: bool = False  # saw data: [DONE]
    body_complete: bool = False  # the HTTP body ended cleanly: the connection can be reused
    ended_at: float = 0.0  # perf_counter() when the last byte was read
    clock: str = USER  # where the arrival times came from: kernel (receive stamps) or user (read time)
    body: Body | None = None  # what was read: its read_delay_max says how late (kernel clock)
    answer_at: float = 0.0  # arrival of the first answer chunk: content or a tool call (0.0: none came)
    reasoning_chunks: int = 0  # chunks that carried reasoning text
    reasoning_end: float = 0.0  # arrival of the last of them
    tool_calls: int = 0  # tool calls the reply made (distinct `index` values)
    cache_n: int | None = None  # llama.cpp's `timings.cache_n`: prompt tokens reused from its cache

    @property
    def text(self) -> str:
        return "".join(self.pieces)


_CUT_MESSAGES = {
    ErrorClass.TIMEOUT: "no bytes within the read timeout (stalled stream)",
    ErrorClass.MALFORMED: "the stream is not valid UTF-8",
}


def valid_usage(usage: object) -> dict:
    """The usage object if its token counts are integers; a malformed one is the server's fault."""
    if not isinstance(usage, dict) or not isinstance(usage.get("completion_tokens", 0), int):
        raise ValueError("usage without integer token counts")
    return usage


def chat_content(choice: dict) -> str | None:
    delta = choice.get("delta")
    return delta.get("content") if delta else None


def completion_content(choice: dict) -> str | None:
    return choice.get("text")


def reasoning_of(delta: dict) -> tuple[str | None, bytes]:
    """A chat delta's reasoning text and the key that carried it: `reasoning ?? reasoning_content`
    (vLLM 0.34 sends only `reasoning`, vLLM 0.10, SGLang and llama.cpp `reasoning_content`)."""
    text = delta.get("reasoning")
    if text is not None:
        return text, _REASONING
    return delta.get("reasoning_content"), _REASONING_CONTENT


def tool_call_indices(delta: dict) -> list[int]:
    """The `index` of each tool call a chat delta carries a piece of (id and name on a call's first
    chunk, pieces of its arguments after: vLLM, SGLang, llama.cpp, openai-python all key them so)."""
    calls = delta.get("tool_calls")
    if not calls:
        return []
    if not isinstance(calls, list):
        raise TypeError("tool_calls is not a list")
    return [int(call.get("index", 0)) for call in calls]


class Body(Protocol):
    """A reply's body as connection.Response offers it."""

    arrival: float  # perf_counter() time at which the bytes of the last read reached the host
    read_delay_max: float  # kernel clock: the longest the newest bytes of a read waited in the socket (s)

    @property  # read-only: Response's is a property
    def clock(self) -> str: ...  # which clock `arrival` reads: kernel or user

    def read1(self) -> bytes: ...  # whatever the next read brought (b"": the body ended cleanly)

    def ends_within(self, seconds: float) -> bool: ...  # the body ends, with nothing more, that soon

    def merged(self, extra_events: int) -> None: ...  # the last read carried several content events

    def settle_merges(self, gap: float) -> None: ...  # count them in the read delay at the reply's pace

    def follow(self, reply: Reply) -> str: ...  # the body reader reads the body: DONE, END, or PULL (read it here)


class Reply:
    """One reply being read, whichever way its bytes come: pulled read by read (`reads()`, the
    greenlet of its user) or pushed by the body reader (body_reader.py). Holds what the reads said
    (when the last one's bytes arrived, a clean end) and turns each event's data into `result`."""

    __slots__ = (
        "body",
        "result",
        "content_of",
        "last_arrival",
        "clean_eof",
        "last_data",
        "content_events",
        "template",
        "reasoning_template",
        "calls_seen",
    )

    def __init__(self, body: Body, content_of: Callable[[dict], str | None], result: StreamResult):
        self.body = body
        self.result = result
        self.content_of = content_of
        self.last_arrival = 0.0
        self.clean_eof = False
        self.last_data = b""
        self.content_events = 0  # of the last read: one server write each (every engine writes one per step)
        self.template: tuple[bytes, bytes] | None = None  # the bytes around the content of a plain chunk (take)
        self.reasoning_template: tuple[bytes, bytes] | None = None  # the same around a reasoning chunk's text
        self.calls_seen: set[int] = set()  # tool-call indices met so far

    def reads(self) -> Iterator[bytes]:
        """The body's reads, for the SSE framing, remembering when the bytes of the last one arrived."""
        body = self.body
        read1 = body.read1
        while True:
            self.read_done()
            data = read1()
            if not data:
                # the end of the body usually comes with the last event: it moves the end of the
                # response only when it had to be waited for (then it carries its own stamp)
                self.last_arrival = body.arrival or perf_counter()
                self.clean_eof = True
                return
            self.last_arrival = body.arrival
            self.last_data = data
            yield data

    def read_done(self) -> None:
        """The events of the last read are all counted: several mean several writes shared one stamp."""
        if self.content_events > 1:
            self.body.merged(self.content_events - 1)
        self.content_events = 0

    def ends_at_done(self) -> bool:
        """After [DONE]: nothing but the end of the body follows it (the last read ended with it)."""
        return self.last_data.rstrip().endswith(b"[DONE]") and self.body.ends_within(DONE_GRACE_S)

    def take(self, data: bytes | str) -> bool:
        """One event's data into the result, stamped with the last read's arrival; True at [DONE].

        A chunk whose bytes are the last plain content chunk's with only the content changed (every
        engine repeats id, created, model and the rest through a reply) is that chunk with another
        text: the text is read between them without parsing the JSON (`template`, `_learn`). The
        same holds for the last plain reasoning chunk (`reasoning_template`)."""
        if data == b"[DONE]" or data == "[DONE]":
            return True
        text: str | None  # the chunk's content (annotation only: no work per token)
        result = self.result
        if isinstance(data, bytes):  # sseclient-py's events are str (comments, CR): parsed below
            template = self.template
            if template is not None:  # inline, not _between: the commonest chunk of all
                head, tail = template
                if data.startswith(head) and data.endswith(tail):
                    middle = data[len(head) : len(data) - len(tail)]  # b"" when they overlap: parsed below
                    if _not_plain(middle) is None:  # a JSON string's bytes as they are: its text
                        try:
                            text = middle.decode()
                        except UnicodeDecodeError:
                            text = ""  # parsed below, which says what is wrong with it
                        if text:
                            result.arrivals.append(self.last_arrival)
                            result.pieces.append(text)
                            self.content_events += 1
                            return False
            template = self.reasoning_template
            if template is not None and _between(data, template):
                arrival = self.last_arrival
                result.arrivals.append(arrival)
                result.reasoning_chunks += 1
                result.reasoning_end = arrival
                self.content_events += 1
                return False
        try:
            chunk = _loads(data)
            choices = chunk.get("choices")
            usage = chunk.get("usage")
            if choices:
                choice = choices[0]
                text = self.content_of(choice)
                reason = choice.get("finish_reason")
                delta = choice.get("delta") if self.content_of is chat_content else None
                thought, key, calls = (*reasoning_of(delta), tool_call_indices(delta)) if delta else (None, b"", [])
                if text or thought or calls:
                    arrival = self.last_arrival
                    result.arrivals.append(arrival)
                    self.content_events += 1
                    if thought:
                        result.reasoning_chunks += 1
                        result.reasoning_end = arrival
                    if (text or calls) and not result.answer_at:
                        result.answer_at = arrival
                    if text:
                        result.pieces.append(text)
                    if calls:
                        self._count_calls(calls)
                    self._learn_from(data, text, thought, key, calls or reason or usage)
                if reason:
                    result.finish_reason = reason
            elif "error" in chunk:
                error = chunk["error"]
                message = error.get("message", "") if isinstance(error, dict) else str(error)
                raise StreamFailure(ErrorClass.STREAM_ERROR, f"error in stream: {message[:160]}")
            if usage:
                result.usage = valid_usage(usage)
            timings = chunk.get("timings")
            if timings and isinstance(timings.get("cache_n"), int):  # llama.cpp's last chunk
                result.cache_n = timings["cache_n"]
        except (ValueError, AttributeError, TypeError, IndexError, KeyError):
            text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
            raise StreamFailure(ErrorClass.MALFORMED, f"not an OpenAI chunk: {text[:80]!r}") from None
        return False

    def _learn_from(self, data: bytes | str, text: object, thought: object, key: bytes, other: object) -> None:
        """Learn the template of a chunk that carried one kind of text alone: content (`_learn`) or
        reasoning (`_learn_reasoning`); a chunk with more (tool calls, a finish, usage) teaches none."""
        if other or (text and thought):
            return
        if text:
            self._learn(data, text)
        else:
            self._learn_reasoning(data, thought, key)

    def _count_calls(self, calls: list[int]) -> None:
        seen = self.calls_seen
        seen.update(calls)
        self.result.tool_calls = len(seen)

    def _learn_reasoning(self, data: bytes | str, text: object, key: bytes) -> None:
        """As `_learn`, around a reasoning chunk's text under `key`."""
        self.reasoning_template = _template_around(data, key, text)

    def _learn(self, data: bytes | str, text: object) -> None:
        r"""Keep the bytes around this chunk's content when they say where it is beyond doubt: no
        escape anywhere in the chunk (a key written "\u0063ontent" is "content" to the parser, and
        the last of two equal keys wins), the content's key once in it, written `"key":"`, its value
        the text's own bytes and a quote. Else no template: the next chunk is parsed."""
        key = _CONTENT_KEYS.get(self.content_of)
        self.template = None if key is None else _template_around(data, key, text)


def _template_around(data: bytes | str, key: bytes, text: object) -> tuple[bytes, bytes] | None:
    """The bytes before and after `text` as the value of `key` in `data`, when they say where it is
    beyond doubt (see Reply._learn); else None."""
    if not isinstance(data, bytes) or not isinstance(text, str) or data.count(key) != 1 or b"\\" in data:
        return None
    raw = text.encode()
    start = data.find(key) + len(key)
    if data[start : start + 2] != b':"' or _not_plain(raw) is not None:
        return None
    start += 2
    end = start + len(raw)
    if data[start:end] == raw and data[end : end + 1] == b'"':
        return data[:start], data[end:]
    return None


def _between(data: bytes, template: tuple[bytes, bytes]) -> str:
    """The text between a template's bytes when `data` is that chunk with another plain text ("" when
    it is not, or the text is empty or not UTF-8: the chunk is parsed, which says what it holds)."""
    head, tail = template
    if not (data.startswith(head) and data.endswith(tail)):
        return ""
    middle = data[len(head) : len(data) - len(tail)]  # b"" when they overlap
    if _not_plain(middle) is not None:  # escapes, quotes, control characters: not its text as it is
        return ""
    try:
        return middle.decode()
    except UnicodeDecodeError:
        return ""


_loads = orjson.loads  # faster than json.loads per chunk; its errors are ValueErrors
# Bytes that make a JSON string's raw bytes differ from its text (escapes, the closing quote) or invalid
# (control characters): without them, the bytes between a string's quotes are its text in UTF-8.
_not_plain = re.compile(rb'[\x00-\x1f"\\]').search
# where content_of reads
_CONTENT_KEYS: dict[Callable[[dict], str | None], bytes] = {chat_content: b'"content"', completion_content: b'"text"'}
_REASONING, _REASONING_CONTENT = b'"reasoning"', b'"reasoning_content"'


def read_stream(body: Body, content_of: Callable[[dict], str | None], result: StreamResult) -> None:
    """Consume an SSE body into `result`; raise StreamFailure on a bad ending.

    `content_of(choice)` extracts the token text from a chunk's first choice (chat vs completions).
    `result` belongs to the caller so that what arrived before a failure or a cancellation is kept.
    The body reader reads it when the body `follow`s (a plain-TCP connection); what it hands back
    (an unusual framing, or all of it over TLS) is read here, in this greenlet.
    """
    reply = Reply(body, content_of, result)
    result.clock, result.body = body.clock, body
    try:
        outcome = body.follow(reply)
        if outcome == PULL:
            for data in event_data(reply.reads()):
                if reply.take(data):
                    outcome = DONE
                    break
        if outcome == DONE:
            # The reply is over: stop reading. A server that holds the body open after it would
            # otherwise block this user until the read timeout while the run looks healthy.
            result.done = True
            result.ended_at = reply.last_arrival
            # nothing is read after it but the end of the body (DONE_GRACE_S); the connection
            # is reused only when nothing else came
            result.body_complete = reply.ends_at_done()
    except TRANSPORT_EXCEPTIONS as exc:  # before [DONE]: reading stops at it
        error_class = classify(exc)
        message = _CUT_MESSAGES.get(error_class, "stream cut: {}").format(type(exc).__name__)
        raise StreamFailure(error_class, message) from None
    finally:
        reply.read_done()
        arrivals = result.arrivals
        n = len(arrivals)
        body.settle_merges((arrivals[-1] - arrivals[0]) / (n - 1) if n > 1 else 0.0)
    if not result.done:
        result.body_complete = reply.clean_eof
        result.ended_at = reply.last_arrival or perf_counter()
    if not result.finish_reason:
        end = "[DONE]" if result.done else "the end of the body"
        raise StreamFailure(ErrorClass.TRUNCATED, f"{end} without a finish_reason: the reply was cut short")
