"""Transport exceptions -> error classes: the one classification table (like httpx's HTTPCORE_EXC_MAP).

requests wraps urllib3, which wraps the socket and http.client: a refused connection arrives as
requests.ConnectionError(MaxRetryError(reason=NewConnectionError(...))), a dead keep-alive socket
as requests.ConnectionError(ProtocolError("Connection aborted.", RemoteDisconnected(...))). So
`classify` looks at the whole chain, and the table is in order of precedence: the first row that
matches any exception of the chain decides (NewConnectionError is a subclass of
ConnectTimeoutError in urllib3, so "no connection" must come before "timeout").
"""

from __future__ import annotations

import http.client

import requests
from urllib3 import exceptions as u3

from loadline.core.records import ErrorClass

TRANSPORT_ERRORS: tuple[tuple[tuple[type[BaseException], ...], ErrorClass], ...] = (
    # no connection was made: refused, unreachable, DNS (NameResolutionError is a NewConnectionError)
    ((u3.NewConnectionError,), ErrorClass.CONNECT),
    # requests raises its SSLError only from send(), i.e. the TLS handshake; a TLS error mid-stream
    # comes as a bare urllib3 SSLError and falls through to RESET below
    ((requests.exceptions.SSLError,), ErrorClass.CONNECT),
    ((u3.ConnectTimeoutError, u3.ReadTimeoutError, requests.exceptions.Timeout, TimeoutError), ErrorClass.TIMEOUT),
    ((UnicodeDecodeError,), ErrorClass.MALFORMED),  # a body that is not UTF-8 is not an event stream
    # the connection closed or was reset: RemoteDisconnected, IncompleteRead, ConnectionResetError...
    ((http.client.HTTPException, ConnectionError, OSError, u3.HTTPError, requests.exceptions.RequestException),
     ErrorClass.RESET),
)

# what an `except` around network I/O catches (anything else is a client bug: ErrorClass.CLIENT)
TRANSPORT_EXCEPTIONS: tuple[type[BaseException], ...] = tuple(t for types, _ in TRANSPORT_ERRORS for t in types)


def exception_chain(exc: BaseException, limit: int = 8) -> list[BaseException]:
    """exc and what it wraps: urllib3's `reason`, exceptions passed as args, then `raise ... from` causes."""
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
