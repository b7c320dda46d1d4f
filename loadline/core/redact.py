"""Secrets out of text that reaches a record, a log or a report (response bodies, error messages).

A server that rejects a request often echoes what it got: "Incorrect API key provided: sk-abc...",
an HTML login page with a session token, a redirect URL with credentials. The run folder and the
report keep a short sample of such bodies (the reason a run is unusable), so every sample passes
through `redact` first. Pure and cheap: the worker calls it only on failed attempts.
"""

from __future__ import annotations

import re

MARK = "[REDACTED]"
SAMPLE_CHARS = 200  # enough to recognise a login page or an error object, short enough for a table cell

_PATTERNS = (
    # Authorization header values: "Bearer xyz", "Basic xyz", "Token xyz"
    (re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{6,}"), r"\1 " + MARK),
    # credentials inside URLs: scheme://user:password@host, and scheme://token@host (a bare token as user)
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@"), r"\1" + MARK + "@"),
    # key=value / "key": "value" pairs whose key names a secret (api_key, apikey, token, password, secret...)
    (
        re.compile(
            r"""(?i)(["']?\b(?:api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|password|passwd|pwd|session(?:id)?|authorization)\b["']?\s*[:=]\s*["']?)[^"'\s&,;<>]{3,}"""
        ),
        r"\1" + MARK,
    ),
    # provider-style keys wherever they appear: sk-..., sk-proj-..., hf_..., ghp_..., xoxb-..., AKIA...
    (re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{8,}"), MARK),
    (re.compile(r"\b(?:hf|ghp|gho|ghs|glpat|xox[abpr])[_-][A-Za-z0-9_-]{8,}"), MARK),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), MARK),
    # JSON web tokens (three base64url parts)
    (re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"), MARK),
)


def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    """`text` with known secrets (e.g. the run's own API key) and secret-looking tokens replaced."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, MARK)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def sample(body: bytes | str, secrets: tuple[str, ...] = (), limit: int = SAMPLE_CHARS) -> str:
    """A short, one-line, redacted sample of a response body for records and reports.

    Redacts before cutting (a key cut in half would slip past the patterns) and after joining
    lines (so a report table keeps one row per sample)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    text = " ".join(redact(text[: limit * 4], secrets).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
