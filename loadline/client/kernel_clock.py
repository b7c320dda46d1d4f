"""Token arrival times from the kernel: every read of a plain-TCP socket carries its receive time.

A busy generator reads its sockets late, and a stamp taken when `read()` returns measures the
generator, not the server. On Linux the kernel stamps each incoming TCP segment when it reaches the
host (SO_TIMESTAMPNS) and hands the stamp over with the bytes when they are read with `recvmsg`
(connection.py reads every reply that way on a plain-TCP connection: `enable(sock)`, then
`read_stamped(sock)` and `stamp_of(ancdata)` for each read).

What the kernel can and cannot tell (measured on Linux 6.18, loopback):
- A read that carries one segment gets that segment's exact receive time, however late it is read.
- Segments that wait together in the receive queue are merged by TCP (receive coalescing) and the
  merged buffer keeps only the *newest* segment's stamp. So when the generator falls behind by
  more than one server write, the last event of the read is stamped exactly and the earlier ones
  get that same, later time (their true arrival lies between the previous read and this stamp).
  The read delay says when that happened (connection.py): for a read of one write, how long its
  bytes waited; for a read that carried several content events (every engine writes one per
  step), how long the oldest may have waited, i.e. since the read was called (or, when its bytes
  were already queued, since the previous read), and no longer than the process was busy since the
  body reader last saw the socket empty (idle_clock.py: a server that wrote them together to an
  idle generator). Below one gap between writes, every stamp is exact.
  A reply's first token escapes this: an OS thread peeks at its bytes as they arrive (first_bytes.py;
  within a budget by default, watch_budget.py; LOADLINE_FIRST_BYTES_WATCH=1 always, =0 never).
- Over TLS the kernel sees only ciphertext records: no stamps; the caller keeps user-space stamps.

The stamps are CLOCK_REALTIME (`time.time()`'s clock); callers convert them to `perf_counter()`
with an offset sampled once per request (a wall-clock step inside one request would shift them).
`LOADLINE_KERNEL_CLOCK=0` forces read-time stamps everywhere (to compare the two: benchmarks/).
"""

from __future__ import annotations

import os
import socket

from loadline.client.transport_errors import ReadTimeout
from loadline.core.kernel_stamps import ANC_SPACE, LINUX, SCM_TIMESTAMPNS, SO_TIMESTAMPNS, request_stamps, stamp_of

__all__ = [
    "ANC_SPACE",
    "AVAILABLE",
    "KERNEL",
    "SCM_TIMESTAMPNS",
    "SO_TIMESTAMPNS",
    "USER",
    "enable",
    "keep_stamping_on",
    "read_stamped",
    "stamp_of",
]

KERNEL, USER = "kernel", "user"  # the record's `clock` values
AVAILABLE = LINUX and os.environ.get("LOADLINE_KERNEL_CLOCK", "1") != "0"


_keeper: list[socket.socket] = []


def keep_stamping_on() -> None:
    """Keep the kernel's receive timestamping switched on for as long as this process lives.

    Linux stamps incoming packets only while some socket asks for it, and switching that on is
    deferred to a kernel work queue: packets that arrive in between carry no stamp. Without a
    socket that stays open, every first connection after all others closed would race it (seen in
    the unit tests: the first response's bytes unstamped), so one idle UDP socket holds the switch
    on. Called at import, well before the first request.
    """
    if _keeper:
        return
    try:
        keeper = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    except OSError:
        return  # no sockets here at all: nothing to stamp either
    if not request_stamps(keeper):
        keeper.close()
        return
    _keeper.append(keeper)


def enable(sock: socket.socket) -> bool:
    """Ask for receive stamps on a connected plain-TCP socket (TLS would hide them); False if refused."""
    if not AVAILABLE or sock.type != socket.SOCK_STREAM:
        return False
    keep_stamping_on()
    return request_stamps(sock)


def read_stamped(sock: socket.socket, size: int) -> tuple[bytes, list, bool]:
    """gevent's recvmsg loop, inlined: (data, ancillary data, whether the read had to wait for bytes).

    Whether it waited is what tells a late reader (bytes already queued) from a prompt one; reading
    the gevent socket's non-blocking `_sock` directly also saves a Python frame on every token."""
    raw, waited = getattr(sock, "_sock", None), False
    if raw is None:  # not a gevent socket: its own blocking read
        data, ancdata, _, _ = sock.recvmsg(size, ANC_SPACE)
        return data, ancdata, True
    for _ in range(1_000_000):
        try:
            data, ancdata, _, _ = raw.recvmsg(size, ANC_SPACE)
            return data, ancdata, waited
        except BlockingIOError:
            waited = True
            sock._wait(sock._read_event)  # type: ignore[attr-defined]  # the stall timer bounds this
    raise ReadTimeout("the socket stayed unreadable after a million wake-ups")


if AVAILABLE:
    keep_stamping_on()
