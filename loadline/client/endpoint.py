"""Where the token path's requests go: the target's address, parsed once, and how a connection to it is checked.

connection.py owns the exchange; these are the pieces around it that know nothing of a request.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from gevent.monkey import get_original

_select = get_original("select", "select")  # a zero-timeout poll: no need to go through the hub


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    tls: bool
    host_header: str
    prefix: str  # the base URL's path, put before every request path

    @classmethod
    def parse(cls, base_url: str) -> Target:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        tls = parts.scheme == "https"
        port = parts.port or (443 if tls else 80)
        return cls(parts.hostname, port, tls, parts.netloc.rsplit("@", 1)[-1], parts.path.rstrip("/"))


def dropped(sock: socket.socket) -> bool:
    """An idle kept-alive socket that is readable was closed by the server (or sent junk): not reusable."""
    try:
        readable, _, _ = _select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


_tls: list[ssl.SSLContext] = []


def tls_context() -> ssl.SSLContext:
    """The system's trust store (SSL_CERT_FILE / SSL_CERT_DIR are honoured by OpenSSL); made once."""
    if not _tls:
        _tls.append(ssl.create_default_context())
    return _tls[0]
