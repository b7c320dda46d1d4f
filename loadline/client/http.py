"""A requests.Session whose connections remember when a request's last byte left the client.

TTFT and E2E start at "request sent". Stamping before `Session.send()` would add requests' and
urllib3's own ~0.5 ms of Python (more under gevent contention) to every measured latency, so the
connection stamps the clock right after urllib3 wrote the request (a kernel-stamped socket: right
after its own last write, kernel_clock.py), and again when the response headers arrived; the user
reads both back from `response.raw.connection`.

Arrival times: a plain-HTTP connection reads through a kernel-stamped socket (kernel_clock.py), so
`arrival()` is when the last read's bytes reached the host, whenever the generator got round to
reading them. Over TLS (or off Linux) it is `perf_counter()` at the read: the `user` clock.
`LOADLINE_KERNEL_CLOCK=0` forces the user clock everywhere (to compare the two, benchmarks/).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from dataclasses import dataclass
from time import perf_counter

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from loadline.client.keepalive import RetryStaleConnection
from loadline.client.kernel_clock import KERNEL, USER, is_stamped, keep_stamping_on, kernel_stamped

KERNEL_CLOCK = os.environ.get("LOADLINE_KERNEL_CLOCK", "1") != "0" and sys.platform.startswith("linux")
if KERNEL_CLOCK:
    keep_stamping_on()


class _Stamped:
    before_perf = 0.0  # just before urllib3 started writing the request
    sent_perf = 0.0
    sent_wall = 0.0
    headers_perf = 0.0
    connect_ms = 0.0  # TCP (+ TLS) set-up not yet charged to a request (wire_times takes it)

    def connect(self):  # type: ignore[no-untyped-def]
        start = perf_counter()
        super().connect()  # type: ignore[misc]
        self.connect_ms = (perf_counter() - start) * 1000

    def request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.before_perf = perf_counter()
        super().request(*args, **kwargs)  # type: ignore[misc]
        sock = self.sock  # type: ignore[attr-defined]
        if is_stamped(sock) and sock.sent_perf >= self.before_perf:
            # the socket's own stamp right after its last write (kernel_clock.py)
            self.sent_perf, self.sent_wall = sock.sent_perf, sock.sent_wall
        else:
            self.sent_perf, self.sent_wall = perf_counter(), time.time()
        if is_stamped(sock):  # nothing of this response has been read yet
            sock.kernel_wall = sock.read_delay_max = 0.0

    def getresponse(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        response = super().getresponse(*args, **kwargs)  # type: ignore[misc]
        self.headers_perf = self.arrival()
        if self.headers_perf < self.sent_perf:
            # The reply's kernel stamp precedes our "sent" stamp: the OS took the CPU away between
            # the write and the clock read (seen up to 8 ms on a loaded box, 20x time scale), and the
            # server answered meanwhile. The request left after the stamp taken before the write and
            # before its reply came, so "sent" moves back to that earlier stamp (off by urllib3's
            # ~0.5 ms of Python, not by the whole preemption), or to the reply's stamp when the OS
            # took the CPU before the write too (TTFB 0, never negative). Clamping to the reply
            # alone made TTFT ~0 when the first token came with the headers (real llama-server: a
            # TTFT of 0.00005 ms against the server's own prompt_ms ~30 ms). The offset wall - perf
            # is kept.
            # Exact would be the kernel's TX stamp (SO_TIMESTAMPING, read from the error queue); not
            # taken: a stamp queued after our drain (deferred transmit, retransmit) makes epoll report
            # the socket readable until drained, so a waiting greenlet would spin (docs/benchmarks.md).
            early = self.sent_perf - min(self.before_perf, self.headers_perf) if self.before_perf else \
                self.sent_perf - self.headers_perf
            self.sent_perf -= early
            self.sent_wall -= early
        return response

    @property
    def clock(self) -> str:
        """Which clock `arrival()` reads on this connection: kernel or user."""
        return KERNEL if is_stamped(self.sock) else USER  # type: ignore[attr-defined]

    def arrival(self) -> float:
        """perf_counter() time at which the bytes of the last read reached the host.

        The kernel's receive stamp (wall clock) is moved onto perf_counter() with the offset
        sampled when this request was sent; without one, the moment of the call.
        """
        wall = getattr(self.sock, "kernel_wall", 0.0)  # type: ignore[attr-defined]
        if wall:
            return wall - self.sent_wall + self.sent_perf
        return perf_counter()



class StampedHTTPConnection(_Stamped, HTTPConnection):
    def _new_conn(self):  # type: ignore[no-untyped-def]
        sock = super()._new_conn()
        return (kernel_stamped(sock) if KERNEL_CLOCK else None) or sock


class StampedHTTPSConnection(_Stamped, HTTPSConnection):
    pass


class _HTTPPool(RetryStaleConnection, HTTPConnectionPool):
    ConnectionCls = StampedHTTPConnection


class _HTTPSPool(RetryStaleConnection, HTTPSConnectionPool):
    ConnectionCls = StampedHTTPSConnection


class StampedAdapter(HTTPAdapter):
    def init_poolmanager(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}


def stamped_session() -> requests.Session:
    """One keep-alive connection per session (a user is one browser tab), no automatic retries
    (except the one resend of a request that met a dead kept-alive connection: keepalive.py)."""
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
    clock: str  # kernel or user: where headers_perf (and the stream's arrival times) came from


def wire_times(response: requests.Response) -> WireTimes | None:
    """When the request left and the headers came back, if the connection recorded it."""
    connection = getattr(response.raw, "connection", None)
    perf = getattr(connection, "sent_perf", 0.0)
    if not perf:
        return None
    # urllib3 connects inside request() (plain HTTP) or just before it (TLS): either way the set-up
    # since the last request belongs to this one
    connect_ms, connection.connect_ms = connection.connect_ms, 0.0
    return WireTimes(perf, connection.sent_wall, connection.headers_perf, connect_ms, connection.clock)


def kernel_reads(raw) -> tuple[socket.socket, float] | None:  # type: ignore[no-untyped-def]
    """(socket, wall - perf offset of this request) when a urllib3 response is read through a
    kernel-stamped socket: each read's arrival is `sock.kernel_wall - offset` in perf_counter()
    time (0 = no stamp yet), and `sock.read_delay_max` how late the generator read."""
    connection = getattr(raw, "connection", None)
    sock = getattr(connection, "sock", None)
    if not isinstance(connection, _Stamped) or not is_stamped(sock):
        return None
    return sock, connection.sent_wall - connection.sent_perf
