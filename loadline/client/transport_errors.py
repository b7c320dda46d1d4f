"""The token path's transport failures, by phase: what failures.py's table classifies.

Connect and read failures are told apart by the phase they happen in, since the socket raises
the same OSErrors (refused, reset, timed out) in both.
"""

from __future__ import annotations


class ConnectError(OSError):
    """No connection: refused, unreachable, unknown host, or a failed TLS handshake."""


class ConnectTimeout(TimeoutError):
    """No connection within the connect timeout."""


class ReadTimeout(TimeoutError):
    """No bytes within the read timeout (no reply, or a stalled stream)."""


class IncompleteBody(ConnectionError):
    """The connection closed before the end of the reply."""
