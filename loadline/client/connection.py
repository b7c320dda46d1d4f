"""One keep-alive HTTP/1.1 connection for the token path: the request out in one write, the reply read as it comes.

Why not requests/urllib3 (the first wave's stack): on the per-token path they cost ~0.8 ms of Python
per request and, per token, urllib3's read1 wrapper over http.client's chunk decoding; at 256
streams one core then fell behind the server (docs/benchmarks.md, "Client stacks"). Here the HTTP
framing (status line, headers, chunked and length-delimited bodies) is geventhttpclient's llhttp
parser (C; Locust's own dependency), and this module owns only the socket:
- "sent" is stamped right after the request's one `sendall()` returned (the kernel has the last byte);
- the reply is read as it comes, every read stamped (response.py);
- the connection is kept for the next request only when the reply's body ended cleanly and the
  server did not ask to close; a kept connection the server closed meanwhile is noticed before
  reuse, and a request that meets a dead one anyway is sent again once (keepalive.py).
"""

from __future__ import annotations

import socket
import ssl
import time
from time import perf_counter

import gevent.socket
from geventhttpclient.response import HTTPResponse

from loadline import __version__
from loadline.client import body_reader, kernel_clock
from loadline.client.endpoint import Target, dropped, tls_context
from loadline.client.keepalive import STALE_ERRORS, StaleKeepAlive
from loadline.client.response import READ_SIZE, Response
from loadline.client.stall import StallTimer
from loadline.client.transport_errors import ConnectError, ConnectTimeout, IncompleteBody, ReadTimeout

__all__ = ["READ_SIZE", "ConnectError", "ConnectTimeout", "Connection", "IncompleteBody", "ReadTimeout", "Response"]
# Two clock reads this far apart mean the OS ran something else in between (a read takes ~0.1 us);
# stamps this far outside the request's own time cannot come from a consistent clock.
CLOCKS_APART_S = 0.001


