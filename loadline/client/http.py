"""A requests.Session whose connections remember when a request's last byte left the client.

TTFT and E2E start at "request sent". Stamping before `Session.send()` would add requests' and
urllib3's own ~0.5 ms of Python (more under gevent contention) to every measured latency, so the
connection stamps the clock right after urllib3 wrote the request, and again when the response
headers were parsed; the user reads both back from `response.raw.connection`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from time import perf_counter

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool


class _Stamped:
    sent_perf = 0.0
    sent_wall = 0.0
    headers_perf = 0.0
    connect_ms = 0.0  # TCP (+ TLS) set-up not yet charged to a request (wire_times takes it)

    def connect(self):  # type: ignore[no-untyped-def]
        start = perf_counter()
        super().connect()  # type: ignore[misc]
        self.connect_ms = (perf_counter() - start) * 1000

    def request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        super().request(*args, **kwargs)  # type: ignore[misc]
        self.sent_perf = perf_counter()
        self.sent_wall = time.time()

    def getresponse(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        response = super().getresponse(*args, **kwargs)  # type: ignore[misc]
        self.headers_perf = perf_counter()
        return response


class StampedHTTPConnection(_Stamped, HTTPConnection):
    pass


class StampedHTTPSConnection(_Stamped, HTTPSConnection):
    pass


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = StampedHTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = StampedHTTPSConnection


class StampedAdapter(HTTPAdapter):
    def init_poolmanager(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}


def stamped_session() -> requests.Session:
    """One keep-alive connection per session (a user is one browser tab), no automatic retries."""
    session = requests.Session()
    adapter = StampedAdapter(pool_connections=1, pool_maxsize=1, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


@dataclass(frozen=True)
class WireTimes:
    sent_perf: float  # perf_counter() when the request's last byte was written
    sent_wall: float  # time.time() at the same moment
    headers_perf: float  # perf_counter() when the response headers were parsed
    connect_ms: float  # connection set-up this request paid before t0 (0 on a kept-alive connection)


def wire_times(response: requests.Response) -> WireTimes | None:
    """When the request left and the headers came back, if the connection recorded it."""
    connection = getattr(response.raw, "connection", None)
    perf = getattr(connection, "sent_perf", 0.0)
    if not perf:
        return None
    # urllib3 connects inside request() (plain HTTP) or just before it (TLS): either way the set-up
    # since the last request belongs to this one
    connect_ms, connection.connect_ms = connection.connect_ms, 0.0
    return WireTimes(perf, connection.sent_wall, connection.headers_perf, connect_ms)
