"""Kernel receive stamps (kernel_clock.py, http.py): a late read still gets the bytes' arrival time.

A scripted server on a real loopback socket stamps `time.time()` right before each write (its
truth, like the simulator's); the client reads late on purpose. The kernel's receive stamp is the
same clock, taken when the segment reached the host. Plus the Locust bulk-logging path.
"""

from __future__ import annotations

import socket
import struct
import sys
import threading
import time
from collections import defaultdict

import pytest
from locust.stats import RequestStats
from urllib3.connection import HTTPConnection

import loadline.client.http as http
from loadline.client.http import stamped_session, wire_times
from loadline.client.kernel_clock import SCM_TIMESTAMPNS, _stamped_class, is_stamped, kernel_stamped
from loadline.client.locust_stats import log_many
from loadline.client.measure import fill_timings
from loadline.client.streaming import StreamResult, chat_content, read_stream
from loadline.core.records import RequestRecord

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_TIMESTAMPNS is Linux's")

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
LATE_READ_S = 0.3
GAP_S = 0.2


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def token(text: str, finish: str = "null") -> bytes:
    finish = f'"{finish}"' if finish != "null" else finish
    return (b'data: {"choices":[{"index":0,"delta":{"content":"' + text.encode() + b'"},"finish_reason":'
            + finish.encode() + b"}]}\n\n")


def serve_two_tokens(truth: list[float], think_s: float = 0.0, received: list[float] | None = None):
    """One connection: headers + token a, GAP_S later token b + [DONE]; `truth` gets each write's time.
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
            time.sleep(GAP_S)
            truth.append(time.time())
            conn.sendall(chunk(token("b", "stop") + b"data: [DONE]\n\n") + b"0\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}/v1/chat/completions", thread, listener


def late_stream(think_s: float = 0.0, received: list[float] | None = None
                ) -> tuple[StreamResult, http.WireTimes, list[float], RequestRecord]:
    """Read the two-token stream LATE_READ_S after the headers: token b waits in the socket."""
    truth: list[float] = []
    url, thread, listener = serve_two_tokens(truth, think_s, received)
    session = stamped_session()
    try:
        response = session.post(url, json={}, stream=True, timeout=(5, 5))
        wire = wire_times(response)
        time.sleep(LATE_READ_S)  # a busy generator: both tokens arrive before we read
        result = StreamResult()
        read_stream(response.raw, chat_content, result, wire.headers_perf)
        rec = RequestRecord("r", "w", "u", "c", "", 0, "/v1/chat/completions", "m", wire.sent_wall)
        fill_timings(rec, result, wire.sent_perf, result.ended_at)
        response.close()
    finally:
        session.close()
        thread.join(10)
        listener.close()
    return result, wire, truth, rec


def to_wall(perf: float, wire: http.WireTimes) -> float:
    return perf - wire.sent_perf + wire.sent_wall


def test_a_late_read_keeps_each_segments_arrival_time():
    result, wire, truth, rec = late_stream()
    assert wire.clock == "kernel" and result.clock == "kernel" and rec.clock == "kernel"
    assert result.text == "ab" and result.done
    a, b = (to_wall(t, wire) for t in result.arrivals)
    # arrival = the server's write (loopback delivers inside sendall), not our read 0.3 s later
    assert abs(a - truth[0]) < 0.005, (a - truth[0], b - truth[1])
    assert abs(b - truth[1]) < 0.005, (a - truth[0], b - truth[1])
    assert abs(to_wall(wire.headers_perf, wire) - truth[0]) < 0.005
    assert abs(rec.itl_us and int(rec.itl_us) / 1e6 - (truth[1] - truth[0])) < 0.005
    # the lag is reported apart: token b's segment waited ~0.1 s for the late read
    assert rec.read_delay_ms is not None and rec.read_delay_ms > (LATE_READ_S - GAP_S) * 1000 / 2


def test_without_kernel_stamps_the_read_time_is_used_and_said(monkeypatch):
    monkeypatch.setattr(http, "KERNEL_CLOCK", False)
    result, wire, truth, rec = late_stream()
    assert wire.clock == "user" and rec.clock == "user" and rec.read_delay_ms is None
    # token b is stamped when we read it, ~0.1 s after it arrived: the error the kernel clock removes
    assert to_wall(result.arrivals[1], wire) - truth[1] > (LATE_READ_S - GAP_S) / 2


PREEMPTED_S = 0.05


def test_a_sent_stamp_taken_after_the_reply_arrived_moves_back_to_the_reply(monkeypatch):
    """The OS may run other work between our write and our clock read while the server answers:
    the reply's kernel stamp then precedes "sent". TTFB and TTFT must not come out negative."""
    real_perf, real_wall = time.perf_counter, time.time
    monkeypatch.setattr(http, "perf_counter", lambda: real_perf() + PREEMPTED_S)  # both clocks read late
    monkeypatch.setattr(http, "time", type("LateTime", (), {"time": staticmethod(lambda: real_wall() + PREEMPTED_S)}))
    result, wire, truth, rec = late_stream()
    assert wire.clock == "kernel"
    ttfb = wire.headers_perf - wire.sent_perf
    assert ttfb == 0.0  # sent moved back to the reply's stamp (unclamped: -50 ms)
    # >= 0 up to the wall clock's float resolution (~0.24 us at 1.8e9 s); unclamped it was -50 ms
    assert rec.ttft_ms is not None and -0.001 <= rec.ttft_ms < PREEMPTED_S * 1000 / 2
    # the wall/perf offset is kept: arrivals still land on the server's writes
    a, b = (to_wall(t, wire) for t in result.arrivals)
    assert abs(a - truth[0]) < 0.005 and abs(b - truth[1]) < 0.005, (a - truth[0], b - truth[1])


