"""A minimal HTTP/1.1 server connection on a raw asyncio Protocol (keep-alive, chunked responses).

Why not a web framework: the hot path is one socket write per connection per engine step, and the
frameworks we measured add per-chunk overhead that kept the simulator under its 20,000 chunks/s
goal (docs/benchmarks.md). Requests are small JSON bodies with Content-Length; one request is
served at a time per connection (bytes of a pipelined next request wait in the buffer).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Protocol, cast

from loadline.simulator.kernel_rx import KernelReader

MAX_HEAD = 64 * 1024
MAX_BODY = 16 * 1024 * 1024
STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\nServer: loadline-sim\r\n\r\n"
)
LAST_CHUNK = b"0\r\n\r\n"


@dataclass(slots=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes
    keep_alive: bool
    peer: str
    received_at: float = 0.0  # time.time() clock: when its last byte reached the host (kernel stamp)


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Handler(Protocol):
    def on_connect(self, conn: Connection) -> None: ...
    def handle(self, conn: Connection, request: Request) -> None: ...
    def on_bad_request(self, conn: Connection, error: BadRequest) -> None: ...
    def on_close(self, conn: Connection) -> None: ...


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def response(
    status: int,
    body: bytes,
    content_type: str = "application/json",
    extra: dict[str, str] | None = None,
    keep_alive: bool = True,
) -> bytes:
    reason = HTTPStatus(status).phrase
    lines = [f"HTTP/1.1 {status} {reason}", f"Content-Length: {len(body)}", "Server: loadline-sim"]
    if content_type:  # "" = none, like a bare Starlette Response(status_code=400)
        lines.insert(1, f"Content-Type: {content_type}")
    if not keep_alive:
        lines.append("Connection: close")
    lines.extend(f"{k}: {v}" for k, v in (extra or {}).items())
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def parse_head(head: bytes, peer: str) -> tuple[Request, int]:
    """Request line + headers -> (request without body, content length)."""
    try:
        lines = head.decode("latin-1").split("\r\n")
        method, path, version = lines[0].split(" ")
    except ValueError:
        raise BadRequest(400, "malformed request line") from None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise BadRequest(400, "malformed header line")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise BadRequest(411, "chunked request bodies are not supported; send Content-Length")
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise BadRequest(400, "invalid Content-Length") from None
    if length < 0 or length > MAX_BODY:
        raise BadRequest(413, f"body larger than {MAX_BODY} bytes")
    connection = headers.get("connection", "").lower()
    keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
    return Request(method, path.split("?", 1)[0], headers, b"", keep_alive, peer), length


class Connection(asyncio.Protocol):
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.busy = False  # a response is in progress
        self.closed = False
        self.keep_alive = True
        self.peer = ""
        self.on_lost: Callable[[], None] | None = None  # set while a stream is in flight
        self.rejected = False  # gateway cap: answer the first request with 503, then close
        self.held = False  # slow accept: bytes are buffered but not served until released
        self.continued = False  # "100 Continue" already sent for the request being received
        self.closing = False  # close_soon() was called: serve nothing more
        self.reader: KernelReader | None = None
        # (end offset in `buffer`, stamp) of each read still buffered: a request's arrival is the
        # stamp of the read that brought its last byte, even when it is served later (held, pipelined)
        self.stamps: list[tuple[int, float]] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream server's: a Transport
        peer = transport.get_extra_info("peername")
        self.peer = peer[0] if peer else ""
        self.reader = KernelReader.attach(self.transport, self)  # simulator/kernel_rx.py: why
        self.handler.on_connect(self)

    def data_received(self, data: bytes) -> None:
        """The transport's own read (no kernel reader here): the bytes arrived about now."""
        self.stamped_data(data, time.time())

    def stamped_data(self, data: bytes, stamp: float) -> None:
        if self.closing:
            return  # read and dropped: the request never reaches the application
        self.buffer += data
        self.stamps.append((len(self.buffer), stamp or time.time()))
        if len(self.buffer) > MAX_HEAD + MAX_BODY:
            self.close()
            return
        self._serve_buffered()

    def hold(self, seconds: float) -> None:
        """Serve nothing on this connection for `seconds` (a slow accept, as seen by the client)."""
        self.held = True
        asyncio.get_running_loop().call_later(seconds, self._release)

    def _release(self) -> None:
        self.held = False
        self._serve_buffered()

    def _serve_buffered(self) -> None:
        while not self.busy and not self.closed and not self.held and not self.closing:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > MAX_HEAD:
                    self._bad(BadRequest(431, "request head too large"))
                return
            try:
                request, length = parse_head(bytes(self.buffer[:end]), self.peer)
            except BadRequest as exc:
                self._bad(exc)
                return
            if len(self.buffer) < end + 4 + length:
                if request.headers.get("expect", "").lower() == "100-continue" and not self.continued:
                    self.continued = True  # curl waits a second for this before sending a large body
                    self.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                return
            self.continued = False
            request.body = bytes(self.buffer[end + 4 : end + 4 + length])
            request.received_at = self._consume(end + 4 + length)
            self.busy = True
            self.keep_alive = request.keep_alive
            try:
                self.handler.handle(self, request)
            except Exception as exc:  # a simulator bug must cost one request, not the connection loop
                print(f"loadline-sim: internal error on {request.method} {request.path}: {exc!r}", file=sys.stderr)
                self.keep_alive = False
                self.write(
                    response(
                        500,
                        b'{"error":{"message":"internal simulator error","type":'
                        b'"InternalServerError","param":null,"code":500}}',
                        keep_alive=False,
                    )
                )
                self.finish_response()

    def _consume(self, n: int) -> float:
        """Drop the first `n` buffered bytes; the stamp of the read that brought the last of them."""
        del self.buffer[:n]
        stamp = next(t for end, t in self.stamps if end >= n)
        self.stamps = [(end - n, t) for end, t in self.stamps if end > n]
        return stamp

    def _bad(self, error: BadRequest) -> None:
        self.busy, self.keep_alive = True, False
        self.buffer.clear()
        self.stamps.clear()
        self.handler.on_bad_request(self, error)

    def write(self, data: bytes) -> None:
        if not self.closed:
            self.transport.write(data)  # type: ignore[union-attr]  # set by connection_made; no check per chunk

    def finish_response(self) -> None:
        """The current response is complete: close or serve the next buffered request."""
        self.busy = False
        self.on_lost = None
        if not self.keep_alive:
            self.close()
        elif self.buffer:
            self._serve_buffered()

    def close_soon(self, delay: float) -> None:
        """Serve nothing more and close after `delay` seconds (simulator/quirks.py, close-after-stream)."""
        self.closing = True
        self.buffer.clear()
        self.stamps.clear()
        asyncio.get_running_loop().call_later(delay, self.close)

    def close(self) -> None:
        if not self.closed and self.transport is not None:
            self.closed = True
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.reader is not None:
            self.reader.close()
        if self.on_lost is not None:
            callback, self.on_lost = self.on_lost, None
            callback()
        self.handler.on_close(self)
