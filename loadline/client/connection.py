"""One keep-alive HTTP/1.1 connection for the token path: the request out in one write, the reply read as it comes.

Why not requests/urllib3 (the first wave's stack): on the per-token path they cost ~0.8 ms of Python
per request and, per token, urllib3's read1 wrapper over http.client's chunk decoding; at 256
streams one core then fell behind the server (docs/benchmarks.md, "Client stacks"). Here the HTTP
framing (status line, headers, chunked and length-delimited bodies) is geventhttpclient's llhttp
parser (C; Locust's own dependency), and this module owns only the socket:
- "sent" is stamped right after the request's one `sendall()` returned (the kernel has the last byte);
- every read is one `recvmsg()` that returns as soon as any bytes arrived; on a plain-TCP socket it
  carries the kernel's receive stamp (kernel_clock.py), so `arrival` is when those bytes reached
  the host, however late a busy generator read them. Over TLS it is `perf_counter()` at the read.
  On a plain-TCP socket the body's reads are made by the process's body reader (`follow`,
  body_reader.py: one greenlet for every body), with the same stamps (`read_ready`);
- the connection is kept for the next request only when the reply's body ended cleanly and the
  server did not ask to close; a kept connection the server closed meanwhile is noticed before
  reuse, and a request that meets a dead one anyway is sent again once (keepalive.py).
Bodies the parser decodes before the caller asks (bytes that came with the headers) keep the
arrival time of the read that brought them.
"""

from __future__ import annotations

import socket
import ssl
import time
from time import perf_counter

import gevent.socket
from geventhttpclient.response import HTTPParseError, HTTPResponse

from loadline import __version__
from loadline.client import body_reader, kernel_clock
from loadline.client.endpoint import Target, dropped, tls_context
from loadline.client.keepalive import STALE_ERRORS, StaleKeepAlive
from loadline.client.stall import StallTimer
from loadline.client.streaming import PULL, Reply
from loadline.client.transport_errors import ConnectError, ConnectTimeout, IncompleteBody, ReadTimeout

READ_SIZE = 65536
# Two clock reads this far apart mean the OS ran something else in between (a read takes ~0.1 us);
# stamps this far outside the request's own time cannot come from a consistent clock.
CLOCKS_APART_S = 0.001


