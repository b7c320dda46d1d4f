"""The request record: one row per HTTP attempt, the only source of truth for analysis.

Definitions (the README repeats them; analysis uses them everywhere):
- t0 is taken with `time.perf_counter()` right after the request's last byte was written to the
  socket (loadline/client/http.py); `start_wall` is `time.time()` at the same instant and only serves to align records with phases, server
  metrics and the simulator's truth log.
- connect_ms: TCP (and TLS) connection set-up this attempt paid before t0; 0 when it reused a
  kept-alive connection, empty when unknown (e.g. behind an HTTP proxy). Not part of TTFT/E2E.
- TTFB: t0 -> response headers received.
- TTFT: t0 -> arrival of the first chunk whose content is non-empty.
- ITL: the gaps between consecutive content chunks (arrival times); `itl_us` keeps every gap,
  in integer microseconds, space-separated, so analysis can pool per-gap percentiles.
- TPOT: (E2E - TTFT) / (output_tokens - 1).
- E2E: t0 -> last byte of the response (or the moment the attempt ended).
- output_tokens: the server's streamed `usage` when present (`tokens_source="usage"`), else the
  number of content chunks (`tokens_source="chunks"`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

# status values
OK, ERROR, CANCELLED = "ok", "error", "cancelled"

# error_class values ("" when status is ok)
ERROR_CLASSES = (
    "connect",  # could not connect / connection refused before any response
    "timeout",  # connect, first-token or total timeout
    "http",  # non-2xx status; see http_status
    "reset",  # connection closed or reset mid-stream (truncated stream)
    "malformed",  # bytes that are not valid SSE / JSON chunks
    "stream_error",  # an OpenAI error object arrived inside the stream
    "cancelled",  # the test stopped or ramped down while the stream was in flight
    "client",  # a bug or unexpected exception in the client itself
)


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
    status: str = OK
    error_class: str = ""
    http_status: int = 0
    error_message: str = ""
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
    itl_us: str = field(default="", repr=False)

    def to_row(self) -> list:
        return [getattr(self, name) for name in COLUMNS]


COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RequestRecord))
