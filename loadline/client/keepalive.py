"""A request that dies on a reused keep-alive connection before any byte came back is sent again, once.

Servers close idle or finished connections whenever they like; llama.cpp's llama-server closes the
connection right after each streamed response while still announcing `Keep-Alive`. The connection
checks a kept socket before reusing it (connection.py), but the server's close can arrive just after that check: the
request then meets a socket the server has closed, and fails with an end of connection or a reset
before any byte of a response. Such a request never reached the server's application, so it is no
server error. Mature clients resend it on a fresh connection (Go's net/http for requests on
reused connections, aiohttp for idempotent ones); so do we, once, and only when:
- the connection had already carried a response (a fresh connection that fails is a real failure);
- the failure is a reset/close/broken pipe before the response's status line.
The resend is counted: `stale_retries` on the response (taken into the record), or a StaleKeepAlive
in the chain of the exception when the fresh connection failed too. Connection.post does the resend.
"""

from __future__ import annotations

# an end of the connection where the status line should be is raised as a ConnectionResetError
STALE_ERRORS = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class StaleKeepAlive(Exception):
    """Marks (as the __cause__) a failure of the fresh connection that replaced a dead kept-alive one."""


def stale_retried(chain: list[BaseException]) -> bool:
    """Whether an exception chain (loadline.client.failures.exception_chain) went through a resend."""
    return any(isinstance(e, StaleKeepAlive) for e in chain)
