"""A request that dies on a reused keep-alive connection before any byte came back is sent again, once.

Servers close idle or finished connections whenever they like; llama.cpp's llama-server closes the
connection right after each streamed response while still announcing `Keep-Alive`. urllib3 checks
a pooled socket before reusing it, but the server's close can arrive just after that check: the
request then meets a socket the server has closed, and fails with RemoteDisconnected or a reset
before any byte of a response. Such a request never reached the server's application, so it is no
server error. Mature clients resend it on a fresh connection (Go's net/http for requests on
reused connections, aiohttp for idempotent ones); so do we, once, and only when:
- the connection had already carried a response (a fresh connection that fails is a real failure);
- the failure is a reset/close/broken pipe before the response's status line.
The resend is counted: `stale_retries` on the connection (taken into the record by `wire_times`),
or a StaleKeepAlive in the chain of the exception when the fresh connection failed too.
"""

from __future__ import annotations

# RemoteDisconnected (EOF where the status line should be) is a ConnectionResetError
STALE_ERRORS = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class StaleKeepAlive(Exception):
    """Marks (as the __cause__) a failure of the fresh connection that replaced a dead kept-alive one."""


class RetryStaleConnection:
    """Mixin for urllib3's HTTPConnectionPool: resend once when a reused connection was already dead."""

    def _make_request(self, conn, *args, **kwargs):  # type: ignore[no-untyped-def]
        sock = getattr(conn, "sock", None)
        reused = sock is not None and sock is getattr(conn, "answered_sock", None)
        try:
            response = super()._make_request(conn, *args, **kwargs)  # type: ignore[misc]
        except STALE_ERRORS as first:
            if not reused:
                raise
            conn.close()  # the next request() connects afresh
            conn.stale_retries = getattr(conn, "stale_retries", 0) + 1
            try:
                response = super()._make_request(conn, *args, **kwargs)  # type: ignore[misc]
            except Exception as second:
                raise second from StaleKeepAlive(f"sent again after {type(first).__name__} on a kept-alive connection")
        conn.answered_sock = conn.sock  # this socket has carried a response: a later failure on it is "reused"
        return response


def stale_retried(chain: list[BaseException]) -> bool:
    """Whether an exception chain (loadline.client.failures.exception_chain) went through a resend."""
    return any(isinstance(e, StaleKeepAlive) for e in chain)


def take_stale_retries(raw) -> int:  # type: ignore[no-untyped-def]
    """Resends the request behind this urllib3 response needed (and clear them for the next one)."""
    connection = getattr(raw, "connection", None)
    count = getattr(connection, "stale_retries", 0)
    if count:
        connection.stale_retries = 0
    return count
