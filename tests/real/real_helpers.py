"""Helpers of the real-engine suite: start and read llama.cpp's server, run Loadline, stage files."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

CACHE = Path(os.environ.get("LOADLINE_CACHE", Path.home() / ".cache" / "loadline"))
LLAMA_VERSION = os.environ.get("LLAMA_CPP_PYTHON_VERSION", "0.3.36")
STARTUP_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - 127.0.0.1 only
        return response.read()


def wait_healthy(url: str, proc: subprocess.Popen, log: Path, timeout: float = STARTUP_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            get(url, timeout=1.0)
            return
        except (urllib.error.URLError, OSError):
            time.sleep(0.2)
    raise RuntimeError(f"server not healthy after {timeout:.0f} s: {log.read_text()[-2000:]}")


@dataclass
class Server:
    url: str
    proc: subprocess.Popen
    log: Path
    parallel: int

    def metrics(self) -> dict[str, float]:
        """The unlabelled samples of /metrics, by name."""
        out = {}
        for line in get(self.url + "/metrics").decode().splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
        return out

    def props(self) -> dict:
        return json.loads(get(self.url + "/props"))

    def timings(self) -> list[dict]:
        """The server's own per-request timings, in completion order (its `print_timing` log lines)."""
        text = self.log.read_text(errors="replace")
        prompt = re.findall(r"task (\d+) \| prompt eval time =\s+([\d.]+) ms /\s+(\d+) tokens", text)
        decode = {
            t: (float(ms), int(n), float(per))
            for t, ms, n, per in re.findall(
                r"task (\d+) \|\s+eval time =\s+([\d.]+) ms /\s+(\d+) tokens \(\s*([\d.]+) ms per token", text
            )
        }
        return [
            {
                "task": int(t),
                "prompt_ms": float(ms),
                "prompt_n": int(n),
                "predicted_ms": decode[t][0],
                "predicted_n": decode[t][1],
                "predicted_per_token_ms": decode[t][2],
            }
            for t, ms, n in prompt
            if t in decode
        ]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


def llama_server_binary() -> Path:
    path = Path(os.environ.get("LLAMA_SERVER", CACHE / f"llama.cpp-{LLAMA_VERSION}" / "build" / "bin" / "llama-server"))
    if not path.exists():
        pytest.skip(f"no llama-server at {path}: build it with tests/real/build_llama_server.sh (make real-engine)")
    return path


@dataclass
class Run:
    folder: Path
    returncode: int
    output: str

    @property
    def requests(self) -> pd.DataFrame:
        return pd.read_csv(self.folder / "requests.csv")

    @property
    def verdict(self) -> dict:
        return json.loads((self.folder / "report" / "verdict.json").read_text())

    @property
    def summary(self) -> str:
        return (self.folder / "report" / "summary.md").read_text()


def stages_file(path: Path, *stages: tuple[str, int, int]) -> Path:
    """A stages TOML: (label, users, seconds) each."""
    text = "".join(
        f'[[stage]]\nlabel = "{label}"\nusers = {users}\nduration = {seconds}\n\n' for label, users, seconds in stages
    )
    path.write_text(text)
    return path
