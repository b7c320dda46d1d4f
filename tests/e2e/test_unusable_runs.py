"""A run whose setup is wrong is unusable: exit 2 with the reason, and a report that shows what came back.

Real processes: `loadline run` against the simulator with a wrong API key (401), and against a
stdlib HTTP server in this test that answers 404, or an HTML login page with 200 (what a corporate
SSO proxy does to an unauthenticated API call).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.spine_helpers import loadline, requests_table
from tests.surfaces import assert_surfaces_agree

FAST_USER = ["--think-mean", "0.3", "--think-p90", "0.6", "--prompt-mix", "short=1", "--max-tokens", "16"]
LOGIN_PAGE = (
    b"<!DOCTYPE html><html><head><title>Sign in - Example SSO</title></head><body>"
    b"<form action='/login?next=https://bob:hunter2pass@api.local/v1'><input name=user></form></body></html>"
)


class _Handler(BaseHTTPRequestHandler):
    mode = "404"

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if self.mode == "html":
            status, ctype, body = 200, "text/html; charset=utf-8", LOGIN_PAGE
        else:
            status, ctype, body = 404, "text/plain; charset=utf-8", b"404 page not found"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args) -> None:  # keep the test output clean
        pass


@pytest.fixture
def foreign_server():
    """start(mode) -> base URL of a local server that is not an inference API."""
    servers: list[ThreadingHTTPServer] = []

    def start(mode: str) -> str:
        handler = type("Handler", (_Handler,), {"mode": mode})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _assert_unusable(done, status: int, content_type: str) -> dict:
    assert done.code == 2, done.stderr[-3000:]
    reasons = [line for line in done.stderr.splitlines() if line.startswith("loadline run: unusable run:")]
    assert len(reasons) == 1 and f"HTTP {status}" in reasons[0], done.stderr[-3000:]
    verdict = json.loads((done.run_dir / "report" / "verdict.json").read_text())
    setup = verdict["validity"]["setup_failure"]
    assert setup["http_status"] == status and setup["content_type"].startswith(content_type)
    assert verdict["bottleneck"]["layer"] is None  # no capacity statement from a run that never got through
    summary = (done.run_dir / "report" / "summary.md").read_text()
    assert "UNUSABLE" in summary and "headroom" not in summary
    assert "Traceback" not in done.stderr
    assert_surfaces_agree(done.run_dir, 2, log=done.stderr)  # one answer on every surface, the log line too
    return verdict


def test_wrong_api_key_is_unusable_with_the_401_shown(sim_server, tmp_path):
    sim = sim_server("tiny", "--api-key", "right-key")
    wrong = "sk-wrong-key-0123456789abcdef"
    done = loadline(
        "run",
        "--host",
        sim.url,
        "--users",
        "2",
        "--run-time",
        "6s",
        "--out",
        str(tmp_path),
        "--",
        *FAST_USER,
        env={"LOADLINE_API_KEY": wrong},
    )
    verdict = _assert_unusable(done, 401, "application/json")
    assert "--api-key" in verdict["validity"]["reason"]
    # each refused attempt is a row of its own: an HTTP error with the 401 (was its own run in
    # tests/e2e/test_run_spine.py, the same server, key and users: this run's records serve it)
    records = requests_table(done.run_dir)
    failed = records[records.status == "error"]
    assert len(failed) > 0 and (failed.http_status == 401).all() and (failed.error_class == "http").all()
    for path in done.run_dir.rglob("*"):
        if path.is_file():
            assert wrong.encode() not in path.read_bytes(), path
    # `loadline report` on the same folder says the same, with the same exit code (no charts: the run's
    # own report above drew them, and the verdict and exit code do not depend on them)
    again = loadline("report", str(done.run_dir), "--no-charts", timeout=60)
    assert again.code == 2 and "loadline report: unusable run:" in again.stderr


def test_wrong_path_is_unusable_with_the_404_and_body_shown(foreign_server, tmp_path):
    done = loadline(
        "run",
        "--host",
        foreign_server("404"),
        "--users",
        "2",
        "--run-time",
        "6s",
        "--out",
        str(tmp_path),
        "--no-charts",
        "--",
        *FAST_USER,
    )
    verdict = _assert_unusable(done, 404, "text/plain")
    assert verdict["validity"]["setup_failure"]["body_sample"] == "404 page not found"


def test_html_login_page_with_200_is_not_an_event_stream(foreign_server, tmp_path):
    done = loadline(
        "run",
        "--host",
        foreign_server("html"),
        "--users",
        "2",
        "--run-time",
        "6s",
        "--out",
        str(tmp_path),
        "--no-charts",
        "--",
        *FAST_USER,
    )
    verdict = _assert_unusable(done, 200, "text/html")
    setup = verdict["validity"]["setup_failure"]
    assert setup["kind"] == "not_event_stream" and "<title>Sign in" in setup["body_sample"]
    assert "hunter2pass" not in (done.run_dir / "report" / "report.html").read_text()
    records = requests_table(done.run_dir)
    answered = records[records.http_status > 0]  # an attempt cancelled at the stop never got headers
    assert len(answered) and answered.content_type.astype(str).str.startswith("text/html").all()
