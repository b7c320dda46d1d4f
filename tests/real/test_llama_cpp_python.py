"""Loadline against llama-cpp-python's `llama_cpp.server` with its defaults.

Its default `interrupt_requests=true` makes a new request cut the stream in flight: HTTP 200, a role
chunk, maybe some content, then `data: [DONE]` with no finish_reason. Those replies are failures
(`truncated`), and a run full of them must not PASS. The server also accepts only UUIDs in
X-Request-Id (anything else: an empty HTTP 400).

The server runs under the interpreter in LLAMA_CPP_PYTHON, which `make real-engine` sets from
tests/real/install_llama_cpp_python.sh: the sdist's Python package on the shared libraries that
build_llama_server.sh already compiled (LLAMA_CPP_LIB_PATH), so llama.cpp is compiled once. Without
it, this interpreter is used if it can import llama_cpp.server; otherwise the test skips and says so.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from real_helpers import free_port, llama_server_binary, wait_healthy


def server_python() -> tuple[str, dict[str, str]]:
    """The interpreter that runs llama_cpp.server and its environment, or skip with the way to get one."""
    python = os.environ.get("LLAMA_CPP_PYTHON", sys.executable)
    env = dict(os.environ)
    env.setdefault("LLAMA_CPP_LIB_PATH", str(Path(llama_server_binary()).parent))
    probe = subprocess.run([python, "-c", "import llama_cpp.server.app"], env=env, capture_output=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(
            f"{python} cannot import llama_cpp.server: run tests/real/install_llama_cpp_python.sh "
            "and set LLAMA_CPP_PYTHON to the interpreter it prints (make real-engine does both)"
        )
    return python, env


@pytest.fixture
def python_server(llama_model, real_dir):
    python, env = server_python()
    port = free_port()
    log = real_dir / "llama_cpp.server.log"
    with open(log, "wb") as handle:
        # its defaults: one request at a time behind a lock, interrupt_requests=true
        proc = subprocess.Popen(
            [python, "-m", "llama_cpp.server", "--model", str(llama_model), "--host", "127.0.0.1", "--port", str(port)],
            stdout=handle,
            stderr=subprocess.STDOUT,
            env=env,
        )
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
    run = loadline_run(
        python_server,
        "--scenario",
        "chat",
        "--users",
        "4",
        "--run-time",
        "40s",
        locust=("--max-tokens", "64", "--think-mean", "1", "--think-p90", "2", "--prompt-mix", "short=1"),
    )
    rows = run.requests
    status = pd.to_numeric(rows["http_status"], errors="coerce")
    truncated = rows[rows["error_class"].astype(str) == "truncated"]
    ok = rows[rows["status"] == "ok"]
    real_summary(
        "llama_cpp.server: truncated / ok / HTTP 400 / exit code",
        f"{len(truncated)} / {len(ok)} / {int((status == 400).sum())} of {len(rows)} / {run.returncode}",
    )
    assert (status != 400).all(), "a request id the server refused (it takes UUIDs only)"
    assert len(truncated) > 0  # four users on a server that serves one and interrupts the rest
    assert (truncated["status"] == "error").all()
    assert ok["finish_reason"].astype(str).isin(["stop", "length"]).all()  # ok means the reply finished
    assert run.returncode != 0 and "PASS" not in run.summary.splitlines()[0], run.summary[:500]
