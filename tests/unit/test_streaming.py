"""The SSE reader against a scripted server on a real loopback socket: timing and bad endings.

The simulator never sends malformed or split frames, so these edge cases get a tiny raw-socket
server that writes exactly the bytes (and pauses) each test scripts. Every test runs twice: with
the body read by the process's body reader (push, the default on plain TCP) and by its user's
greenlet (pull, as over TLS): both must give the same record (tests/unit/test_body_reader.py has
what only the reader does).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from contextlib import contextmanager

import pytest

from loadline.client import body_reader
from loadline.client.connection import Connection, Response
from loadline.client.reply_checks import is_event_stream, short_reply
from loadline.client.streaming import StreamFailure, StreamResult, chat_content, read_stream
from loadline.core.records import ErrorClass

HEAD_CHUNKED = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
HEAD_CLOSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"


@pytest.fixture(autouse=True, params=["push", "pull"])
def read_mode(request, monkeypatch):
    monkeypatch.setattr(body_reader, "ENABLED", request.param == "push" and body_reader.ENABLED)
    return request.param


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def event(obj) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj, ensure_ascii=False).encode()) + b"\n\n"


def token(text: str, finish=None) -> bytes:
    return event({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]})


@contextmanager
def scripted_server(script: list, sent_at: list[tuple[float, float]] | None = None):
    """Serve one connection: read the request head, then for each item sleep (float), send (bytes) or call.

    `sent_at` receives perf_counter() before and after each send: the server's truth, since a busy
    machine oversleeps the script's pauses. Both, because the bytes reach the client somewhere in
    between, and "after" can be late by milliseconds: this server shares the process (and its GIL)
    with the client, whose first-bytes watch thread (when on) takes the GIL as the bytes arrive (seen
    in CI: 4.4 ms on a busy box)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    port = listener.getsockname()[1]

    def serve():
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(10)
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            while len(body) < length:  # read the whole request: unread bytes at close turn FIN into RST
                body += conn.recv(65536)
            for item in script:
                if isinstance(item, float):
                    time.sleep(item)
                elif callable(item):  # a marker the test reads: how far the script got
                    item()
                else:
                    before = time.perf_counter()
                    try:
                        conn.sendall(item)
                    except (BrokenPipeError, ConnectionResetError):
                        return  # the client went away (a stopped user, a failed reply): the script ends
                    if sent_at is not None:
                        sent_at.append((before, time.perf_counter()))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/v1/chat/completions"
    finally:
        thread.join(10)
        listener.close()


def post(url: str, read_timeout: float = 5.0) -> tuple[Connection, Response]:
    """A user's connection to the scripted server and the reply to one POST (status and headers read)."""
    base, path = url.split("/v1/", 1)
    conn = Connection(base, 5.0, read_timeout)
    return conn, conn.post("/v1/" + path, b"{}", {"Content-Type": "application/json"})


def arrived_during(arrivals: list[float], sends: list[tuple[float, float]], late_s: float) -> bool:
    """Each arrival lies between its send's start (less 1 ms of clock reading) and `late_s` after its
    end (`scripted_server`'s sent_at)."""
    return all(before - 0.001 <= arrival < after + late_s for arrival, (before, after) in zip(arrivals, sends))


def stream(url: str) -> tuple[StreamResult, float, Exception | None]:
    result = StreamResult()
    t0 = time.perf_counter()
    conn, response = post(url)
    try:
        read_stream(response, chat_content, result)
        return result, t0, None
    except StreamFailure as exc:
        return result, t0, exc
    finally:
        response.close()
        conn.close()


def test_arrival_times_follow_the_bytes():
    script = [
        HEAD_CHUNKED,
        chunk(token("")),
        0.10,
        chunk(token(" a")),
        0.05,
        chunk(token(" b")),
        0.05,
        chunk(token(" c", "stop")),
        chunk(event(b"[DONE]")),
        chunk(b""),
    ]
    sent_at: list[tuple[float, float]] = []
    with scripted_server(script, sent_at) as url:
        result, t0, error = stream(url)
    assert error is None and result.done and result.finish_reason == "stop"
    assert result.text == " a b c"
    assert len(result.arrivals) == 3
    content_sent = [sent_at[2], sent_at[3], sent_at[4]]  # head, role chunk, then " a", " b", " c"
    assert result.arrivals[0] - t0 >= 0.09  # not stamped at the headers or the role chunk
    assert arrived_during(result.arrivals, content_sent, 0.02), (result.arrivals, content_sent)
    gaps = [b - a for a, b in zip(result.arrivals, result.arrivals[1:])]
    starts = [before for before, _ in content_sent]
    assert gaps == pytest.approx([b - a for a, b in zip(starts, starts[1:])], abs=0.02)


