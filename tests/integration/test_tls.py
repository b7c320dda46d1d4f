"""The token path over TLS: a real TLS server on 127.0.0.1 (a self-signed certificate made with the
openssl command line), trusted through SSL_CERT_FILE as a user would trust a private CA."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

import loadline.client.endpoint as endpoint
from loadline.client.connection import ConnectError, Connection
from loadline.client.failures import classify
from loadline.client.streaming import StreamResult, chat_content, read_stream
from loadline.core.records import ErrorClass

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")

SERVER = r"""
import socket, ssl, sys, time
context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
context.load_cert_chain(sys.argv[1], sys.argv[2])
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
listener.settimeout(20)
def event(text, finish):
    return ('data: {"choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":%s}]}\n\n' % (text, finish)).encode()
def chunk(data):
    return b"%x\r\n" % len(data) + data + b"\r\n"
for _ in range(int(sys.argv[3])):
    raw, _ = listener.accept()
    try:
        conn = context.wrap_socket(raw, server_side=True)
    except (ssl.SSLError, OSError):
        raw.close()
        continue
    with conn:
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        for text in ("a", "b"):
            time.sleep(0.05)
            conn.sendall(chunk(event(text, "null")))
        time.sleep(0.05)
        conn.sendall(chunk(event("c", '"stop"') + b"data: [DONE]\n\n") + b"0\r\n\r\n")
        time.sleep(0.2)
"""


@pytest.fixture
def tls_server(tmp_path):
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    servers: list[subprocess.Popen] = []

    def start(connections: int) -> int:
        server = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(cert), str(key), str(connections)], stdout=subprocess.PIPE, text=True
        )
        servers.append(server)
        return int(server.stdout.readline())

    yield start, cert
    for server in servers:
        server.kill()
        server.wait(10)


def test_a_stream_over_tls_is_read_whole_with_read_time_stamps(tls_server, monkeypatch):
    start, cert = tls_server
    port = start(1)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    monkeypatch.setattr(endpoint, "_tls", [])  # a fresh default context reads SSL_CERT_FILE
    conn = Connection(f"https://127.0.0.1:{port}", 10, 10)
    response = conn.post("/v1/chat/completions", b"{}")
    result = StreamResult()
    read_stream(response, chat_content, result)
    response.close()
    conn.close()
    assert response.status == 200 and response.connect_ms > 0
    assert result.text == "abc" and result.finish_reason == "stop" and result.done
    assert result.clock == "user"  # no kernel stamps for decrypted bytes
    gaps = [b - a for a, b in zip(result.arrivals, result.arrivals[1:])]
    assert all(0.03 < gap < 1.0 for gap in gaps), gaps  # the server's 50 ms pauses, not one burst


def test_an_untrusted_certificate_is_a_connect_error(tls_server, monkeypatch):
    start, _ = tls_server
    port = start(1)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.setattr(endpoint, "_tls", [])
    conn = Connection(f"https://127.0.0.1:{port}", 10, 10)
    with pytest.raises(ConnectError) as failure:
        conn.post("/v1/chat/completions", b"{}")
    assert classify(failure.value) == ErrorClass.CONNECT and "TLS" in str(failure.value)
