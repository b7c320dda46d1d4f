"""The one classification table: transport exceptions as the token path's connection raises them -> error classes."""

from __future__ import annotations

import socket
import ssl
import threading

import pytest
from geventhttpclient.response import HTTPParseError

from loadline.client.connection import ConnectError, Connection, ConnectTimeout, IncompleteBody, ReadTimeout
from loadline.client.failures import TRANSPORT_EXCEPTIONS, classify
from loadline.client.keepalive import StaleKeepAlive
from loadline.core.records import ErrorClass, RequestRecord


def _from(cause: BaseException, exc: BaseException) -> BaseException:
    exc.__cause__ = cause
    return exc


@pytest.mark.parametrize(
    "exc, expected",
    [
        (_from(ConnectionRefusedError(111, "refused"), ConnectError("cannot connect")), ErrorClass.CONNECT),
        (socket.gaierror(-2, "Name or service not known"), ErrorClass.CONNECT),
        (_from(ssl.SSLError("handshake"), ConnectError("TLS handshake failed")), ErrorClass.CONNECT),
        (ConnectTimeout("no connection within 5 s"), ErrorClass.TIMEOUT),
        (ReadTimeout("no bytes within the read timeout"), ErrorClass.TIMEOUT),  # no reply, or a stalled stream
        (IncompleteBody("closed before the end of the reply"), ErrorClass.RESET),
        (ConnectionResetError("the connection closed before any reply"), ErrorClass.RESET),
        (_from(StaleKeepAlive("sent again"), ConnectionResetError(104, "reset")), ErrorClass.RESET),
        (HTTPParseError("invalid HTTP status line"), ErrorClass.RESET),
        (ssl.SSLError("bad record mac"), ErrorClass.RESET),  # TLS error mid-stream: not a connect error
        (BrokenPipeError(32, "broken pipe"), ErrorClass.RESET),
        (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), ErrorClass.MALFORMED),
        (KeyError("choices"), ErrorClass.CLIENT),
    ],
)
def test_each_transport_exception_has_one_class(exc, expected):
    assert classify(exc) is expected


def test_every_table_type_is_caught_and_classes_are_plain_strings_in_records():
    assert all(classify(t.__new__(t)) is not ErrorClass.CLIENT for t in TRANSPORT_EXCEPTIONS)
    rec = RequestRecord(
        "r",
        "w",
        "u",
        "C",
        "",
        0,
        "/v1/chat/completions",
        "m",
        0.0,
        status="error",
        error_class=ErrorClass.NOT_EVENT_STREAM,
    )
    assert rec.to_row()[rec.to_row().index("not_event_stream")] == "not_event_stream"
    assert str(ErrorClass.TRUNCATED) == "truncated" and "truncated" == ErrorClass.TRUNCATED


def _serve_once(reply: bytes | None) -> tuple[str, threading.Event]:
    """A loopback server for one connection: read the request, then send `reply` and close, or
    (None) hold the connection without answering until the returned event is set."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    done = threading.Event()

    def serve():
        conn, _ = listener.accept()
        with conn, listener:
            conn.recv(65536)
            if reply is None:
                done.wait(10)
            else:
                conn.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}", done


def _post_error(url: str, read_timeout: float = 5.0) -> BaseException:
    conn = Connection(url, 2.0, read_timeout)
    try:
        response = conn.post("/v1/chat/completions", b"{}")
        response.read_all()
    except TRANSPORT_EXCEPTIONS as exc:
        return exc
    finally:
        conn.close()
    raise AssertionError("no failure")


def test_real_failures_of_the_connection_are_classified():
    probe = socket.create_server(("127.0.0.1", 0))
    closed_port = probe.getsockname()[1]
    probe.close()  # nothing listens there now: refused
    assert classify(_post_error(f"http://127.0.0.1:{closed_port}")) is ErrorClass.CONNECT
    url, release = _serve_once(None)
    assert classify(_post_error(url, read_timeout=0.2)) is ErrorClass.TIMEOUT
    release.set()
    url, _ = _serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part")
    assert classify(_post_error(url)) is ErrorClass.RESET
    url, _ = _serve_once(b"SMTP ready\r\n\r\n")
    assert classify(_post_error(url)) is ErrorClass.RESET


# What each engine answers a request it refuses (REFERENCE-workloads.md section 2)
_REFUSALS = {
    "vllm-0.10.2": (
        400,
        '{"error":{"message":"This model\'s maximum context length is 2048 tokens. However, your '
        'request has 2270 input tokens. Please reduce the length of the input messages.",'
        '"type":"BadRequestError","param":null,"code":400}}',
    ),
    "vllm-max-tokens": (
        400,
        '{"error":{"message":"\'max_tokens\' or \'max_completion_tokens\' is too large: 256. This '
        "model's maximum context length is 2048 tokens and your request has 1900 input tokens "
        '(256 > 2048 - 1900).","type":"BadRequestError","param":"max_tokens","code":400}}',
    ),
    "sglang": (
        400,
        '{"object":"error","message":"The input (2270 tokens) is longer than the model\'s context length '
        '(2048 tokens).","type":"BadRequest","param":null,"code":400}',
    ),
    "tgi": (422, '{"error":"`inputs` must have less than 1024 tokens. Given: 1200","error_type":"validation"}'),
    "llama-server": (
        400,
        '{"error":{"code":400,"message":"request (2270 tokens) exceeds the available context size '
        '(2048 tokens), try increasing it","type":"exceed_context_size_error",'
        '"n_prompt_tokens":2270,"n_ctx":2048}}',
    ),
    "llama-cpp-python": (
        400,
        '{"error":{"message":"This model\'s maximum context length is 2048 tokens. However, you '
        "requested 2300 tokens (2270 in the messages, 30 in the completion). Please reduce the "
        'length of the messages or completion.","type":"invalid_request_error",'
        '"param":"messages","code":"context_length_exceeded"}}',
    ),
    "bad-parameter": (
        400,
        '{"error":{"message":"\'max_tokens\' must be an integer >= 1","type":"BadRequestError",'
        '"param":"max_tokens","code":400}}',
    ),
    "in-stream": (200, "error in stream: Requested tokens (2270) exceed context window of 2048"),
}


@pytest.mark.parametrize("engine", sorted(_REFUSALS))
def test_every_engines_refusal_of_the_request_itself_is_an_invalid_request(engine):
    from loadline.client.failures import invalid_request

    status, body = _REFUSALS[engine]
    assert invalid_request(status, body)


@pytest.mark.parametrize(
    "status, body",
    [
        (400, ""),  # llama-cpp-python's non-UUID request id: no words
        (401, '{"error":{"message":"Invalid API key","code":401}}'),  # auth: a setup failure, not a bad request
        (404, '{"error":{"message":"The model `x` does not exist."}}'),
        (503, '{"error":{"message":"too long a queue, must be retried"}}'),  # overload words on an overload status
        (200, "error in stream: engine fault"),  # the engine failed mid-reply
    ],
)
def test_other_failures_are_not_invalid_requests(status, body):
    from loadline.client.failures import invalid_request

    assert not invalid_request(status, body)