def test_an_event_split_across_reads_is_stamped_when_it_completes():
    frame = token(" split")
    script = [
        HEAD_CHUNKED,
        chunk(frame[:9]),
        0.15,
        chunk(frame[9:]),
        chunk(token("", "stop")),
        chunk(event(b"[DONE]")),
        chunk(b""),
    ]
    with scripted_server(script) as url:
        result, t0, error = stream(url)
    assert error is None and result.text == " split"
    assert result.arrivals[0] - t0 == pytest.approx(0.15, abs=0.03)


def test_multibyte_utf8_split_between_chunks_is_intact():
    frame = token(" 负载", "stop")
    cut = frame.index("负".encode()) + 1  # in the middle of a 3-byte character
    script = [HEAD_CHUNKED, chunk(frame[:cut]), 0.02, chunk(frame[cut:]), chunk(event(b"[DONE]")), chunk(b"")]
    with scripted_server(script) as url:
        result, _, error = stream(url)
    assert error is None and result.text == " 负载"


def test_truncated_stream_is_a_reset_and_keeps_what_arrived():
    script = [HEAD_CHUNKED, chunk(token(" a")), chunk(token(" b"))]  # then the server closes
    with scripted_server(script) as url:
        result, _, error = stream(url)
    assert isinstance(error, StreamFailure) and error.error_class == "reset"
    assert result.text == " a b" and len(result.arrivals) == 2


def test_clean_close_without_done_or_finish_reason_is_not_success():
    script = [HEAD_CLOSE, token(" a"), token(" b")]  # body delimited by close: looks complete
    with scripted_server(script) as url:
        _, _, error = stream(url)
    assert isinstance(error, StreamFailure) and error.error_class == ErrorClass.TRUNCATED


def test_done_without_finish_reason_is_truncated_and_keeps_what_arrived():
    """llama-cpp-python's interrupted stream: role chunk, some content, [DONE], no finish_reason."""
    role = event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})
    script = [
        HEAD_CHUNKED,
        chunk(role),
        chunk(token(" a")),
        0.02,
        chunk(token(" b")),
        chunk(event(b"[DONE]")),
        chunk(b""),
    ]
    with scripted_server(script) as url:
        result, t0, error = stream(url)
    assert isinstance(error, StreamFailure) and error.error_class == ErrorClass.TRUNCATED
    assert "[DONE] without a finish_reason" in str(error)
    assert result.text == " a b" and len(result.arrivals) == 2 and result.arrivals[0] > t0
    assert result.body_complete  # the connection stays reusable


def test_done_with_no_content_at_all_is_truncated():
    script = [HEAD_CHUNKED, chunk(event(b"[DONE]")), chunk(b"")]
    with scripted_server(script) as url:
        result, _, error = stream(url)
    assert isinstance(error, StreamFailure) and error.error_class == ErrorClass.TRUNCATED and not result.arrivals


@pytest.mark.parametrize(
    "content_type, expected",
    [
        ("text/event-stream", True),
        ("text/event-stream; charset=utf-8", True),
        ("", True),
        ("text/html; charset=utf-8", False),
        ("application/json", False),
    ],
)
def test_only_an_event_stream_content_type_is_read_as_a_stream(content_type, expected):
    assert is_event_stream(content_type) is expected


def test_a_reply_shorter_than_ignore_eos_asked_for_is_named():
    full = StreamResult(arrivals=[0.1] * 4, finish_reason="length", usage={"completion_tokens": 8})
    assert short_reply(full, 8) == "" and short_reply(full, 0) == ""
    early = StreamResult(arrivals=[0.1] * 3, finish_reason="stop", usage={"completion_tokens": 3})
    assert short_reply(early, 8) == "3 of the 8 tokens asked for (finish_reason stop)"
    # several tokens per chunk and no usage: the server's own "length" is taken at its word
    assert short_reply(StreamResult(arrivals=[0.1] * 3, finish_reason="length"), 8) == ""
    assert short_reply(StreamResult(arrivals=[0.1] * 3, finish_reason="stop"), 8) != ""


def test_finish_reason_and_clean_end_without_done_is_complete():
    script = [HEAD_CHUNKED, chunk(token(" a", "length")), chunk(b"")]
    with scripted_server(script) as url:
        result, _, error = stream(url)
    assert error is None and result.finish_reason == "length"


def test_malformed_json_is_classified():
    script = [HEAD_CHUNKED, chunk(token(" a")), chunk(b"data: {not json\n\n"), chunk(b"")]
    with scripted_server(script) as url:
        _, _, error = stream(url)
    assert isinstance(error, StreamFailure) and error.error_class == "malformed"


