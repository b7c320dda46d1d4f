"""A reply being read as it comes: status and headers, then the body, each read stamped.

Every read is one `recvmsg()` that returns as soon as any bytes arrived; on a plain-TCP socket it
carries the kernel's receive stamp (kernel_clock.py), so `arrival` is when those bytes reached the
host, however late a busy generator read them. Over TLS it is `perf_counter()` at the read. On a
plain-TCP socket the head and body are read by the process's body reader (`follow`, body_reader.py:
one greenlet for every body), with the same stamps (`read_ready`); the first bytes of a reply are
watched from its request's send until its first token by an OS thread that stamps them as they
arrive (first_bytes.py), unless that thread rests (watch_budget.py) or LOADLINE_FIRST_BYTES_WATCH=0.
Bodies the parser decodes before the caller asks (bytes that came with the headers) keep the
arrival time of the read that brought them.
"""

from __future__ import annotations

import socket
import time
from time import perf_counter
from typing import TYPE_CHECKING

from geventhttpclient._parser import HTTPResponseParser
from geventhttpclient.response import HTTPParseError, HTTPResponse

from loadline.client import body_reader, kernel_clock
from loadline.client.first_bytes import FirstBytesWatch
from loadline.client.idle_clock import IdleClock
from loadline.client.streaming import PULL, Reply
from loadline.client.transport_errors import IncompleteBody, ReadTimeout
from loadline.core.kernel_stamps import ANC_SPACE, stamp_of

if TYPE_CHECKING:  # the connection makes its responses; a response only reads its fields
    from loadline.client.connection import Connection

READ_SIZE = 65536
_parse = HTTPResponseParser.feed  # a reply to POST, never to HEAD: no need of the subclass's wrapper


class Response:
    """A reply being read: status and headers at once, the body through `read1()` as it arrives."""

    __slots__ = (
        "status",
        "sent_perf",
        "sent_wall",
        "headers_at",
        "connect_ms",
        "stale_retries",
        "arrival",
        "read_delay_max",
        "read_at",
        "read_since",
        "newest_wall",
        "merges",
        "_conn",
        "_sock",
        "_parser",
        "_offset",
        "_kernel",
        "stall",
        "watch",
        "_fd",
        "idle",
        "idle_first",
        "idle_last",
        "held_busy",
    )

    def __init__(
        self,
        conn: Connection,
        sock: socket.socket,
        parser: HTTPResponse,
        sent_perf: float,
        sent_wall: float,
        before_perf: float,
        watch: FirstBytesWatch | None = None,
    ) -> None:
        self._conn, self._sock, self._parser = conn, sock, parser
        self.watch = watch  # stamping its first bytes as they arrive, until `unwatch` (first_bytes.py)
        self._fd = sock.fileno() if watch is not None else -1  # as watched: the socket may be closed first
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
        # the body reader's clock of its empty looks, and which of them saw this reply on its set
        # (idle_clock.py; set while the reader follows it, None once this reply is read the pull way)
        self.idle: IdleClock | None = None
        self.idle_first = self.idle_last = 0
        self.held_busy: float | None = None  # that bound for the bytes that came with the head (hold_idle)
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

    def unwatch(self) -> None:
        if self.watch is not None:
            self.watch.unwatch(self._fd)
            self.watch = None

    def _recv(self) -> bytes:
        """One read of whatever arrived, stamping `arrival`; b"" at the end of the connection."""
        if self.watch is not None:  # read here, not by the body reader: the peeks' counts would not hold
            self.unwatch()
        self.idle = None  # the reader's empty looks say nothing of a socket it does not follow
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

    def _took(self, data: bytes, ancdata: list | None, since: float, peeked: float = 0.0) -> None:
        """A read's times: when its bytes arrived (`arrival`), when it was read, how late. `peeked`: the
        stamp a look at these bytes saw before they merged with later ones (first_bytes.py)."""
        now = perf_counter()
        self.stall.last_progress = now
        self.read_since = since
        read_at = self.read_at = time.time()  # the stamps' clock: a read delay holds across a clock step
        if ancdata is None:
            self.arrival = now
            return
        wall = stamp_of(ancdata)
        if peeked and (peeked < wall or not wall):
            wall = peeked
        self.newest_wall = wall
        if wall:
            self.arrival = wall - self._offset
            delay = read_at - wall
            if delay > self.read_delay_max:
                self.read_delay_max = delay
        elif data:  # bytes without a stamp (kernel_clock.keep_stamping_on): the read time instead
            self.arrival = now

    def read_ready(self, size: int = READ_SIZE, peeked: float = 0.0, since: float = 0.0) -> bool:
        """One read of at most `size` bytes of a socket that is readable, for the body reader
        (body_reader.py): it never waits; False when nothing was there after all. `peeked`: those
        bytes' stamp when they were looked at before (first_bytes.py); `since`: a time (time.time())
        they came after, when earlier than the previous read (the previous piece's peek)."""
        raw = self._sock._sock  # type: ignore[attr-defined]  # the non-blocking socket under gevent's
        try:
            if self._kernel:
                data, ancdata, _, _ = raw.recvmsg(size, ANC_SPACE)
            else:
                data, ancdata = raw.recv(size), None
        except BlockingIOError:
            return False
        self._took(data, ancdata, since or self.read_at, peeked)  # read as soon as they came, or since the last read
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
        self.unwatch()
        self.arrival = self.headers_at = perf_counter()
        self.read_delay_max = 0.0

    def merged(self, extra_events: int) -> None:
        """The last read carried `extra_events` content events more than one (streaming.py counts
        them). Every engine writes one per step, so several server writes may have waited together,
        all under the newest one's stamp (kernel_clock.py): the oldest waited about `extra_events`
        steps longer than the newest, at most since `read_since`, and at most as long as the process
        was busy since the body reader last saw this socket empty (idle_clock.py: a server that wrote
        them together to an idle generator gives ~0). Settled when the reply's pace is known
        (`settle_merges`)."""
        newest_wait = self.read_at - self.newest_wall if self.newest_wall else 0.0
        bound = self.read_at - self.read_since
        busy = self.held_busy
        if busy is None and self.idle is not None:
            busy = self.idle.busy_since(self.idle_first, self.idle_last)
        if busy is not None and busy < bound:
            bound = busy
        self.merges.append((newest_wait, bound, extra_events))

    def hold_idle(self) -> None:
        """Keep the idle clock's bound of the read that brought the head for the body bytes that came
        with it: their events are counted later, by the reply's user, after the reader's next looks."""
        self.held_busy = self.idle.busy_since(self.idle_first, self.idle_last) if self.idle is not None else None

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
        except TimeoutError:
            raise ReadTimeout("no bytes within the read timeout") from None
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        parser = self._parser
        if data:
            _parse(parser, data)  # the C parser itself: HTTPResponse.feed only adds HEAD's case
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
        self.unwatch()
        parser = self._parser
        if parser.message_complete and parser.should_keep_alive() and not parser._body_buffer:
            self._conn.answered = True
        else:
            self._conn.close()
