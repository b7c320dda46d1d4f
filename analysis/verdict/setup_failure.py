"""Runs that failed as a misconfigured test fails: the tool's requests, not the service's capacity.

Two findings of the validity assessment (analysis/verdict/validity.py), each a dict or None:
- `setup_failure`: most attempts were rejected the way a wrong URL, key, model or endpoint is
  (400/401/403/404/405/501), or answered 2xx with something that is not the API's reply (an HTML
  login page); with status, content type, a hint and a short redacted body sample;
- `invalid_requests`: more than INVALID_SHARE of the attempts were refused as invalid requests (a
  prompt over the context, a bad parameter).
Either makes the run unusable for capacity statements.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from loadline.core.records import ErrorClass, Status
from loadline.core.redact import redact, sample

# The statuses a misconfigured test gets, not an overloaded service (RFC 9110): 400 bad request
# (wrong model name, malformed body), 401/403 auth, 404 wrong path, 405 wrong method, 501 endpoint
# not implemented. 429/503/5xx are the service's answers under load and stay capacity signals.
SETUP_STATUSES = (400, 401, 403, 404, 405, 501)
SETUP_SHARE = 0.5  # "most requests": more than half of the attempts with an outcome
API_MEDIA_TYPES = ("text/event-stream", "application/json")  # what an OpenAI-compatible server answers

_HINTS = {
    400: "the server refused the request body: check the model (`loadline run -- --model NAME`) and the request options (max tokens, stream)",
    401: "authentication failed: check the API key (LOADLINE_API_KEY or OPENAI_API_KEY in the environment, "
    "`loadline run -- --api-key KEY`, or the web UI's API key field) or the gateway's credentials",
    403: "the credentials lack access to this model or endpoint",
    404: "wrong path or model: --host must be the base URL (without /v1), and the model must exist",
    405: "the target does not accept POST on this path: is --host the inference API?",
    501: "the target does not implement this endpoint (chat vs completions?)",
}


# --- 1. setup failures --------------------------------------------------------------------------
def _media_type(value: object) -> str:
    return str(value or "").split(";")[0].strip().lower()


_JUDGED_COLUMNS = ("status", "error_class", "http_status", "content_type", "error_detail", "error_message")
_ATTEMPTS = (Status.OK, Status.ERROR)  # what the setup checks judge: the cancelled are neither


def _attempts(requests: pd.DataFrame) -> int:
    return int(requests["status"].isin(_ATTEMPTS).sum()) if len(requests) else 0


def _judged(requests: pd.DataFrame, among: np.ndarray | None = None, statuses=_ATTEMPTS) -> pd.DataFrame:
    """The attempts with these statuses (of the rows `among` selects), with the columns the setup
    checks read (not a whole-width copy)."""
    if not len(requests):
        return requests
    columns = [c for c in _JUDGED_COLUMNS if c in requests.columns]
    kept = requests["status"].isin(statuses).to_numpy()
    return requests.loc[kept if among is None else kept & among, columns]


def setup_failure(requests: pd.DataFrame, secrets: tuple[str, ...] = ()) -> dict | None:
    """The setup failure that most attempts share, or None.

    Rejected: HTTP status in SETUP_STATUSES. Not the API's reply: a failed 2xx attempt classed
    `not_event_stream`, or whose Content-Type is neither an event stream nor JSON.
    """
    attempts = _attempts(requests)
    if not attempts:
        return None
    # Both kinds are failed attempts: only those rows are read (a copy of every attempt's columns was
    # ~40 bytes a row, the report's largest part at 50 M rows).
    rows = _judged(requests, statuses=(Status.ERROR,))
    status = pd.to_numeric(rows["http_status"], errors="coerce").fillna(0).astype(int)
    media = rows.get("content_type", pd.Series("", index=rows.index)).map(_media_type)
    # the tool's own invalid requests have a finding of their own (invalid_requests), with the server's words
    rejected = status.isin(SETUP_STATUSES) & (rows["error_class"] != INVALID_REQUEST)
    foreign = status.between(200, 299) & (
        (rows["error_class"] == ErrorClass.NOT_EVENT_STREAM) | ((media != "") & ~media.isin(API_MEDIA_TYPES))
    )
    bad = rejected | foreign
    share = float(bad.sum()) / attempts
    if share <= SETUP_SHARE:
        return None
    culprits = rows[bad]
    statuses = Counter(int(s) for s in status[bad])
    types = Counter((t or "(none)") for t in media[bad])
    top_status = statuses.most_common(1)[0][0]
    kind = "rejected" if rejected.sum() >= foreign.sum() else ErrorClass.NOT_EVENT_STREAM
    example = culprits[status[bad] == top_status].iloc[0]
    body = _body_sample(example, secrets)
    content_type = str(example.get("content_type") or "") or "no content type"
    if kind == "rejected":
        what = f"rejected with HTTP {top_status} ({content_type})"
        hint = _HINTS.get(top_status, "")
    else:
        what = f"answered HTTP {top_status} with {content_type}, not an event stream"
        hint = "something other than the inference API answered (a login page, a proxy or a web server): check --host"
    reason = f"{len(culprits)} of {attempts} requests ({share:.0%}) were {what}" + (f"; {hint}" if hint else "")
    return {
        "kind": kind,
        "share": share,
        "attempts": attempts,
        "failed": int(len(culprits)),
        "statuses": {str(k): v for k, v in statuses.most_common()},
        "content_types": dict(types.most_common()),
        "http_status": top_status,
        "content_type": content_type,
        "body_sample": body,
        "reason": reason,
        "hint": hint,
    }


def _body_sample(row: pd.Series, secrets: tuple[str, ...]) -> str:
    """The record's redacted body sample; older records only have the error message (redacted here)."""
    detail = str(row.get("error_detail") or "")
    return redact(detail, secrets) if detail else sample(str(row.get("error_message") or ""), secrets)