class Response:
    """A reply being read: status and headers at once, the body through `read1()` as it arrives."""

    __slots__ = ("status", "sent_perf", "sent_wall", "headers_at", "connect_ms", "stale_retries", "arrival",
                 "read_delay_max", "read_at", "read_since", "newest_wall", "merges",
                 "_conn", "_sock", "_parser", "_offset", "_kernel", "stall")

    def __init__(self, conn: "Connection", sock: socket.socket, parser: HTTPResponse, sent_perf: float,
                 sent_wall: float, before_perf: float) -> None:
        self._conn, self._sock, self._parser = conn, sock, parser
        self._kernel = conn.kernel
        self.stall = conn.stall  # the connection's read timeout (stall.py)
        self.sent_perf, self.sent_wall = sent_perf, sent_wall
        self._offset = sent_wall - sent_perf  # kernel stamps (wall clock) -> perf_counter()
        self.arrival = 0.0
        self.read_delay_max = 0.0
        # time.time() of the last read, and a time its bytes came after: for the first read, the
        # request's write began (the clock may be read late after the write: _exchange)
        self.read_at = self.read_since = sent_wall - (sent_perf - before_perf)
        self.newest_wall = 0.0  # the last read's kernel stamp (0: none)
        self.merges: list[tuple[float, float, int]] = []  # reads that carried several writes (merged())
        self.connect_ms = 0.0
        self.stale_retries = 0
        self.status = 0
        self.headers_at = 0.0

    def header(self, name: str) -> str:
        """A header's value ("" when absent; the last one when the server sent it twice)."""
        value = self._parser.get(name)
        if isinstance(value, list):
            value = value[-1] if value else ""
        return value or ""

    @property
    def clock(self) -> str:
        """Which clock `arrival` reads: kernel (receive stamps) or user (read time)."""
        return kernel_clock.KERNEL if self._kernel else kernel_clock.USER

    def _recv(self) -> bytes:
        """One read of whatever arrived, stamping `arrival`; b"" at the end of the connection."""
        stall = self.stall
        stall.waiting = True
        called = time.time()
        try:
            if self._kernel:
                data, ancdata, waited = kernel_clock.read_stamped(self._sock, READ_SIZE)
            else:
                data, ancdata, waited = self._sock.recv(READ_SIZE), None, True
        finally:
            stall.waiting = False
        # the bytes of this read came after `read_since`: after the call if it had to wait for them,
        # else (already queued) after the previous read returned
        self._took(data, ancdata, called if waited else self.read_at)
        return data

    def _took(self, data: bytes, ancdata: list | None, since: float) -> None:
        """A read's times: when its bytes arrived (`arrival`), when it was read, how late."""
        self.stall.progress()
        self.read_since = since
        self.read_at = time.time()
        if ancdata is not None:
            wall = self.newest_wall = kernel_clock.stamp_of(ancdata)
            if wall:
                self.arrival = wall - self._offset
                delay = self.read_at - wall
                if delay > self.read_delay_max:
                    self.read_delay_max = delay
            elif data:  # bytes without a stamp (kernel_clock.keep_stamping_on): the read time instead
                self.arrival = perf_counter()
            return
        self.arrival = perf_counter()

    def read_ready(self) -> bool:
        """One read of a socket that is readable, for the body reader (body_reader.py): it never
        waits; False when nothing was there after all."""
        raw = self._sock._sock  # type: ignore[attr-defined]  # the non-blocking socket under gevent's
        try:
            if self._kernel:
                data, ancdata, _, _ = raw.recvmsg(READ_SIZE, kernel_clock.ANC_SPACE)
            else:
                data, ancdata = raw.recv(READ_SIZE), None
        except BlockingIOError:
            return False
        self._took(data, ancdata, self.read_at)  # read as soon as they came, or since the last read
        self._feed(data)
        return True

    @property
    def pushed(self) -> bool:
        """Whether the body reader reads this reply (its head and body): not over TLS, where a
        readable socket need not mean readable bytes, nor when LOADLINE_PUSH_READS=0."""
        return body_reader.ENABLED and not self._conn.target.tls and hasattr(self._sock, "_sock")

    def follow(self, reply: Reply) -> str:
        """The body reader reads this reply's body into `reply` (streaming.read_stream); PULL: the
        caller reads it."""
        return body_reader.reader().follow(self, reply) if self.pushed else PULL

    @property
    def has_head(self) -> bool:
        """The reply's status line and headers are in (a 1xx is not the reply: the real one follows)."""
        parser = self._parser
        return parser.headers_complete and parser.get_code() >= 200

    def use_read_time(self) -> None:
        """Time this reply by read time (the user clock) from now on: its kernel stamps cannot be placed."""
        self._kernel = False
        self.arrival = self.headers_at = perf_counter()
        self.read_delay_max = 0.0

    def merged(self, extra_events: int) -> None:
        """The last read carried `extra_events` content events more than one (streaming.py counts
        them). Every engine writes one per step, so several server writes waited together and all
        carry the newest one's stamp (kernel_clock.py): the oldest waited about `extra_events` steps
        longer than the newest, and at most since `read_since`. Settled when the reply's pace is
        known (`settle_merges`)."""
        newest_wait = self.read_at - self.newest_wall if self.newest_wall else 0.0
        self.merges.append((newest_wait, self.read_at - self.read_since, extra_events))

    def settle_merges(self, gap: float) -> None:
        """Count each merged read's oldest bytes in the read delay: the newest one's wait plus the
        merged steps at the reply's mean gap `gap` (s), never more than the bound. So a first token
        stamped a step late says the generator was behind (seen on a busy CI box: 25.7 ms with a
        read delay below one gap), at about its real size rather than the whole wait for the reply."""
        for newest_wait, bound, extra in self.merges:
            oldest = min(bound, newest_wait + extra * gap) if gap > 0 else bound
            self.read_delay_max = max(self.read_delay_max, oldest)
        self.merges.clear()

    def _feed_next(self) -> None:
        """Read once more and hand the bytes to the parser (raises at a premature end)."""
        try:
            data = self._recv()
        except socket.timeout:
            raise ReadTimeout("no bytes within the read timeout") from None
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        parser = self._parser
        if data:
            parser.feed(data)
            return
        if parser.headers_complete and not parser.message_complete:
            try:
                parser.feed(b"")  # the end of a body delimited by the close of the connection
            except HTTPParseError:
                pass  # a length or chunked body cut short: not complete, raised just below
        if not parser.message_complete:
            raise IncompleteBody("the connection closed before the end of the reply")

    @property
    def decoded(self) -> bytearray:
        """The body bytes the parser has decoded and nobody has taken yet (body_reader.py takes them)."""
        return self._parser._body_buffer

    @property
    def complete(self) -> bool:
        """The whole reply has been read (the body ended the way its headers said it would)."""
        return self._parser.message_complete

    def fileno(self) -> int:
        return self._sock.fileno()

    def read_head(self) -> None:
        parser = self._parser
        if self.pushed:
            body_reader.reader().await_head(self)
        while not parser.headers_complete or parser.get_code() < 200:  # 1xx: the real reply follows
            self._feed_next()
        self.status = parser.get_code()
        self.headers_at = self.arrival

    def read1(self) -> bytes:
        """The body bytes decoded so far or by the next read; b"" when the body has ended."""
        body = self._parser._body_buffer
        while not body:
            if self._parser.message_complete:
                return b""
            self._feed_next()
        data = bytes(body)
        del body[:]
        return data

    def read_all(self, limit: int = 1 << 24) -> bytes:
        """The rest of the body (at most `limit` bytes are kept; reading stops there)."""
        parts: list[bytes] = []
        size = 0
        for _ in range(1 << 20):
            data = self.read1() if size < limit else b""
            if not data:
                break
            parts.append(data)
            size += len(data)
        return b"".join(parts)[:limit]

    def ends_within(self, seconds: float) -> bool:
        """Whether the body ends (with no more content) within `seconds`: then the connection can be reused."""
        sock = self._sock
        try:
            sock.settimeout(seconds)
        except OSError:
            return False
        try:
            return not self.read1()
        except (OSError, HTTPParseError):  # a timeout, a reset, or something that is no end of a body
            return False
        finally:
            try:
                sock.settimeout(None)  # the stall timer keeps the read timeout (stall.py)
            except OSError:
                pass

    def close(self) -> None:
        """Done with this reply: the connection stays open for the next request only if the reply ended cleanly."""
        self.stall.disarm()
        parser = self._parser
        if parser.message_complete and parser.should_keep_alive() and not parser._body_buffer:
            self._conn.answered = True
        else:
            self._conn.close()


