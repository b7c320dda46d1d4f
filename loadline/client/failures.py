"""Transport exceptions -> error classes: the one classification table (like httpx's HTTPCORE_EXC_MAP).

The token path's connection (connection.py) raises its own ConnectError / ConnectTimeout /
ReadTimeout / IncompleteBody, the parser raises HTTPParseError (an http.client.HTTPException), the
socket raises OSErrors; a failure on a fresh connection that replaced a dead kept-alive one carries
the first failure in its chain. So `classify` looks at the whole chain, and the table is in order
of precedence: the first row that matches any exception of the chain decides.
"""

from __future__ import annotations

import http.client
import re
import socket
import ssl

from loadline.client.transport_errors import ConnectError, ConnectTimeout, ReadTimeout
from loadline.core.records import ErrorClass

TRANSPORT_ERRORS: tuple[tuple[tuple[type[BaseException], ...], ErrorClass], ...] = (
    # no connection was made: refused, unreachable, DNS, TLS handshake
    ((ConnectError, socket.gaierror), ErrorClass.CONNECT),
    ((ConnectTimeout, ReadTimeout, TimeoutError), ErrorClass.TIMEOUT),
    ((UnicodeDecodeError,), ErrorClass.MALFORMED),  # a body that is not UTF-8 is not an event stream
    # the connection closed or was reset mid-reply, a broken HTTP reply, a TLS error mid-stream
    ((http.client.HTTPException, ssl.SSLError, ConnectionError, OSError), ErrorClass.RESET),
)

# what an `except` around network I/O catches (anything else is a client bug: ErrorClass.CLIENT)
TRANSPORT_EXCEPTIONS: tuple[type[BaseException], ...] = tuple(t for types, _ in TRANSPORT_ERRORS for t in types)


def exception_chain(exc: BaseException, limit: int = 8) -> list[BaseException]:
    """exc and what it wraps: a `reason`, exceptions passed as args, then `raise ... from` causes."""
    chain: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo and len(chain) < limit:
        current = todo.pop(0)
        if any(current is seen for seen in chain):
            continue
        chain.append(current)
        inner = [getattr(current, "reason", None), *current.args, current.__cause__]
        todo.extend(e for e in inner if isinstance(e, BaseException))
    return chain


def classify(exc: BaseException) -> ErrorClass:
    """The error class of a transport exception (CLIENT when it is not one: a bug on our side)."""
    chain = exception_chain(exc)
    for types, error_class in TRANSPORT_ERRORS:
        if any(isinstance(e, types) for e in chain):
            return error_class
    return ErrorClass.CLIENT


# --- refusals of the request itself -----------------------------------------------------------------
# A server refuses a request it finds invalid with 400 (vLLM, SGLang, llama.cpp, OpenAI), 422 (TGI's
# validation) or 413 (a body over a gateway's limit), and says why in its body; the same words arrive
# inside a stream when the refusal comes after the 200 (llama-cpp-python). What each engine says
# for a prompt over the context (REFERENCE-workloads.md section 2) and for a bad parameter:
INVALID_REQUEST_STATUSES = (400, 413, 422)
_INVALID_WORDS = re.compile(
    r"context (?:length|size|window)"  # vLLM, SGLang, llama.cpp, llama-cpp-python, OpenAI
    r"|exceed_context_size_error|context_length_exceeded|invalid_request_error"  # error types and codes
    r"|must have less than \d+ tokens|must be <= \d+"  # TGI's validation
    r"|too large|too long|longer than|must be|is required|invalid|not supported|unsupported"  # bad parameters
    r"|\"(?:error_type|type)\"\s*:\s*\"(?:validation|BadRequest(?:Error)?)\"",
    re.IGNORECASE,
)


def invalid_request(status: int, body: str) -> bool:
    """Whether a refusal says the request itself was invalid (ErrorClass.INVALID_REQUEST): an HTTP
    400/413/422 (or an error inside a stream, status 200) whose body says so. A 400 with no words
    (llama-cpp-python's refusal of a non-UUID request id) stays `http`: nothing says what was wrong."""
    return (status in INVALID_REQUEST_STATUSES or status == 200) and bool(_INVALID_WORDS.search(body or ""))
