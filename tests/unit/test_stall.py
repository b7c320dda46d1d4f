"""The token path's read timeout (stall.py): "no bytes for N seconds", checked by one timer per request."""

from __future__ import annotations

import socket
import threading
import time

import gevent
import pytest

from loadline.client.connection import Connection, ReadTimeout
from loadline.client.streaming import StreamFailure, StreamResult, chat_content, read_stream
from loadline.core.records import ErrorClass

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
TOKEN = b'data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}\n\n'
LAST = b'data: {"choices":[{"index":0,"delta":{"content":"y"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
TIMEOUT_S = 0.3


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def serve(pauses: list[float]) -> str:
    """One connection: the headers, then a token after each pause, then the end of the reply."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)

    def run():
        conn, _ = listener.accept()
        with conn, listener:
            try:
                conn.recv(65536)
                conn.sendall(HEAD)
                for pause in pauses:
                    time.sleep(pause)
                    conn.sendall(chunk(TOKEN))
                conn.sendall(chunk(LAST) + b"0\r\n\r\n")
                time.sleep(0.2)
            except OSError:
                pass  # the client timed out and closed: what the test is about

    threading.Thread(target=run, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}"


def stream(url: str) -> tuple[StreamResult, float, BaseException | None]:
    conn = Connection(url, 5, TIMEOUT_S)
    result, start, error = StreamResult(), time.perf_counter(), None
    try:
        response = conn.post("/v1/chat/completions", b"{}")
        read_stream(response, chat_content, result)
        response.close()
    except (StreamFailure, ReadTimeout) as exc:
        error = exc
    conn.close()
    return result, time.perf_counter() - start, error


# Gaps at most 2/3 of the timeout: a busy machine delays the server thread's writes by tens of ms
# (seen: a 0.25 s gap against the 0.3 s timeout timed out beside other test processes), and this test
# is about a long stream of short silences, not about how close to the timeout a silence may come.
@pytest.mark.parametrize("gap_s, tokens", [(0.1, 8), (0.2, 4)])
def test_a_stream_that_keeps_coming_never_times_out_however_long_it_lasts(gap_s, tokens):
    result, took, error = stream(serve([gap_s] * tokens))
    assert error is None and result.finish_reason == "stop" and len(result.arrivals) == tokens + 1
    assert took > TIMEOUT_S * 2  # longer than the timeout in all: only a silence counts


@pytest.mark.parametrize("pauses", [[0.05, 1.0], [1.0]])
def test_a_silence_longer_than_the_timeout_is_a_timeout_with_what_arrived_kept(pauses):
    result, took, error = stream(serve(pauses))
    assert isinstance(error, StreamFailure) and error.error_class == ErrorClass.TIMEOUT
    assert len(result.arrivals) == len(pauses) - 1  # the tokens before the silence are kept
    assert TIMEOUT_S <= took < sum(pauses[:-1]) + TIMEOUT_S + 0.4


def test_no_reply_at_all_times_out_on_the_headers():
    listener = socket.create_server(("127.0.0.1", 0))  # accepts (the kernel does), never answers
    try:
        conn = Connection(f"http://127.0.0.1:{listener.getsockname()[1]}", 5, TIMEOUT_S)
        start = time.perf_counter()
        with pytest.raises(ReadTimeout):
            conn.post("/v1/chat/completions", b"{}")
        assert TIMEOUT_S <= time.perf_counter() - start < TIMEOUT_S + 0.4
        conn.close()
    finally:
        listener.close()


def test_after_the_reply_the_timer_never_fires_into_a_user_who_thinks():
    conn = Connection(serve([0.01]), 5, TIMEOUT_S)
    response = conn.post("/v1/chat/completions", b"{}")
    read_stream(response, chat_content, StreamResult())
    response.close()
    gevent.sleep(TIMEOUT_S * 3)  # think time, on the same greenlet, well past the timeout: no exception
    conn.close()
