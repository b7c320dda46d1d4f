"""Start and stop the embedded simulator as a child process (used by `loadline run` and tests)."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from loadline.core.childpython import PYTHON
from loadline.core.errors import UsageError
from loadline.core.lifeline import child_env

READY_PREFIX = "loadline-sim listening on "
ADMIN_PREFIX = "loadline-sim admin on "  # second line, with --admin


@dataclass
class SimProcess:
    proc: subprocess.Popen
    url: str
    admin_url: str = ""  # set when started with --admin

    def stop(self, timeout: float = 5.0) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        return self.proc.returncode


def start_simulator(args: list[str], log_path: Path | None = None, startup_timeout: float = 30.0) -> SimProcess:
    """Run `python -m loadline sim --port 0 ARGS` and wait (bounded) for its ready line."""
    cmd = [*PYTHON, "-m", "loadline", "sim", "--port", "0", *args]
    log_file = open(log_path, "ab") if log_path else None
    try:
        # Own session: a Ctrl-C in the terminal stops Locust gracefully while the target keeps serving
        # the streams in flight (they end as "cancelled", not as resets); we stop the simulator after.
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=log_file if log_file is not None else subprocess.DEVNULL,
            text=True,
            cwd=os.getcwd(),
            start_new_session=True,
            env=child_env(),
        )
    finally:
        if log_file is not None:
            log_file.close()  # the child has its own copy
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:  # keeps reading so the child never blocks on a full stdout pipe
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put("")

    threading.Thread(target=pump, daemon=True).start()
    try:
        first = lines.get(timeout=startup_timeout)
    except queue.Empty:
        proc.kill()
        raise UsageError(f"the simulator did not start within {startup_timeout:.0f} s") from None
    if not first.startswith(READY_PREFIX):
        proc.wait(5)
        detail = _last_line(log_path) or first.strip() or f"exit code {proc.returncode}"
        raise UsageError(f"the simulator did not start: {detail}")
    sim = SimProcess(proc, first[len(READY_PREFIX) :].strip())
    if "--admin" in args:
        try:
            second = lines.get(timeout=startup_timeout)
        except queue.Empty:
            second = ""
        if not second.startswith(ADMIN_PREFIX):
            sim.stop()
            raise UsageError(f"the simulator did not announce its admin API (got {second.strip()!r})")
        sim.admin_url = second[len(ADMIN_PREFIX) :].strip()
    return sim


def _last_line(path: Path | None) -> str:
    if not path or not path.exists():
        return ""
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""
