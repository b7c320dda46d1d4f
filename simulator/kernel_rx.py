"""Read a connection's bytes with recvmsg, so the truth's `arrival` is when the request reached the host.

Why: asyncio transports read with recv(), which drops the kernel's receive stamp, and the
simulator's own clock at parse time lags the bytes whenever its process is busy or descheduled.
That lag is truth-side error in every TTFT and E2E the tests compare as durations (first_token -
arrival): 2-9 ms at p99 in the 64-stream spine scenario on a busy 2-core box, measured against a wire
capture (benchmarks/truth_vs_wire.py), more than the spine test's 5 ms bar. The first_token and
last_token stamps need nothing of the kind: both loops hand a write to the kernel inside
transport.write() when nothing is queued before it (measured 5-50 us from stamp to wire).

How: the transport's reading is paused at connection_made and a duplicate descriptor of the same
socket is read here; each read goes to the protocol with the kernel's stamp of its newest segment
(SO_TIMESTAMPNS, CLOCK_REALTIME: time.time()'s clock). Writes and closing stay with the transport.
Not Linux, no socket, or no descriptor left: None, and the transport reads as before (the caller
then stamps with time.time()).
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Protocol

from loadline.core.kernel_stamps import ANC_SPACE, LINUX, request_stamps, stamp_of

READ_SIZE = 256 * 1024  # asyncio's selector transport reads this much at a time too


class StampedReceiver(Protocol):
    def stamped_data(self, data: bytes, stamp: float) -> None: ...


def enable(sock: socket.socket) -> bool:
    """Ask for receive stamps. On a listening socket this also keeps the kernel's (lazily switched)
    stamping on for the server's lifetime, and every accepted socket inherits the option."""
    return request_stamps(sock)


class KernelReader:
    __slots__ = ("loop", "sock", "transport", "receiver")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        transport: asyncio.Transport,
        receiver: StampedReceiver,
    ) -> None:
        self.loop, self.sock, self.transport, self.receiver = loop, sock, transport, receiver

    @classmethod
    def attach(cls, transport: asyncio.Transport, receiver: StampedReceiver) -> KernelReader | None:
        """Take over the reading of `transport`'s socket; None when it cannot (the transport keeps reading)."""
        raw = transport.get_extra_info("socket") if LINUX else None
        if raw is None:
            return None
        try:
            sock = socket.socket(fileno=os.dup(raw.fileno()))
        except OSError:  # EMFILE: fall back rather than refuse the connection
            return None
        reader = cls(asyncio.get_running_loop(), sock, transport, receiver)
        try:
            sock.setblocking(False)
            if not enable(sock):
                raise OSError("no receive stamps")
            reader.loop.add_reader(sock.fileno(), reader._on_readable)
        except (OSError, RuntimeError, NotImplementedError):
            sock.close()
            return None
        transport.pause_reading()  # from now on only this reader consumes the socket's bytes
        # uvloop starts reading right after connection_made whatever it was told (stdlib asyncio
        # honours the pause): pause again, one loop turn later. Bytes it reads in between reach
        # data_received unstamped, hence the stdlib default of loadline/commands/sim.py.
        reader.loop.call_soon(reader._keep_paused)
        return reader

    def _keep_paused(self) -> None:
        if not self.transport.is_closing():
            self.transport.pause_reading()

    def _on_readable(self) -> None:
        try:
            data, ancdata, _, _ = self.sock.recvmsg(READ_SIZE, ANC_SPACE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # reset by the peer: what the transport's own read would make of it
            self.close()
            self.transport.abort()
            return
        if not data:  # the peer closed its side: close ours, as the transport does without eof_received
            self.close()
            self.transport.close()
            return
        self.receiver.stamped_data(data, stamp_of(ancdata))

    def close(self) -> None:
        if self.sock.fileno() >= 0:
            self.loop.remove_reader(self.sock.fileno())
            self.sock.close()
