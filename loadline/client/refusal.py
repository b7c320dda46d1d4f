"""A request the server refused with an HTTP error status: its class, message and how long to wait.

The body of a refusal often echoes the key the request carried, so the message and the detail kept
for the report are redacted. A refusal that says the request itself was wrong (over the context, a
bad parameter: loadline/client/failures.py) is the load tool's own invalid request, not the
service's failure; a 400 that names the context length teaches it to this process
(loadline/client/discovery.py). 429 and 503 carry the server's Retry-After (1 s when it gives none
or an unreadable one).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from loadline.client.connection import Response
from loadline.client.discovery import learn_from_refusal
from loadline.client.failures import invalid_request
from loadline.core.records import ErrorClass
from loadline.core.redact import redact, sample


@dataclass(frozen=True)
class Refusal:
    """What a refused attempt's record says, and the wait before a retry (None: no retry)."""

    error_class: ErrorClass
    message: str
    detail: str  # the body's start, redacted, for the report
    retry_after: float | None


def read_refusal(response: Response, secrets: tuple[str, ...], base_url: str) -> Refusal:
    """A non-200 response (its body's first 2,000 bytes) as the attempt's Refusal."""
    body = response.read_all(2000).decode("utf-8", "replace")
    try:
        message = json.loads(body)["error"]["message"] or body  # OpenAI-style error object
    except (ValueError, KeyError, TypeError):
        message = body
    error_class = ErrorClass.INVALID_REQUEST if invalid_request(response.status, body) else ErrorClass.HTTP
    if response.status == 400:
        learn_from_refusal(base_url, body)  # a server that did not say its context length says it here
    return Refusal(
        error_class,
        f"HTTP {response.status}: {redact(one_line(message), secrets)}",
        sample(body, secrets),
        _retry_after(response),
    )


def _retry_after(response: Response) -> float | None:
    if response.status not in (429, 503):
        return None
    try:
        return max(0.0, float(response.header("Retry-After") or "1"))
    except ValueError:
        return 1.0


def one_line(value: object) -> str:
    """A message on one line, at most 300 characters (Locust and the records show it so)."""
    return " ".join(str(value).split())[:300]
