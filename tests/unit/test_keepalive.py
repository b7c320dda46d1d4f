"""Connection reuse like a mature client: a dead kept-alive connection costs no request, a dead fresh one does.

A scripted loopback server plays each connection: answer and keep it open, answer with
`Connection: close`, answer and then close it a moment later (llama-server), or read the request
and close without answering (a server that really failed).
"""

from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager

import pytest

from loadline.client import body_reader
from loadline.client.connection import Connection
from loadline.client.failures import TRANSPORT_EXCEPTIONS, classify, exception_chain
from loadline.client.keepalive import stale_retried
from loadline.client.streaming import StreamResult, chat_content, read_stream
from loadline.core.records import ErrorClass

SSE = b'data: {"choices":[{"index":0,"delta":{"content":" hi"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
KEEP = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s" % (len(SSE), SSE)
CLOSE = KEEP.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)


def _read_request(conn: socket.socket) -> bool:
    data = b""
    while b"\r\n\r\n" not in data:
        more = conn.recv(65536)
        if not more:
            return False
        data += more
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += conn.recv(65536)
    return True


@contextmanager
def scripted_connections(scripts: list[list[str]]):
    """Connection k follows scripts[k]: per request "keep", "close" (Connection: close), "linger"
    (answer, then close 50 ms later without serving more), or "drop" (close without answering)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    accepted: list[int] = []

    def serve():
        for script in scripts:
            conn, _ = listener.accept()
            accepted.append(1)
            with conn:
                conn.settimeout(10)
                for action in script:
                    if not _read_request(conn):
                        break
                    if action == "drop":
                        break
                    conn.sendall(CLOSE if action == "close" else KEEP)
                    if action in ("close", "linger"):
                        time.sleep(0.05 if action == "linger" else 0)
                        break

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", accepted
    finally:
        thread.join(10)
        listener.close()


def _request(conn: Connection, url: str):
    response = conn.post("/v1/chat/completions", b'{"messages": []}', {"Content-Type": "application/json"})
    result = StreamResult()
    read_stream(response, chat_content, result)
    response.close()
    return result, response, response.stale_retries


def test_a_connection_the_server_closed_after_answering_is_replaced_and_the_resend_counted():
    with scripted_connections([["keep", "linger"], ["keep"]]) as (url, accepted):
        session = Connection(url, 5, 5)
        outcomes = [_request(session, url) for _ in range(3)]  # the 3rd meets the lingering close
    assert [r.finish_reason for r, _, _ in outcomes] == ["stop"] * 3
    assert [n for _, _, n in outcomes] == [0, 0, 1] and len(accepted) == 2
    assert outcomes[2][1].connect_ms > 0 and outcomes[1][1].connect_ms == 0  # the resend paid a new connection


def test_connection_close_from_the_server_gives_no_error_and_no_resend():
    with scripted_connections([["close"], ["close"], ["close"]]) as (url, accepted):
        session = Connection(url, 5, 5)
        outcomes = [_request(session, url) for _ in range(3)]
    assert [n for _, _, n in outcomes] == [0, 0, 0] and len(accepted) == 3
    assert all(w.connect_ms > 0 for _, w, _ in outcomes)


def test_a_fresh_connection_closed_without_an_answer_is_a_reset_not_resent():
    with scripted_connections([["drop"]]) as (url, accepted):
        with pytest.raises(TRANSPORT_EXCEPTIONS) as failure:
            _request(Connection(url, 5, 5), url)
    assert classify(failure.value) == ErrorClass.RESET and not stale_retried(exception_chain(failure.value))
    assert len(accepted) == 1


def test_when_the_fresh_connection_fails_too_the_failure_says_it_was_a_resend():
    with scripted_connections([["keep", "linger"], ["drop"]]) as (url, _):
        session = Connection(url, 5, 5)
        _request(session, url)
        _request(session, url)
        with pytest.raises(TRANSPORT_EXCEPTIONS) as failure:
            _request(session, url)
    assert classify(failure.value) == ErrorClass.RESET and stale_retried(exception_chain(failure.value))


@pytest.mark.parametrize(
    "scripts, requests, failing",
    [
        ([["keep", "keep", "keep"]], 3, 0),  # every reply whole, on one kept-alive connection
        ([["close"], ["close"]], 2, 0),
        ([["keep", "linger"], ["keep"]], 3, 0),  # the 3rd meets the lingering close and is resent
        ([["drop"]], 1, 1),  # no answer: the request fails
        ([["keep", "linger"], ["drop"]], 3, 1),  # the resend fails too
    ],
)
def test_no_socket_stays_on_the_first_bytes_watch_after_its_request(scripts, requests, failing, monkeypatch):
    """The watch (first_bytes.py) follows a reply from its send to its first token: whatever the ending,
    success or failure, it lets go of the socket (a closed one left there would pin the socket object)."""
    monkeypatch.setattr(body_reader, "FIRST_BYTES_WATCH", body_reader.WATCH_ON)  # LOADLINE_FIRST_BYTES_WATCH=1
    monkeypatch.setattr(body_reader, "_reader", [])  # a reader of its own, with the watch
    watch = body_reader.first_bytes_watch()
    if watch is None:
        pytest.skip("the first-bytes watch needs the body reader (Linux, LOADLINE_PUSH_READS)")
    with scripted_connections(scripts) as (url, _):
        session = Connection(url, 5, 5)
        failures = 0
        for _ in range(requests):
            try:
                _request(session, url)
            except TRANSPORT_EXCEPTIONS:
                failures += 1
            assert not watch._socks and not watch._seen
        session.close()
    assert failures == failing