def test_error_object_inside_the_stream_is_a_failure():
    script = [
        HEAD_CHUNKED,
        chunk(token(" a")),
        chunk(event({"error": {"message": "engine died", "code": 500}})),
        chunk(event(b"[DONE]")),
        chunk(b""),
    ]
    with scripted_server(script) as url:
        result, _, error = stream(url)
    assert isinstance(error, StreamFailure) and error.error_class == "stream_error"
    assert "engine died" in str(error) and result.text == " a"


def test_usage_chunk_is_captured():
    usage = {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14}
    script = [
        HEAD_CHUNKED,
        chunk(token(" a")),
        chunk(token(" b", "stop")),
        chunk(event({"choices": [], "usage": usage})),
        chunk(event(b"[DONE]")),
        chunk(b""),
    ]
    with scripted_server(script) as url:
        result, _, error = stream(url)
    assert error is None and result.usage == usage


@pytest.mark.parametrize(
    "bad",
    [
        b'data: {"choices": [1]}\n\n',
        b'data: {"choices": [{"delta": "text"}]}\n\n',
        b'data: {"choices": [], "usage": [1]}\n\n',
        b'data: {"choices": [], "usage": {"completion_tokens": "many"}}\n\n',
        b'data: {"choices": [{"delta": {"content": " \xff\xfe"}}]}\n\n',
    ],
)
def test_payloads_that_are_not_openai_chunks_are_malformed_not_client_bugs(bad):
    script = [HEAD_CHUNKED, chunk(token(" a")), chunk(bad), chunk(event(b"[DONE]")), chunk(b"")]
    with scripted_server(script) as url:
        _, _, error = stream(url)
    assert isinstance(error, StreamFailure) and error.error_class == "malformed"


def test_done_ends_the_response_even_if_the_body_stays_open():
    script = [
        HEAD_CHUNKED,
        chunk(token(" a", "stop")),
        0.05,
        chunk(event(b"[DONE]")),
        0.6,
    ]  # open past the read timeout
    with scripted_server(script) as url:
        result = StreamResult()
        t0 = time.perf_counter()
        conn, response = post(url, read_timeout=0.5)
        read_stream(response, chat_content, result)
        conn.close()
    assert result.done and not result.body_complete  # complete, but the connection is not reusable
    assert result.ended_at - t0 == pytest.approx(0.05, abs=0.03)


def test_after_done_the_reader_stops_while_the_server_still_holds_the_body_open():
    # the reader must not wait for the end of the body until the read timeout (here
    # 10 s, 60 s by default) and the user sat idle; now it returns at [DONE] and gives the connection up
    released = threading.Event()
    script = [HEAD_CHUNKED, chunk(token(" a", "stop")), chunk(event(b"[DONE]")), 1.0, released.set]
    with scripted_server(script) as url:
        result = StreamResult()
        conn, response = post(url, read_timeout=10)
        read_stream(response, chat_content, result)
        held = not released.is_set()  # the server is still holding the body open
        conn.close()
    assert held, "the reader waited for the server to end the body"
    assert result.done and result.finish_reason == "stop" and result.text == " a"
    assert not result.body_complete  # the caller closes this connection instead of reusing it


def test_after_done_a_body_that_ends_at_once_keeps_its_connection():
    script = [HEAD_CHUNKED, chunk(token(" a", "stop")), chunk(event(b"[DONE]")), chunk(b"")]
    with scripted_server(script) as url:
        result = StreamResult()
        conn, response = post(url)
        read_stream(response, chat_content, result)
        response.close()
        kept = conn.sock is not None
        conn.close()
    assert result.done and result.body_complete and kept


def test_bytes_after_done_are_not_read_as_events():
    script = [
        HEAD_CHUNKED,
        chunk(token(" a", "stop")),
        chunk(event(b"[DONE]")),
        chunk(b"data: {not json}\n\n"),
        chunk(b""),
    ]
    with scripted_server(script) as url:
        result, _, error = stream(url)
    assert error is None and result.done and result.text == " a"
    assert not result.body_complete  # something other than the end followed [DONE]: not reused


def test_connection_setup_is_charged_once_to_the_request_that_paid_it():
    script = [HEAD_CHUNKED, chunk(token(" a", "stop")), chunk(event(b"[DONE]")), chunk(b"")]
    with scripted_server(script) as url:
        conn, response = post(url)
        read_stream(response, chat_content, StreamResult())
        response.close()
        conn.close()
    assert response.connect_ms > 0 and response.sent_perf <= response.headers_at
    assert conn.pending_connect_ms == 0.0  # taken by this request: the next one on the socket pays nothing
