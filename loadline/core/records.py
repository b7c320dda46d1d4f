"""The request record: one row per HTTP attempt, the only source of truth for analysis.

Definitions (the README repeats them; analysis uses them everywhere):
- t0 is taken with `time.perf_counter()` right after the request's last byte was written to the
  socket (loadline/client/connection.py); `start_wall` is `time.time()` at the same instant and only
  serves to align records with phases, server metrics and the simulator's truth log.
- connect_ms: TCP (and TLS) connection set-up this attempt paid before t0; 0 when it reused a
  kept-alive connection. Not part of TTFT/E2E.
- TTFB: t0 -> response headers received.
- Tokens come in three kinds (REFERENCE-workloads.md section 4): reasoning (`delta.reasoning`, or
  `delta.reasoning_content` in older vLLM, SGLang and llama.cpp), answer content (`delta.content`,
  `text` for /v1/completions) and tool calls (`delta.tool_calls`). A chunk carrying any of them is
  a token chunk (`content_chunks` counts them).
- TTFT: t0 -> arrival of the first token chunk of any kind (for a reasoning model: its first
  thought). Without reasoning or tool calls: the first chunk whose content is non-empty.
- TTFO: t0 -> arrival of the first answer chunk (content or tool call), `ttfo_ms`; equal to TTFT
  when the reply does not reason; empty when no answer came (a reply cut during its reasoning).
- reasoning_ms: TTFT -> TTFO (to the last reasoning chunk when no answer came); empty without
  reasoning chunks. reasoning_tokens: `usage.completion_tokens_details.reasoning_tokens` (or
  SGLang's top-level `usage.reasoning_tokens`) when sent, else the reasoning chunks; empty when
  neither says anything (a server without reasoning).
- ITL: the gaps between consecutive token chunks of every kind (arrival times); `itl_us` keeps every gap,
  in integer microseconds, space-separated, so analysis can pool per-gap percentiles.
- TPOT: the answer's time per token, (E2E - TTFO) / (answer tokens - 1), answer tokens = output_tokens
  - reasoning_tokens; without reasoning (E2E - TTFT) / (output_tokens - 1).
- E2E: t0 -> last byte of the response (or the moment the attempt ended).
- clock: where the response's arrival times (TTFT, ITL, E2E end) come from. `kernel`: the
  kernel's receive stamp of the read that carried the bytes (SO_TIMESTAMPNS, plain HTTP on Linux),
  true even when the generator reads late; `user`: perf_counter() when the read returned (TLS);
  empty when nothing of a response was read (e.g. cancelled before the headers). TTFB uses the
  same clock as the connection.
  read_delay_ms: with the kernel clock, how far behind the generator was on this attempt, i.e. by
  how much its times may be off: the longest any bytes of the response may have waited unread (a
  read's newest bytes; when one read carried several server writes, which then share the newest
  stamp, its oldest), or the span of the request's write when the OS preempted the generator around
  it ("sent" lies somewhere in it); empty with the user clock.
- due_wall: open-loop (arrival-rate) runs only: `time.time()` at which the arrival schedule said the
  request was due (a retry keeps its request's due time); empty in closed-loop runs.
  lateness_ms: start_wall - due_wall (the generator's lateness: waiting for a free in-flight slot,
  a busy event loop). Latency from due = lateness_ms + ttft_ms / e2e_ms: what a user would have felt
  (coordinated omission made visible); the other latencies stay measured from sent (t0).
- output_tokens: the server's streamed `usage` when present (`tokens_source="usage"`), else the
  number of token chunks (`tokens_source="chunks"`); reasoning tokens included, as in `usage`.
- prompt_tokens_requested: the prompt's length as Loadline built it, in the target's tokens as
  `token_counter` counted them (`hf`: the --tokenizer; `server`: its /tokenize; `calibrated`: tokens
  per word learned from usage), template tokens learned from earlier replies included; compare with
  `prompt_tokens` (the server's usage). output_tokens_requested: the max_tokens sent (exact with
  ignore_eos); compare with `output_tokens`. Empty when not set (folders from before these columns).
- cached_tokens: `usage.prompt_tokens_details.cached_tokens` (vLLM with
  --enable-prompt-tokens-details, SGLang with --enable-cache-report), else llama.cpp's
  `timings.cache_n`; empty when the server reports neither (the default of vLLM and SGLang).
- tool_calls: the number of tool calls in the reply (distinct `index` of `delta.tool_calls`); such
  a reply ends with `finish_reason: "tool_calls"` and is a complete reply like any other.
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass, field
from enum import StrEnum


class Status(StrEnum):
    """How an attempt ended: the record's `status`.

    A StrEnum like ErrorClass: the CSV keeps the plain value, and a value read back as a string
    compares equal to its member.
    """

    OK = "ok"  # a finished reply (see `streaming.py` for what counts as finished)
    ERROR = "error"  # failed; `error_class` says why
    CANCELLED = "cancelled"  # the test stopped or ramped down while it was in flight: neither ok nor error


# The plain values, for the worker's hot path and the records it sends (a str, not an enum member).
OK, ERROR, CANCELLED = Status.OK.value, Status.ERROR.value, Status.CANCELLED.value


class ErrorClass(StrEnum):
    """Why an attempt failed: the record's `error_class` ("" when status is ok).

    A StrEnum, so the CSV keeps the plain value and `rec.error_class == ErrorClass.RESET` holds for
    a value read back as a string. Transport exceptions are mapped to these in one table
    (loadline/client/failures.py); a new class is added here, nowhere else.
    """

    CONNECT = "connect"  # no connection was made: refused, DNS, TLS handshake
    TIMEOUT = "timeout"  # connect, first-byte/next-byte or total timeout
    HTTP = "http"  # a non-2xx status; see http_status
    RESET = "reset"  # the connection closed or was reset before the response ended
    TRUNCATED = "truncated"  # the stream ended in order but not as a finished reply ends: [DONE] or EOF
    #                          without a finish_reason, or fewer tokens than ignore_eos asked for
    NOT_EVENT_STREAM = "not_event_stream"  # a 2xx whose body is not an event stream (HTML login page,
    #                                        a proxy's page; for stream=false: not JSON); see content_type
    MALFORMED = "malformed"  # an event stream whose events are not valid OpenAI JSON chunks
    STREAM_ERROR = "stream_error"  # an OpenAI error object arrived inside the stream
    INVALID_REQUEST = "invalid_request"  # the server refused the request itself as invalid: longer than
    #                                      the context, a bad parameter (HTTP 400/413/422, or the same error
    #                                      inside a stream): the tool's request, not the service's capacity
    CANCELLED = "cancelled"  # the test stopped or ramped down while the request was in flight
    CLIENT = "client"  # a bug or unexpected exception in the client itself


@dataclass(slots=True)
class RequestRecord:
    request_id: str
    worker_id: str
    user_id: str
    user_class: str
    session_id: str
    turn: int
    endpoint: str
    model: str
    start_wall: float
    attempt: int = 0  # 0 for the first try; retries are rows of their own, so nothing is counted twice
    stale_retries: int = 0  # 1: first sent on a kept-alive connection the server had closed, sent again on a
    #                         fresh one (that first send never reached the server: client/keepalive.py)
    status: str = OK
    error_class: str = ""
    http_status: int = 0
    error_message: str = ""
    content_type: str = ""  # the response's Content-Type (what a setup failure looks like: text/html...)
    error_detail: str = ""  # failed attempts: the first ~200 chars of the body, secrets redacted (core/redact.py)
    connect_ms: float | None = None
    ttfb_ms: float | None = None
    ttft_ms: float | None = None
    e2e_ms: float = 0.0
    tpot_ms: float | None = None
    itl_mean_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p99_ms: float | None = None
    itl_max_ms: float | None = None
    prompt_tokens: int | None = None
    output_tokens: int = 0
    tokens_source: str = "chunks"
    content_chunks: int = 0
    finish_reason: str = ""
    clock: str = ""  # arrival stamps: "kernel" (receive time, plain HTTP) or "user" (read time)
    read_delay_ms: float | None = None  # kernel clock: longest any bytes may have waited unread
    due_wall: float | None = None  # arrival-rate runs: when the schedule said this request was due
    lateness_ms: float | None = None  # arrival-rate runs: due -> sent (start_wall - due_wall)
    itl_us: str = field(default="", repr=False)
    prompt_tokens_requested: int | None = None
    output_tokens_requested: int | None = None
    token_counter: str = ""
    ttfo_ms: float | None = None  # t0 -> first answer token (content or tool call); = TTFT without reasoning
    reasoning_tokens: int | None = None  # usage's reasoning_tokens, else reasoning chunks; None: no reasoning seen
    reasoning_ms: float | None = None  # TTFT -> first answer token (or the last reasoning one, when no answer came)
    cached_tokens: int | None = None  # prompt tokens the server read from its prefix cache; None: not reported
    tool_calls: int = 0  # tool calls the reply made (streamed `delta.tool_calls`)
    trace_index: int | None = None  # trace replays: the trace request this one replays (its line order, 0-based)

    def to_row(self) -> list[object]:
        return list(_row_of(self))


COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RequestRecord))
_row_of = operator.attrgetter(*COLUMNS)  # the row in one C call (one per request, on the worker)
