"""The kernel's receive stamps on Linux sockets (SO_TIMESTAMPNS): the one definition the client and
the simulator share.

A socket that asks for them gets, with every `recvmsg`, the time its newest bytes reached the host
(CLOCK_REALTIME, `time.time()`'s clock), however late the process reads them. The client stamps
token arrivals with it (loadline/client/kernel_clock.py), the simulator the arrival of requests
(simulator/kernel_rx.py).
"""

from __future__ import annotations

import socket
import struct
import sys

# linux/asm-generic/socket.h: SO_TIMESTAMPNS (== SCM_TIMESTAMPNS), the 64-bit-time_t "old" variant
# that Python's socket module does not export. The cmsg payload is a struct timespec: two int64.
SO_TIMESTAMPNS = 35
SCM_TIMESTAMPNS = SO_TIMESTAMPNS
_TIMESPEC = struct.Struct("qq")
ANC_SPACE = socket.CMSG_SPACE(_TIMESPEC.size)  # recvmsg's ancillary buffer for one stamp
LINUX = sys.platform.startswith("linux")


def stamp_of(ancdata: list[tuple[int, int, bytes]]) -> float:
    """The receive stamp in a recvmsg's ancillary data, 0.0 without one."""
    if ancdata:  # the only control message asked for; checked all the same
        level, kind, payload = ancdata[0]
        if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS:
            sec: int
            nsec: int
            sec, nsec = _TIMESPEC.unpack_from(payload)
            return sec + nsec * 1e-9
    return 0.0


def request_stamps(sock: socket.socket) -> bool:
    """Ask for receive stamps on `sock` (inherited by the sockets a listening socket accepts)."""
    if not LINUX:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True
