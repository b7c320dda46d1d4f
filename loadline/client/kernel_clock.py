"""Token arrival times from the kernel: every read of a plain-TCP socket carries its receive time.

A busy generator reads its sockets late, and a stamp taken when `read()` returns measures the
generator, not the server. On Linux the kernel stamps each incoming TCP segment when it reaches the
host (SO_TIMESTAMPNS) and hands the stamp over with the bytes when they are read with `recvmsg`.
`kernel_stamped(sock)` re-wraps a freshly connected socket in a subclass of its own class (stdlib or
gevent) whose `recv_into` reads with `recvmsg_into` and remembers the stamp of the last read. The
HTTP stack (http.client's buffered reader over `SocketIO`, which only ever calls `recv_into`) is
unchanged: bytes handed out by the buffer always come from the most recent `recv_into`, so that
read's stamp is their arrival time.

What the kernel can and cannot tell (measured on Linux 6.18, loopback):
- A read that carries one segment gets that segment's exact receive time, however late it is read.
- Segments that wait together in the receive queue are merged by TCP (receive coalescing) and the
  merged buffer keeps only the *newest* segment's stamp. So when the generator falls behind by
  more than one server write, the last event of the read is stamped exactly and the earlier ones
  get that same, later time (their true arrival lies between the previous read's stamp and this).
  `read_delay_max` (how long the newest bytes of a read waited in the socket) says when that
  happened: below one inter-token gap, every stamp is exact.
- Over TLS the kernel sees only ciphertext records: no stamps; the caller keeps user-space stamps.

The stamps are CLOCK_REALTIME (`time.time()`'s clock); callers convert them to `perf_counter()`
with an offset sampled once per request (a wall-clock step inside one request would shift them).
"""

from __future__ import annotations

import socket
import struct
import sys
from time import perf_counter, time

# linux/asm-generic/socket.h: SO_TIMESTAMPNS (== SCM_TIMESTAMPNS), the 64-bit-time_t "old" variant
# that Python's socket module does not export. The cmsg payload is a struct timespec: two int64.
SO_TIMESTAMPNS = 35
SCM_TIMESTAMPNS = SO_TIMESTAMPNS
_TIMESPEC = struct.Struct("qq")
_ANC_SPACE = socket.CMSG_SPACE(_TIMESPEC.size)

KERNEL, USER = "kernel", "user"  # the record's `clock` values

_subclasses: dict[type, type] = {}


def _stamped_class(base: type) -> type:
    """A subclass of `base` (socket.socket or gevent's socket) whose reads keep the kernel stamp."""
    cls = _subclasses.get(base)
    if cls is not None:
        return cls

    class KernelStampedSocket(base):  # type: ignore[valid-type, misc]
        __slots__ = ("kernel_wall", "read_delay_max", "sent_wall", "sent_perf")

        def sendall(self, data, flags: int = 0) -> None:  # type: ignore[override]
            # "Sent" is when the kernel took the request's last byte. Stamped here, right after the
            # syscall, not after the HTTP stack returned: the OS can take the CPU away in between
            # (a busy box), and every microsecond of that window made TTFT look shorter than it was.
            super().sendall(data, flags)
            self.sent_wall, self.sent_perf = time(), perf_counter()

        def recv_into(self, buffer, nbytes: int = 0, flags: int = 0) -> int:  # type: ignore[override]
            if nbytes:
                buffer = memoryview(buffer)[:nbytes]
            n, ancdata, _, _ = self.recvmsg_into((buffer,), _ANC_SPACE, flags)
            if ancdata:  # the only control message asked for
                sec, nsec = _TIMESPEC.unpack_from(ancdata[0][2])
                wall = sec + nsec * 1e-9
                self.kernel_wall = wall
                delay = time() - wall
                if delay > self.read_delay_max:
                    self.read_delay_max = delay
            elif n:  # bytes without a stamp (see keep_stamping_on): the caller falls back to read time
                self.kernel_wall = 0.0
            return n  # a bare FIN (n == 0) carries no stamp and keeps the last one

    KernelStampedSocket.__name__ = f"KernelStamped{base.__name__.capitalize()}"
    _subclasses[base] = KernelStampedSocket
    return KernelStampedSocket


_keeper: list[socket.socket] = []


def keep_stamping_on() -> None:
    """Keep the kernel's receive timestamping switched on for as long as this process lives.

    Linux stamps incoming packets only while some socket asks for it, and switching that on is
    deferred to a kernel work queue: packets that arrive in between carry no stamp. Without a
    socket that stays open, every first connection after all others closed would race it (seen in
    the unit tests: the first response's bytes unstamped), so one idle UDP socket holds the switch
    on. Called when the HTTP layer is imported, well before the first request.
    """
    if _keeper:
        return
    try:
        keeper = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    except OSError:
        return  # no sockets here at all: nothing to stamp either
    try:
        keeper.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        keeper.close()
        return
    _keeper.append(keeper)


def kernel_stamped(sock: socket.socket) -> socket.socket | None:
    """The same connection as a kernel-stamped socket, or None (then `sock` is left untouched).

    Only for a connected plain-TCP socket: TLS wrapping would hide the stamps.
    """
    if not sys.platform.startswith("linux") or sock.type != socket.SOCK_STREAM:
        return None
    try:
        keep_stamping_on()
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return None
    timeout = sock.gettimeout()
    stamped = _stamped_class(type(sock))(sock.family, sock.type, sock.proto, fileno=sock.detach())
    stamped.settimeout(timeout)
    stamped.kernel_wall = 0.0
    stamped.read_delay_max = 0.0
    stamped.sent_wall = stamped.sent_perf = 0.0
    return stamped


def is_stamped(sock: object) -> bool:
    return type(sock) in _subclasses.values()