def test_a_preemption_after_the_write_moves_sent_back_to_before_the_write(monkeypatch):
    """The OS took the CPU only after the write (the common case: the write wakes the server): "sent"
    goes back to the stamp taken before the write, so TTFT keeps the server's time instead of
    collapsing to 0 (seen against llama-server when the first token came with the headers)."""
    late = {"on": False}
    real_perf, real_wall = time.perf_counter, time.time
    monkeypatch.setattr(http, "perf_counter", lambda: real_perf() + (PREEMPTED_S if late["on"] else 0.0))
    monkeypatch.setattr(http, "time", type("LateTime", (), {
        "time": staticmethod(lambda: real_wall() + (PREEMPTED_S if late["on"] else 0.0))}))
    write = HTTPConnection.request

    def preempted_after_write(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        write(self, *args, **kwargs)
        late["on"] = True  # every clock read from here on is late: the OS ran something else

    monkeypatch.setattr(HTTPConnection, "request", preempted_after_write)
    result, wire, truth, rec = late_stream()
    ttfb = wire.headers_perf - wire.sent_perf
    assert 0.0 < ttfb < PREEMPTED_S / 2  # from the stamp before the write; clamping to the reply gave 0
    # sent lies before the server's answer (it answered on receipt), by urllib3's write path only
    assert -PREEMPTED_S / 2 < to_wall(wire.sent_perf, wire) - truth[0] <= 0.001


def test_sent_is_the_sockets_stamp_after_its_last_write_not_after_the_http_stack_returned(monkeypatch):
    """The OS may take the CPU between the socket's write and the HTTP stack's return while the server
    is still computing (real llama-server on a busy box: a client TTFT 2.5 ms shorter than the server's
    own prompt time). "Sent" is stamped by the socket right after its last write, so that gap does not
    shorten TTFB or TTFT."""
    write = HTTPConnection.request

    def slow_return(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        write(self, *args, **kwargs)
        time.sleep(PREEMPTED_S)  # the HTTP stack (or the OS) keeps us after the bytes left

    monkeypatch.setattr(HTTPConnection, "request", slow_return)
    received: list[float] = []
    result, wire, truth, rec = late_stream(think_s=2 * PREEMPTED_S, received=received)
    assert abs(to_wall(wire.sent_perf, wire) - received[0]) < 0.005  # sent when the server got it, not 50 ms later
    assert wire.headers_perf - wire.sent_perf > 2 * PREEMPTED_S - 0.005  # the server's 100 ms are all in TTFB
    assert rec.ttft_ms > 2 * PREEMPTED_S * 1000 - 5


def test_a_sent_stamp_before_the_reply_is_kept():
    result, wire, truth, rec = late_stream()
    assert wire.headers_perf > wire.sent_perf
    assert abs(to_wall(wire.sent_perf, wire) - truth[0]) < 0.005  # the server answered on receipt


class ScriptedSocket:
    """Stands in for a socket class: recvmsg_into returns the scripted (n, ancdata, flags, address)."""

    def __init__(self, replies: list) -> None:
        self.replies = replies

    def recvmsg_into(self, buffers, ancbufsize=0, flags=0):
        return self.replies.pop(0)


def test_each_read_keeps_its_own_stamp_and_unstamped_bytes_fall_back_to_read_time():
    stamp = time.time() - 0.25  # bytes that waited 0.25 s in the socket
    sec, nsec = int(stamp), int((stamp % 1) * 1e9)
    anc = [(socket.SOL_SOCKET, SCM_TIMESTAMPNS, struct.pack("qq", sec, nsec))]
    sock = _stamped_class(ScriptedSocket)([(10, anc, 0, None), (0, [], 0, None), (4, [], 0, None)])
    sock.kernel_wall = sock.read_delay_max = 0.0
    buffer = bytearray(16)
    assert sock.recv_into(buffer) == 10
    assert sock.kernel_wall == pytest.approx(stamp, abs=1e-6) and 0.2 < sock.read_delay_max < 5
    assert sock.recv_into(buffer) == 0 and sock.kernel_wall == pytest.approx(stamp, abs=1e-6)  # a bare FIN
    assert sock.recv_into(buffer, 4) == 4 and sock.kernel_wall == 0.0  # no stamp: not the older one


def test_only_stream_sockets_are_stamped():
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        assert kernel_stamped(udp) is None and not is_stamped(udp)
    finally:
        udp.close()


def test_log_many_equals_one_log_per_gap():
    gaps_ms = [10.0, 10.4, 9.6, 0.02, 99.5, 150.0, 12.0, 10.0, 2500.0]
    one_by_one, bulk = RequestStats().get("/x", "ITL"), RequestStats().get("/x", "ITL")
    for gap in gaps_ms:
        one_by_one.log(gap, 0)
    log_many(bulk, gaps_ms)
    log_many(bulk, [])
    for name in ("num_requests", "total_response_time", "min_response_time", "max_response_time",
                 "total_content_length", "num_none_requests"):
        assert getattr(bulk, name) == pytest.approx(getattr(one_by_one, name)), name
    assert dict(bulk.response_times) == dict(one_by_one.response_times)
    assert sum(bulk.num_reqs_per_sec.values()) == len(gaps_ms)
    assert bulk.get_response_time_percentile(0.5) == one_by_one.get_response_time_percentile(0.5)
    assert isinstance(bulk.response_times, defaultdict)
