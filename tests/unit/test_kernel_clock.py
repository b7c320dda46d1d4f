"""Kernel receive stamps (kernel_clock.py, connection.py): a late read still gets the bytes' arrival time.

A scripted server on a real loopback socket stamps `time.time()` around each write (its truth); the
client reads late on purpose. The kernel's receive stamp is the same clock, taken on arrival."""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

import gevent.socket
import pytest
from geventhttpclient.response import HTTPResponse
from stream_helpers import read_record

import loadline.client.connection as connection
from loadline.client import body_reader
from loadline.client.connection import Connection, Response
from loadline.client.kernel_clock import SCM_TIMESTAMPNS, enable, stamp_of
from loadline.client.measure import fill_timings
from loadline.client.stall import StallTimer
from loadline.client.streaming import StreamResult, chat_content, read_stream
from loadline.core.records import RequestRecord

# Exclusive, as the other truth tests: stamps held to ms of a server thread's writes (this process's GIL);
# beside three test processes and a CPU hog a round trip took 5-30 ms
pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_TIMESTAMPNS is Linux's"),
    pytest.mark.exclusive,
]

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
LATE_READ_S = 0.3
GAP_S = 0.2


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def token(text: str, finish: str = "null") -> bytes:
    finish = f'"{finish}"' if finish != "null" else finish
    return (
        b'data: {"choices":[{"index":0,"delta":{"content":"'
        + text.encode()
        + b'"},"finish_reason":'
        + finish.encode()
        + b"}]}\n\n"
    )


