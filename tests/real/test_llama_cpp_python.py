"""Loadline against llama-cpp-python's `llama_cpp.server` with its defaults (issue 10).

Its default `interrupt_requests=true` makes a new request cut the stream in flight: HTTP 200, a role
chunk, maybe some content, then `data: [DONE]` with no finish_reason. Those replies are failures
(`truncated`), and a run full of them must not PASS. The server also accepts only UUIDs in
X-Request-Id (anything else: an empty HTTP 400).

Needs `pip install 'llama-cpp-python[server]==0.3.36'`, which compiles llama.cpp (~15-20 min on
2 cores): not installed by `make real-engine`, so this test skips with that reason when the module
is missing.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pandas as pd
import pytest

from real_helpers import free_port, wait_healthy

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None,
    reason="llama_cpp.server not importable: pip install 'llama-cpp-python[server]==0.3.36' "
           "(compiles llama.cpp, ~15-20 min on 2 cores)")


@pytest.fixture
def python_server(llama_model, real_dir):
    port = free_port()
    log = real_dir / "llama_cpp.server.log"
    with open(log, "wb") as handle:
        # its defaults: one request at a time behind a lock, interrupt_requests=true
        proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(llama_model),
                                 "--host", "127.0.0.1", "--port", str(port)], stdout=handle, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url + "/v1/models", proc, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_interrupted_streams_are_failures_and_the_run_does_not_pass(python_server, loadline_run, real_summary):
    run = loadline_run(python_server, "--scenario", "chat", "--users", "4", "--run-time", "40s",
                       locust=("--max-tokens", "64", "--think-mean", "1", "--think-p90", "2", "--prompt-mix", "short=1"))
    rows = run.requests
    status = pd.to_numeric(rows["http_status"], errors="coerce")
    truncated = rows[rows["error_class"].astype(str) == "truncated"]
    ok = rows[rows["status"] == "ok"]
    real_summary("llama_cpp.server: truncated / ok / HTTP 400 / exit code",
                 f"{len(truncated)} / {len(ok)} / {int((status == 400).sum())} of {len(rows)} / {run.returncode}")
    assert (status != 400).all(), "a request id the server refused (it takes UUIDs only)"
    assert len(truncated) > 0  # four users on a server that serves one and interrupts the rest
    assert (truncated["status"] == "error").all()
    assert ok["finish_reason"].astype(str).isin(["stop", "length"]).all()  # ok means the reply finished
    assert run.returncode != 0 and "PASS" not in run.summary.splitlines()[0], run.summary[:500]