# --- 1b. the tool's own invalid requests -------------------------------------------------------------
INVALID_REQUEST = "invalid_request"  # records.ErrorClass.INVALID_REQUEST (the value, read back from CSV)
# Above this share the run says nothing about the service. P99 criteria judge the worst 1 % of
# requests; the server refuses the longest prompts (context overflows) first, i.e. exactly the heavy
# requests that make that tail, so with more than 1 % refused the P99 can have been drawn from a
# workload without its tail, and the load the service carried was lighter than the one planned.
INVALID_SHARE = 0.01
# how the engines word a request over the context (REFERENCE-workloads.md section 2)
_CONTEXT_WORDS = ("context", "too long", "longer than", "must have less than", "input tokens", "max_new_tokens")


def invalid_requests(requests: pd.DataFrame, secrets: tuple[str, ...] = ()) -> dict | None:
    """The attempts the server refused as invalid (ErrorClass.INVALID_REQUEST), or None.

    They are excluded from the capacity judgement (analysis/stats/phases.py); here they are counted,
    with the server's own words (redacted, short) and what to change."""
    if not len(requests) or "error_class" not in requests:
        return None
    refused = _judged(requests, (requests["error_class"] == INVALID_REQUEST).to_numpy())
    if refused.empty:
        return None
    attempts = _attempts(requests)
    share = len(refused) / attempts
    words = Counter(sample(str(m), secrets)[:160] for m in refused.get("error_message", pd.Series(dtype=str)))
    said = [w for w, _ in words.most_common(3)]
    if any(w in " ".join(said).lower() for w in _CONTEXT_WORDS):
        hint = (
            "the prompts (with history and max_tokens) did not fit the server's context in its own tokens: "
            "let Loadline discover the context (`loadline run -- --max-context-tokens -1`) and count tokens "
            "exactly (`loadline run -- --tokenizer PATH`, or the server's /tokenize), or lower the lengths "
            "(`loadline run -- --prompt-tokens N`, `-- --prompt-mix`, `-- --max-tokens N`)"
        )
    else:
        hint = (
            "the server refused a request option: check what `loadline run -- --model NAME --max-tokens N "
            "--output-tokens N --ignore-eos` sent"
        )
    unusable = share > INVALID_SHARE
    message = (
        f"{len(refused)} of {attempts} requests ({share:.1%}) were refused by the server as invalid, "
        f"the load tool's own requests, not the service's failures: {'; '.join(repr(w) for w in said)}; {hint}"
    )
    if unusable:
        message += (
            f"; above {INVALID_SHARE:.0%} the run is unusable: the refused requests are the heaviest ones, "
            "so the P99 tail and the load carried are not the planned workload's"
        )
    return {
        "count": int(len(refused)),
        "attempts": attempts,
        "share": share,
        "messages": said,
        "hint": hint,
        "unusable": unusable,
        "message": message,
    }