def serve_two_tokens(
    truth: list[float],
    think_s: float = 0.0,
    received: list[float] | None = None,
    written: list[float] | None = None,
):
    """One connection: headers + token a, GAP_S later token b + [DONE]; `truth` gets the time just before
    each write, `written` just after (the kernel stamps in between, however late a busy box runs it).
    `think_s`: how long the server computes before its first write; `received`: when the request was in."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)

    def serve():
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(10)
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            while len(body) < length:
                body += conn.recv(65536)
            if received is not None:
                received.append(time.time())
            time.sleep(think_s)
            truth.append(time.time())
            conn.sendall(HEAD + chunk(token("a")))
            if written is not None:
                written.append(time.time())
            time.sleep(GAP_S)
            truth.append(time.time())
            conn.sendall(chunk(token("b", "stop") + b"data: [DONE]\n\n") + b"0\r\n\r\n")
            if written is not None:
                written.append(time.time())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}", thread, listener


def late_stream(
    think_s: float = 0.0,
    received: list[float] | None = None,
    kernel: bool = True,
    written: list[float] | None = None,
    posted: list[float] | None = None,
) -> tuple[StreamResult, Response, list[float], RequestRecord]:
    """Read the two-token stream LATE_READ_S after the headers: token b waits in the socket. `posted`
    gets perf_counter() before and after the post (it returns with the headers), then time.time() before."""
    truth: list[float] = []
    url, thread, listener = serve_two_tokens(truth, think_s, received, written)
    conn = Connection(url, 5, 5, kernel_clock_on=kernel)
    try:
        before, before_wall = time.perf_counter(), time.time()
        response = conn.post("/v1/chat/completions", b"{}")
        if posted is not None:
            posted += [before, time.perf_counter(), before_wall]
        time.sleep(LATE_READ_S)  # a busy generator: both tokens arrive before we read
        result = StreamResult()
        read_stream(response, chat_content, result)
        rec = RequestRecord("r", "w", "u", "c", "", 0, "/v1/chat/completions", "m", response.sent_wall)
        fill_timings(rec, result, response.sent_perf, result.ended_at)
        response.close()
    finally:
        conn.close()
        thread.join(10)
        listener.close()
    return result, response, truth, rec


def to_wall(perf: float, response: Response) -> float:
    return perf - response.sent_perf + response.sent_wall


def test_a_late_read_keeps_each_segments_arrival_time():
    written: list[float] = []
    result, wire, truth, rec = late_stream(written=written)
    assert wire.clock == "kernel" and result.clock == "kernel" and rec.clock == "kernel"
    assert result.text == "ab" and result.done
    a, b = (to_wall(t, wire) for t in result.arrivals)

    def during_write(stamp: float, k: int) -> bool:  # within 5 ms of the k-th write's call
        return truth[k] - 0.005 < stamp < written[k] + 0.005

    # arrival = the server's write (loopback delivers inside sendall), not our read 0.3 s later
    assert during_write(a, 0) and during_write(b, 1), (a - truth[0], b - truth[1], written[1] - truth[1])
    assert during_write(to_wall(wire.headers_at, wire), 0)
    gap = rec.itl_us and int(rec.itl_us) / 1e6
    assert truth[1] - written[0] - 0.005 < gap < written[1] - truth[0] + 0.005
    # the lag is reported apart: token b's segment waited ~0.1 s for the late read
    assert rec.read_delay_ms is not None and rec.read_delay_ms > (LATE_READ_S - GAP_S) * 1000 / 2


def test_without_kernel_stamps_the_read_time_is_used_and_said():
    result, wire, truth, rec = late_stream(kernel=False)
    assert wire.clock == "user" and rec.clock == "user" and rec.read_delay_ms is None
    # token b is stamped when we read it, ~0.1 s after it arrived: the error the kernel clock removes
    assert to_wall(result.arrivals[1], wire) - truth[1] > (LATE_READ_S - GAP_S) / 2


PREEMPTED_S = 0.05


@pytest.mark.parametrize("shift_s", [2.0, -3.0, 0.05])
def test_a_wall_clock_that_disagrees_with_the_kernels_stamps_falls_back_to_read_time(shift_s, monkeypatch):
    """time.time() shifted against the kernel's receive stamps (a stepped clock; libfaketime in the
    cross-host test): the reply's stamp lands before its request was written or in the future. Its
    times are then taken at read time, and "sent" is never moved by the bad stamps."""
    real_wall = time.time
    monkeypatch.setattr(
        connection, "time", type("ShiftedTime", (), {"time": staticmethod(lambda: real_wall() + shift_s)})
    )
    posted: list[float] = []
    result, wire, truth, rec = late_stream(posted=posted)
    assert wire.clock == "user" and rec.clock == "user" and rec.read_delay_ms is None
    # sent, headers and first token all inside the post's own call, sent before the server answered (bad
    # stamps would put them seconds or 50 ms off), however long a busy box made that round trip
    before, after, before_wall = posted
    assert before_wall - 0.001 <= wire.sent_wall - shift_s <= truth[0] + 0.001
    assert before <= wire.sent_perf <= wire.headers_at <= after
    assert 0.0 <= rec.ttft_ms <= (after - before) * 1000


def test_a_preemption_after_the_write_moves_sent_back_to_before_the_write(monkeypatch):
    """The OS took the CPU only after the write (the common case: the write wakes the server): "sent"
    goes back to the stamp taken before the write, so TTFT keeps the server's time instead of
    collapsing to 0 (seen against llama-server when the first token came with the headers)."""
    late = {"on": False}
    real_perf, real_wall = time.perf_counter, time.time
    monkeypatch.setattr(connection, "perf_counter", lambda: real_perf() + (PREEMPTED_S if late["on"] else 0.0))
    monkeypatch.setattr(
        connection,
        "time",
        type("LateTime", (), {"time": staticmethod(lambda: real_wall() + (PREEMPTED_S if late["on"] else 0.0))}),
    )
    write = gevent.socket.socket.sendall

    def preempted_after_write(self, data, flags=0):  # type: ignore[no-untyped-def]
        write(self, data, flags)
        if bytes(data[:5]) == b"POST ":  # the client's request, not the scripted server's replies
            late["on"] = True  # every clock read from here on is late: the OS ran something else

    monkeypatch.setattr(gevent.socket.socket, "sendall", preempted_after_write)
    result, wire, truth, rec = late_stream()
    ttfb = wire.headers_at - wire.sent_perf
    assert 0.0 < ttfb < PREEMPTED_S / 2  # from the stamp before the write; clamping to the reply gave 0
    # sent lies before the server's answer (it answered on receipt)
    assert -PREEMPTED_S / 2 < to_wall(wire.sent_perf, wire) - truth[0] <= 0.001


@pytest.mark.parametrize(("kernel", "shift_s"), [(False, 0.0), (True, 2.0), (True, -3.0)])
def test_a_preemption_around_the_write_is_taken_back_when_timed_at_read_time(kernel, shift_s, monkeypatch):
    """Timed at read time (no kernel stamps, or stamps a shifted clock cannot place) no reply stamp can
    show that the OS took the CPU between the write and the "sent" stamp: "sent" goes back to before
    the write, so it never lies after the server had the request (a TTFT shorter than the service's)."""
    late = {"on": False}
    real_perf, real_wall = time.perf_counter, time.time
    monkeypatch.setattr(connection, "perf_counter", lambda: real_perf() + (PREEMPTED_S if late["on"] else 0.0))
    monkeypatch.setattr(
        connection,
        "time",
        type(
            "LateTime", (), {"time": staticmethod(lambda: real_wall() + shift_s + (PREEMPTED_S if late["on"] else 0))}
        ),
    )
    write = gevent.socket.socket.sendall

    def preempted_after_write(self, data, flags=0):  # type: ignore[no-untyped-def]
        write(self, data, flags)
        if bytes(data[:5]) == b"POST ":
            late["on"] = True

    monkeypatch.setattr(gevent.socket.socket, "sendall", preempted_after_write)
    received: list[float] = []
    result, wire, truth, rec = late_stream(think_s=2 * PREEMPTED_S, received=received, kernel=kernel)
    assert wire.clock == "user"
    # sent at or before the server had the request, not PREEMPTED_S after it
    assert to_wall(wire.sent_perf, wire) - shift_s - received[0] <= 0.005
    assert rec.ttft_ms >= 2 * PREEMPTED_S * 1000 - 5  # the server's thinking is all in TTFT


def test_a_sent_stamp_before_the_reply_is_kept():
    received: list[float] = []
    result, wire, truth, rec = late_stream(think_s=2 * PREEMPTED_S, received=received)
    assert wire.headers_at > wire.sent_perf
    assert abs(to_wall(wire.sent_perf, wire) - received[0]) < 0.005  # sent when the server got it
    assert wire.headers_at - wire.sent_perf > 2 * PREEMPTED_S - 0.005  # the server's 100 ms are all in TTFB


class ScriptedSocket:
    """Stands in for a socket: recvmsg returns the scripted (data, ancdata, flags, address)."""

    def __init__(self, replies: list) -> None:
        self.replies = replies

    def recvmsg(self, bufsize, ancbufsize=0, flags=0):
        return self.replies.pop(0)


def test_each_read_keeps_its_own_stamp_and_unstamped_bytes_fall_back_to_read_time():
    stamp = time.time() - 0.25  # bytes that waited 0.25 s in the socket
    sec, nsec = int(stamp), int((stamp % 1) * 1e9)
    anc = [(socket.SOL_SOCKET, SCM_TIMESTAMPNS, struct.pack("qq", sec, nsec))]
    assert stamp_of(anc) == pytest.approx(stamp, abs=1e-6) and stamp_of([]) == 0.0
    sock = ScriptedSocket([(b"x" * 10, anc, 0, None), (b"", [], 0, None), (b"y" * 4, [], 0, None)])
    conn = type("Conn", (), {"kernel": True, "stall": StallTimer(None, TimeoutError)})()
    sent_wall, sent_perf = time.time(), time.perf_counter()
    response = Response(conn, sock, HTTPResponse("POST"), sent_perf, sent_wall, sent_perf)  # type: ignore[arg-type]
    assert response._recv() == b"x" * 10
    assert response.arrival == pytest.approx(stamp - sent_wall + sent_perf, abs=1e-6)
    assert 0.2 < response.read_delay_max < 5
    assert response._recv() == b"" and response.arrival == pytest.approx(stamp - sent_wall + sent_perf, abs=1e-6)
    before = time.perf_counter()
    assert response._recv() == b"y" * 4 and response.arrival >= before  # no stamp: the read time, not the older one


def test_only_stream_sockets_are_stamped():
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        assert not enable(udp)
    finally:
        udp.close()


SERVER = """
import pathlib, socket, sys, time
gap, together = float(sys.argv[1]), sys.argv[2] == "1"
head, chunk, a, b = (bytes.fromhex(x) for x in sys.argv[3:7])
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
conn, _ = listener.accept()
conn.recv(65536)
time.sleep(float(sys.argv[7]))
if together:
    time.sleep(gap)
    print(time.time(), time.time(), flush=True)
    conn.sendall(head + a + b)
else:
    t0 = time.time()
    conn.sendall(head + a)
    time.sleep(gap)
    t1 = time.time()
    conn.sendall(b)
    print(t0, t1, flush=True)
pathlib.Path(sys.argv[8]).touch()  # both writes are out: the client's hog may end
time.sleep(0.5)
"""


def hogged_first_read(
    gap_s: float, hog_s: float, together: bool, monkeypatch, waiting: bool = False
) -> tuple[RequestRecord, list[float], Response]:
    """The client keeps its CPU for `hog_s` right after sending (a busy or paused generator; `waiting`:
    once the reader is already blocked on the reply) while a server process writes the headers with
    token a, then token b `gap_s` later (`together`: both in one write, after `gap_s`). The hog lasts
    until the server has made both writes too: on a busy machine the server process may start writing
    late, and a hog that ended first would read token a alone (a true stamp, but not the case tested)."""
    a = chunk(token("a"))
    b = chunk(token("b", "stop") + b"data: [DONE]\n\n") + b"0\r\n\r\n"
    think_s = 0.03 if waiting else 0.0  # the reader is blocked on the reply before the hog starts
    scratch = tempfile.mkdtemp(prefix="loadline-written-")
    written = os.path.join(scratch, "both")  # the server creates it once both writes are out
    args = [str(gap_s), "1" if together else "0", HEAD.hex(), b"".hex(), a.hex(), b.hex(), str(think_s), written]
    server = subprocess.Popen([sys.executable, "-c", SERVER, *args], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        write = gevent.socket.socket.sendall

        def hog() -> None:
            start = time.perf_counter()
            while time.perf_counter() - start < hog_s or (hog_s and not os.path.exists(written)):
                if time.perf_counter() - start > 10:  # the server never wrote: its read fails the test
                    break  # (no yield to the hub in this loop: nothing is read meanwhile)

        def send_then_hog(self, data, flags=0):  # type: ignore[no-untyped-def]
            write(self, data, flags)
            gevent.spawn_later(think_s / 3, hog) if waiting else hog()  # later: once the reader is blocked

        monkeypatch.setattr(gevent.socket.socket, "sendall", send_then_hog)
        conn = Connection(f"http://127.0.0.1:{port}", 5, 5)
        response = conn.post("/v1/chat/completions", b"{}")
        rec, _ = read_record(response)
        conn.close()
        truth = [float(t) for t in server.stdout.readline().split()]
    finally:
        server.kill()
        server.wait(10)
        shutil.rmtree(scratch, ignore_errors=True)
    return rec, truth, response


@pytest.mark.parametrize("gap_s, hog_s, waiting", [(0.1, 0.15, False), (0.2, 0.25, False), (0.1, 0.15, True)])
def test_a_first_token_that_shared_its_read_with_the_next_says_the_generator_was_behind(
    gap_s, hog_s, waiting, monkeypatch
):
    """Without the first-bytes watch (=0, or resting): TCP merged the two writes under
    the later stamp, and the read delay says by how much the first token may be late."""
    monkeypatch.setattr(body_reader, "FIRST_BYTES_WATCH", body_reader.WATCH_OFF)
    monkeypatch.setattr(body_reader, "_reader", [])  # a reader made without the watch
    rec, truth, response = hogged_first_read(gap_s, hog_s, False, monkeypatch, waiting)
    stamp_error_s = response.sent_wall + rec.ttft_ms / 1000 - truth[0]
    assert stamp_error_s > gap_s / 2  # a read after both writes: token a carries token b's stamp
    # the newest bytes waited hog - gap (< one gap); the oldest waited ~hog: the read delay covers the error
    assert rec.read_delay_ms / 1000 >= stamp_error_s and rec.read_delay_ms / 1000 > gap_s


@pytest.mark.parametrize(
    "gap_s, hog_s, waiting", [(0.1, 0.15, False), (0.2, 0.25, False), (0.1, 0.15, True), (0.03, 0.2, True)]
)
def test_a_watched_first_token_keeps_its_stamp_however_late_it_is_read(gap_s, hog_s, waiting, monkeypatch):
    """The watch (first_bytes.py) peeked at token a before token b came, though the loop was busy:
    both keep their own write's stamp, and the read delay still says the generator was behind."""
    monkeypatch.setattr(body_reader, "FIRST_BYTES_WATCH", body_reader.WATCH_ON)  # LOADLINE_FIRST_BYTES_WATCH=1
    monkeypatch.setattr(body_reader, "_reader", [])  # a reader of its own, with the watch
    rec, truth, response = hogged_first_read(gap_s, hog_s, False, monkeypatch, waiting)
    assert abs(response.sent_wall + rec.ttft_ms / 1000 - truth[0]) < 0.005
    assert abs(response.sent_wall + rec.e2e_ms / 1000 - truth[1]) < 0.005
    assert rec.itl_p50_ms == pytest.approx((truth[1] - truth[0]) * 1000, abs=5)
    assert rec.read_delay_ms / 1000 > gap_s  # token a waited through the busy spell: behind


def test_two_events_in_one_write_read_promptly_keep_an_exact_stamp(monkeypatch):
    rec, truth, response = hogged_first_read(0.1, 0.0, True, monkeypatch)
    assert abs(response.sent_wall + rec.ttft_ms / 1000 - truth[0]) < 0.005


@pytest.mark.parametrize(
    "newest_wait, bound, extra, gap, expected",
    [
        (0.005, 0.200, 1, 0.020, 0.025),  # one step merged: the newest's wait plus one gap
        (0.005, 0.200, 3, 0.020, 0.065),  # three steps merged
        (0.005, 0.030, 3, 0.020, 0.030),  # never beyond the bound (the read was called 30 ms before)
        (0.005, 0.200, 1, 0.0, 0.200),  # no pace known (one token): the bound
    ],
)
def test_a_merged_read_counts_its_oldest_bytes_at_the_replys_pace(newest_wait, bound, extra, gap, expected):
    conn = type("Conn", (), {"kernel": True, "stall": StallTimer(None, TimeoutError)})()
    response = Response(conn, None, HTTPResponse("POST"), 0.0, 0.0, 0.0)  # type: ignore[arg-type]
    response.merges.append((newest_wait, bound, extra))
    response.settle_merges(gap)
    assert response.read_delay_max == pytest.approx(expected) and not response.merges
