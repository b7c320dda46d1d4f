"""Read one streamed reply the way a user does and make its record (tests of the token path's stamps)."""

from __future__ import annotations

import json

from loadline.client.connection import Connection, Response
from loadline.client.measure import fill_timings
from loadline.client.streaming import StreamResult, chat_content, read_stream
from loadline.core.records import RequestRecord


def read_record(response: Response) -> tuple[RequestRecord, StreamResult]:
    """Read `response` to its end (read_stream), close it, and fill a record's timings from it."""
    result = StreamResult()
    read_stream(response, chat_content, result)
    rec = RequestRecord("r", "w", "u", "c", "", 0, "/v1/chat/completions", "m", response.sent_wall)
    fill_timings(rec, result, response.sent_perf, result.ended_at)
    response.close()
    return rec, result


def post_and_read(conn: Connection, request_id: str, body: dict) -> tuple[RequestRecord, StreamResult, Response]:
    """POST `body` as a chat request tagged `request_id` (the simulator's truth log keys on it), read the
    streamed reply to its end and make its record; the response is returned for its stamps."""
    response = conn.post(
        "/v1/chat/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json", "X-Request-Id": request_id},
    )
    rec, result = read_record(response)
    rec.request_id = request_id
    return rec, result, response


def chat_body(max_tokens: int, **extra: object) -> dict:
    """A streamed chat request with usage at its end, as the truth tests send it."""
    return {
        "model": "m",
        "messages": [{"role": "user", "content": "hello " * 10}],
        "stream": True,
        "max_tokens": max_tokens,
        "stream_options": {"include_usage": True},
        **extra,
    }