class Connection:
    """One keep-alive connection to one target (a user is one browser tab); opened on first use."""

    def __init__(self, base_url: str, connect_timeout: float, read_timeout: float | None,
                 headers: dict[str, str] | None = None, kernel_clock_on: bool = True) -> None:
        self.target = Target.parse(base_url)
        self.connect_timeout = connect_timeout
        self.headers = {"User-Agent": f"loadline/{__version__}", "Accept": "*/*", "Accept-Encoding": "identity",
                        **(headers or {})}
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
        except socket.timeout:
            raise ConnectTimeout(f"no connection within {self.connect_timeout} s") from None
        except OSError as exc:  # refused, unreachable, DNS (gaierror)
            raise ConnectError(f"cannot connect to {t.host}:{t.port}: {exc.strerror or exc}") from exc
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if t.tls:
                sock = tls_context().wrap_socket(sock, server_hostname=t.host)
            self.kernel = self.want_kernel and kernel_clock.enable(sock)
        except socket.timeout:
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
                    raise second from StaleKeepAlive(f"sent again after {type(first).__name__} on a kept-alive "
                                                     "connection")
                response.stale_retries = 1
        except BaseException:  # a timeout or a stop mid-exchange: this socket's state is unknown
            self.close()
            raise
        response.connect_ms, self.pending_connect_ms = self.pending_connect_ms, 0.0
        return response

    def _exchange(self, sock: socket.socket, request: bytes) -> Response:
        stall = self.stall
        stall.arm()
        before = perf_counter()
        stall.waiting = True
        try:
            sock.sendall(request)
        finally:
            stall.waiting = False
        sent_perf, sent_wall = perf_counter(), time.time()
        if perf_counter() - sent_perf > CLOCKS_APART_S:  # preempted between the two clock reads: the
            sent_wall = sent_perf + _wall_minus_perf()  # offset that maps kernel stamps is sampled again
        response = Response(self, sock, HTTPResponse("POST"), sent_perf, sent_wall, before)
        try:
            response.read_head()
        except IncompleteBody:
            if response.arrival:  # bytes came, then the close: not a request that never arrived
                raise
            raise ConnectionResetError("the connection closed before any reply") from None
        if response.clock == kernel_clock.KERNEL and not (
                before - CLOCKS_APART_S <= response.headers_at <= perf_counter() + CLOCKS_APART_S):
            # A reply stamped before its request was written, or in the future: the kernel's clock
            # and this process's time.time() disagree (a stepped wall clock; libfaketime in the
            # cross-host test). Its stamps cannot be placed: this reply is timed at read time.
            response.use_read_time()
        if response.headers_at < sent_perf:
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
