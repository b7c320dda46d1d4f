"""Checks on a response around the hot path, once per reply: is it a stream, and is it whole?

`is_event_stream` runs on the headers, before any token is read (loadline/client/streaming.py
reads the body); `short_reply` after the reply ended, for runs that asked for exact lengths
(ignore_eos), so a reply the server cut short is a failure, not a shorter success.
"""

from __future__ import annotations

from loadline.client.streaming import StreamResult


def is_event_stream(content_type: str | None) -> bool:
    """Whether a response's Content-Type announces SSE (absent: assume so and let the parser judge).

    Checked once per response, as httpx-sse does, so that a 200 carrying an HTML login page or a
    proxy's JSON is `not_event_stream`, not an empty stream.
    """
    return not content_type or "text/event-stream" in content_type.lower()


def tokens_received(result: StreamResult) -> int:
    """The reply's length: the server's usage count when it sent one, else the content chunks."""
    usage = result.usage
    if usage and usage.get("completion_tokens") is not None:
        return int(usage["completion_tokens"])
    return len(result.arrivals)


def short_reply(result: StreamResult, wanted: int) -> str:
    """Why a reply that had to be `wanted` tokens long (ignore_eos) is not, or "" when it is.

    Chunk counts are a floor (a server may put several tokens in one chunk), so without a usage
    count a reply the server itself ended for "length" is taken at its word.
    """
    got = tokens_received(result)
    if wanted <= 0 or got >= wanted or (result.usage is None and result.finish_reason == "length"):
        return ""
    return f"{got} of the {wanted} tokens asked for (finish_reason {result.finish_reason or 'none'})"
