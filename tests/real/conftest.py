"""The real-engine suite: Loadline against llama.cpp's own servers, not part of `make test`.

Run it with `make real-engine`: that builds `llama-server` from source (tests/real/build_llama_server.sh,
cached outside the repo), writes the tiny model (tests/real/make_tiny_gguf.py) and runs this folder
with LOADLINE_REAL=1. Without LOADLINE_REAL=1 every test here is skipped with that hint, so the
plain `pytest` of `make test` collects them cheaply and runs none.

Fixtures:
- `llama_model`: the tiny GGUF (written on first use, cached);
- `llama_server(parallel=8)`: a fresh `llama-server` per call on a free port (its own counters and
  log, kept in the test's folder), stopped at teardown;
- `loadline_run(url, *args)`: one headless `python -m loadline run`, bounded in time, its folder
  kept under runs/real-suite/<test>/ (`real_dir`);
- `real_summary`: rows for the suite's summary table (written at the end of the session to
  $LOADLINE_REAL_SUMMARY, default runs/real-suite-summary.md).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import make_tiny_gguf  # a script beside this file (tests/real is on sys.path, as pytest puts it there)
import pytest
from real_helpers import Run, Server, free_port, llama_server_binary, wait_healthy

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
ENABLED = os.environ.get("LOADLINE_REAL") == "1"


def pytest_collection_modifyitems(config, items):
    """Mark every test of this folder `real`; skip them unless LOADLINE_REAL=1 (make real-engine)."""
    skip = pytest.mark.skip(reason="real-engine suite: run `make real-engine` (sets LOADLINE_REAL=1)")
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.real)
            if not ENABLED:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def llama_model() -> Path:
    path = make_tiny_gguf.default_path()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        make_tiny_gguf.write(path)
    return path


@pytest.fixture
def real_dir(request) -> Path:
    """This test's folder, kept for reading after the suite: $LOADLINE_REAL_OUT/<test>/ (default
    runs/real-suite/), emptied when the test starts. Server logs and run folders go there."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    path = Path(os.environ.get("LOADLINE_REAL_OUT", REPO / "runs" / "real-suite")) / name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


@pytest.fixture
def llama_server(real_dir, llama_model):
    """Factory: llama_server(parallel=8, slot_ctx=2048) -> Server, as REFERENCE-llamacpp.md runs it (one thread)."""
    binary = llama_server_binary()
    servers: list[Server] = []

    def start(parallel: int = 8, slot_ctx: int = make_tiny_gguf.N_CTX) -> Server:
        port = free_port()
        log = real_dir / f"llama-server-{len(servers)}.log"
        ctx = slot_ctx * parallel  # llama-server splits -c among its slots: each gets slot_ctx
        handle = open(log, "wb")  # noqa: SIM115 - owned by the child; closed below
        proc = subprocess.Popen(
            [
                str(binary),
                "-m",
                str(llama_model),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "-c",
                str(ctx),
                "--parallel",
                str(parallel),
                "--metrics",
                "--slots",
                "--no-webui",
                "-t",
                "1",
            ],
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
        handle.close()
        server = Server(f"http://127.0.0.1:{port}", proc, log, parallel)
        servers.append(server)
        wait_healthy(server.url + "/health", proc, log)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def loadline_run(real_dir):
    """loadline_run(url, *run_args, locust=[...], timeout=...) -> Run (the newest run folder)."""
    out = real_dir / "runs"

    def run(url: str, *args: str, locust: tuple[str, ...] = (), timeout: float = 300.0) -> Run:
        cmd = [sys.executable, "-m", "loadline", "run", "--host", url, "--out", str(out), *args, "--", *locust]
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)
        folders = sorted(out.glob("*"), key=lambda p: p.stat().st_mtime)
        assert folders, f"no run folder (exit {done.returncode}): {done.stdout[-2000:]} {done.stderr[-2000:]}"
        return Run(folders[-1], done.returncode, done.stdout + done.stderr)

    return run


SUMMARY_ROWS: list[tuple[str, str, str]] = []


@pytest.fixture
def real_summary(request):
    """record(check, measured): one row of the summary table, tagged with the test's name."""

    def record(check: str, measured: str) -> None:
        SUMMARY_ROWS.append((request.node.name, check, measured))

    return record


def pytest_sessionfinish(session, exitstatus):
    if not ENABLED or not SUMMARY_ROWS:
        return
    target = Path(os.environ.get("LOADLINE_REAL_SUMMARY", REPO / "runs" / "real-suite-summary.md"))
    target.parent.mkdir(parents=True, exist_ok=True)
    lines = ["| test | check | measured |", "|---|---|---|"]
    lines += [f"| {test} | {check} | {measured} |" for test, check, measured in SUMMARY_ROWS]
    target.write_text("\n".join(lines) + "\n")
