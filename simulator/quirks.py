"""Opt-in behaviours of real servers that a load tester must survive, captured from llama.cpp.

Each reproduces what was measured against the real server (REFERENCE-llamacpp.md), so fast tests
can hold the client to it without building an engine:
- close-after-stream: llama.cpp's `llama-server` closes the connection right after each streamed
  response while its headers announce `Keep-Alive: timeout=5, max=100`. Here the close lands
  CLOSE_DELAY_S after the response's last byte, and a request that arrives in between is read and
  dropped, never served: a client that sends its next request at once meets the dead connection
  every time (against llama-server it happened to 2.8 % of requests at short think times).
- uuid-request-id: llama-cpp-python's `llama_cpp.server` (starlette-context's request-id plugin)
  answers an `X-Request-Id` that is not a UUID with HTTP 400 and an empty body, on every route.
- interrupt: llama-cpp-python's default `interrupt_requests=true`: a new generation request cuts
  every stream in flight: whatever was generated, then `data: [DONE]` without a finish_reason.
- llamacpp-api: llama-server's own routes and names: /metrics in `llamacpp:*` names without
  labels (the vendored version's set plus the older kv_cache_* gauges, summed over replicas;
  requests_deferred counts requests waiting while every slot is busy, as llama-server's does; no
  vLLM, no DCGM: llama-server runs on CPUs here), /props with the per-slot `n_ctx` and
  `total_slots` (= max_num_seqs: a slot per running request), /v1/models with `meta` in place of
  `max_model_len`.
Names are given comma-, plus- or space-separated (`--quirks close-after-stream+interrupt`).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from loadline.core.errors import UsageError

KNOWN = ("close-after-stream", "uuid-request-id", "interrupt", "llamacpp-api")
CLOSE_DELAY_S = 0.05  # wall seconds between a stream's end and the server's close (see above)
KEEP_ALIVE_HEADER = b"Keep-Alive: timeout=5, max=100\r\n"  # what llama-server announces meanwhile


@dataclass(frozen=True)
class Quirks:
    close_after_stream: bool = False
    uuid_request_id: bool = False
    interrupt: bool = False
    llamacpp_api: bool = False

    @classmethod
    def parse(cls, text: str) -> Quirks:
        names = [n for n in re.split(r"[,+\s]+", text.strip().lower()) if n]
        unknown = [n for n in names if n not in KNOWN]
        if unknown:
            raise UsageError(f"unknown sim quirk {unknown[0]!r} (known: {', '.join(KNOWN)})")
        return cls(**{n.replace("-", "_"): True for n in names})


def is_uuid(value: str | None) -> bool:
    """What starlette-context accepts: anything uuid.UUID parses."""
    try:
        uuid.UUID(value or "")
    except ValueError:
        return False
    return True