class Connection:
    """One keep-alive connection to one target (a user is one browser tab); opened on first use."""

    def __init__(
        self,
        base_url: str,
        connect_timeout: float,
        read_timeout: float | None,
        headers: dict[str, str] | None = None,
        kernel_clock_on: bool = True,
    ) -> None:
        self.target = Target.parse(base_url)
        self.connect_timeout = connect_timeout
        self.headers = {
            "User-Agent": f"loadline/{__version__}",
            "Accept": "*/*",
            "Accept-Encoding": "identity",
            **(headers or {}),
        }
        self.want_kernel = kernel_clock_on and kernel_clock.AVAILABLE and not self.target.tls
        self.sock: socket.socket | None = None
        self.kernel = False
        self.answered = False  # this socket has carried a reply: a failure on it may be a stale keep-alive
        self.pending_connect_ms = 0.0  # set-up paid by the next request
        self.stall = StallTimer(read_timeout, lambda: ReadTimeout(f"no bytes within {read_timeout} s"))

    def close(self) -> None:
        self.stall.disarm()
        sock, self.sock = self.sock, None
        self.answered = False
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def _connect(self) -> socket.socket:
        t = self.target
        start = perf_counter()
        try:
            sock = gevent.socket.create_connection((t.host, t.port), timeout=self.connect_timeout)
        except TimeoutError:
            raise ConnectTimeout(f"no connection within {self.connect_timeout} s") from None
        except OSError as exc:  # refused, unreachable, DNS (gaierror)
            raise ConnectError(f"cannot connect to {t.host}:{t.port}: {exc.strerror or exc}") from exc
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if t.tls:
                sock = tls_context().wrap_socket(sock, server_hostname=t.host)
            self.kernel = self.want_kernel and kernel_clock.enable(sock)
        except TimeoutError:
            sock.close()
            raise ConnectTimeout(f"no TLS handshake within {self.connect_timeout} s") from None
        except (ssl.SSLError, ssl.CertificateError, OSError) as exc:
            sock.close()
            raise ConnectError(f"TLS handshake with {t.host}:{t.port} failed: {exc}") from exc
        sock.settimeout(None)  # reads and the request's send are bounded by the stall timer (stall.py)
        self.pending_connect_ms += (perf_counter() - start) * 1000
        return sock

    def _usable_socket(self) -> socket.socket:
        sock = self.sock
        if sock is not None and dropped(sock):  # the server closed it while idle (llama-server does)
            self.close()
            sock = None
        if sock is None:
            sock = self.sock = self._connect()
        return sock

    def post(self, path: str, body: bytes, headers: dict[str, str] | None = None) -> Response:
        """Send a POST and read the reply's status and headers; a dead kept-alive socket is replaced once."""
        t = self.target
        lines = [f"POST {t.prefix}{path} HTTP/1.1", f"Host: {t.host_header}", f"Content-Length: {len(body)}"]
        lines.extend(f"{k}: {v}" for k, v in {**self.headers, **(headers or {})}.items())
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
        try:
            sock = self._usable_socket()
            reused = self.answered
            try:
                response = self._exchange(sock, request)
            except STALE_ERRORS as first:
                if not reused:
                    raise
                self.close()
                try:
                    response = self._exchange(self._usable_socket(), request)
                except Exception as second:
                    raise second from StaleKeepAlive(
                        f"sent again after {type(first).__name__} on a kept-alive connection"
                    )
                response.stale_retries = 1
        except BaseException:  # a timeout or a stop mid-exchange: this socket's state is unknown
            self.close()
            raise
        response.connect_ms, self.pending_connect_ms = self.pending_connect_ms, 0.0
        return response

    def _exchange(self, sock: socket.socket, request: bytes) -> Response:
        stall = self.stall
        stall.arm()
        # the reply's first bytes are stamped as they arrive from now on, however late they are read
        watch = body_reader.first_bytes_watch() if self.kernel else None
        if watch is not None:
            watch.watch(sock.fileno(), sock._sock)  # type: ignore[attr-defined]
        before = perf_counter()
        stall.waiting = True
        try:
            sock.sendall(request)
        except BaseException:
            if watch is not None:
                watch.unwatch(sock.fileno())
            raise
        finally:
            stall.waiting = False
        sent_perf, sent_wall = perf_counter(), time.time()
        if perf_counter() - sent_perf > CLOCKS_APART_S:  # preempted between the two clock reads: the
            sent_wall = sent_perf + _wall_minus_perf()  # offset that maps kernel stamps is sampled again
        response = Response(self, sock, HTTPResponse("POST"), sent_perf, sent_wall, before, watch)
        try:
            response.read_head()
        except BaseException as exc:  # the caller closes the connection, not this response: off the watch here
            response.unwatch()
            if isinstance(exc, IncompleteBody) and not response.arrival:  # closed before any byte came back
                raise ConnectionResetError("the connection closed before any reply") from None
            raise
        if response.clock == kernel_clock.KERNEL and not (
            before - CLOCKS_APART_S <= response.headers_at <= perf_counter() + CLOCKS_APART_S
        ):
            # A reply stamped before its request was written, or in the future: the kernel's clock
            # and this process's time.time() disagree (a stepped wall clock; libfaketime in the
            # cross-host test). Its stamps cannot be placed: this reply is timed at read time.
            response.use_read_time()
        if response.clock != kernel_clock.KERNEL and sent_perf - before > CLOCKS_APART_S:
            # Timed at read time (TLS, no kernel stamps, or stamps that could not be placed) and the OS took
            # the CPU away around the write: the server may have had the request for that long before
            # "sent" was read, and no stamp of the reply can say so. The request left after `before`:
            # time it from there, so TTFT is never shorter than the service's (seen: 51 ms on a busy box).
            early = sent_perf - before
            response.sent_perf -= early
            response.sent_wall -= early
        elif response.headers_at < sent_perf:
            # The reply's kernel stamp precedes our "sent" stamp: the OS took the CPU away between the
            # write and the clock read (seen up to 8 ms on a loaded box), and the server answered
            # meanwhile. The request left after `before` and before its reply came, so "sent" moves
            # back to the earlier of the two (TTFB is then never negative); the wall - perf offset stays.
            early = sent_perf - min(before, response.headers_at)
            response.sent_perf -= early
            response.sent_wall -= early
        # The request left somewhere in [before, sent]: a write is ~20 us, so a longer span is the OS
        # running something else around it, and "sent" (hence TTFB, TTFT, E2E) is uncertain by that
        # much. It counts as the generator being late, like a late read (seen: 3-40 ms on a busy box).
        response.read_delay_max = max(response.read_delay_max, sent_perf - before)
        return response


def _wall_minus_perf() -> float:
    """time.time() - perf_counter() from a pair of reads taken close together (the closest of 3)."""
    best, offset = float("inf"), 0.0
    for _ in range(3):
        p1 = perf_counter()
        wall = time.time()
        p2 = perf_counter()
        if p2 - p1 < best:
            best, offset = p2 - p1, wall - (p1 + p2) / 2
    return offset
