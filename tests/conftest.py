"""Shared fixtures. `sim_server` starts the simulator in a subprocess on a free port."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT_S = 20.0


@dataclass
class SimHandle:
    url: str  # e.g. http://127.0.0.1:43121
    truth_path: Path
    admin_url: str | None  # None unless "--admin" was passed
    proc: subprocess.Popen

    def stop(self) -> int:
        """SIGTERM and wait (the truth log is flushed on the way out); returns the exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        return self.proc.returncode


def _read_line(proc: subprocess.Popen, deadline: float, stderr_path: Path) -> str:
    line = b""
    while not line.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or proc.poll() is not None:
            raise RuntimeError(f"simulator did not start: {stderr_path.read_text(errors='replace')[-2000:]}")
        ready, _, _ = select.select([proc.stdout], [], [], min(remaining, 0.5))
        if ready:
            byte = os.read(proc.stdout.fileno(), 1)
            if not byte:
                continue
            line += byte
    return line.decode().strip()


@pytest.fixture
def sim_server(tmp_path):
    """Factory: sim_server(profile="tiny", *extra_args) -> SimHandle; every server is stopped at teardown."""
    handles: list[SimHandle] = []

    def start(profile: str = "tiny", *extra_args: str) -> SimHandle:
        truth = tmp_path / f"truth-{len(handles)}.jsonl"
        cmd = [sys.executable, "-m", "simulator", "--profile", profile, "--port", "0", "--truth", str(truth),
               *extra_args]
        stderr_path = tmp_path / f"sim-{len(handles)}.stderr"
        with open(stderr_path, "wb") as stderr:  # a file, not a pipe: a chatty server cannot block on it
            proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=stderr)
        handle = SimHandle("", truth, None, proc)
        handles.append(handle)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        first = _read_line(proc, deadline, stderr_path)
        prefix = "loadline-sim listening on "
        assert first.startswith(prefix), first
        handle.url = first[len(prefix):]
        if "--admin" in extra_args:
            handle.admin_url = _read_line(proc, deadline, stderr_path).split(" on ", 1)[1]
        return handle

    yield start
    for handle in handles:
        handle.stop()
