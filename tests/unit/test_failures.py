"""The one classification table: transport exceptions as requests/urllib3 raise them -> error classes."""

from __future__ import annotations

import http.client
import ssl

import pytest
import requests
from urllib3 import exceptions as u3

from loadline.client.failures import TRANSPORT_EXCEPTIONS, classify
from loadline.core.records import ErrorClass, RequestRecord


def _wrapped(reason: BaseException, outer: type[requests.exceptions.RequestException] = requests.exceptions.ConnectionError):
    """What requests raises from send(): its exception around urllib3's MaxRetryError(reason=...)."""
    return outer(u3.MaxRetryError(None, "/v1/chat/completions", reason=reason))


@pytest.mark.parametrize("exc, expected", [
    (_wrapped(u3.NewConnectionError(None, "Connection refused")), ErrorClass.CONNECT),
    (_wrapped(u3.NameResolutionError("nowhere.invalid", None, OSError("no such host"))), ErrorClass.CONNECT),
    (_wrapped(u3.SSLError(ssl.SSLError("handshake")), requests.exceptions.SSLError), ErrorClass.CONNECT),
    (_wrapped(u3.ConnectTimeoutError(None, "timed out"), requests.exceptions.ConnectTimeout), ErrorClass.TIMEOUT),
    (requests.exceptions.ConnectionError(u3.ReadTimeoutError(None, "/", "Read timed out.")), ErrorClass.TIMEOUT),
    (u3.ReadTimeoutError(None, "/", "Read timed out."), ErrorClass.TIMEOUT),  # mid-stream, unwrapped
    (requests.exceptions.ConnectionError(u3.ProtocolError(
        "Connection aborted.", http.client.RemoteDisconnected("Remote end closed connection"))), ErrorClass.RESET),
    (u3.ProtocolError("Response ended prematurely"), ErrorClass.RESET),
    (u3.SSLError(ssl.SSLError("bad record mac")), ErrorClass.RESET),  # TLS error mid-stream: not a connect error
    (ConnectionResetError(104, "reset by peer"), ErrorClass.RESET),
    (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), ErrorClass.MALFORMED),
    (KeyError("choices"), ErrorClass.CLIENT),
])
def test_each_transport_exception_has_one_class(exc, expected):
    assert classify(exc) is expected


def test_every_table_type_is_caught_and_classes_are_plain_strings_in_records():
    assert all(classify(t.__new__(t)) is not ErrorClass.CLIENT for t in TRANSPORT_EXCEPTIONS)
    rec = RequestRecord("r", "w", "u", "C", "", 0, "/v1/chat/completions", "m", 0.0,
                        status="error", error_class=ErrorClass.NOT_EVENT_STREAM)
    assert rec.to_row()[rec.to_row().index("not_event_stream")] == "not_event_stream"
    assert str(ErrorClass.TRUNCATED) == "truncated" and "truncated" == ErrorClass.TRUNCATED
