"""Transport exceptions -> error classes: the one classification table (like httpx's HTTPCORE_EXC_MAP).

The token path's connection (connection.py) raises its own ConnectError / ConnectTimeout /
ReadTimeout / IncompleteBody, the parser raises HTTPParseError (an http.client.HTTPException), the
socket raises OSErrors; a failure on a fresh connection that replaced a dead kept-alive one carries
the first failure in its chain. So `classify` looks at the whole chain, and the table is in order
of precedence: the first row that matches any exception of the chain decides.
"""

from __future__ import annotations

import http.client
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
