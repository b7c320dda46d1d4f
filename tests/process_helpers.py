"""Helpers for tests that run Locust (or any server) as a real background process on loopback."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def default_sigint() -> None:
    """In the child before it runs: SIGINT back to its default. A suite started in the background
    (`make test &`, nohup) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt
    handler: the Ctrl-C the tests send (stop()) would never arrive."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(cmd: list[str], cwd: Path, log_path: Path, env: dict | None = None) -> subprocess.Popen:
    """Output goes to a file, not a pipe: a chatty process can never block on a full pipe."""
    with open(log_path, "wb") as log:
        return subprocess.Popen(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=default_sigint)


def locust_command(master_heartbeat_timeout_s: float | None = None) -> list[str]:
    """`python -m locust`, or the same entry with Locust's worker-side MASTER_HEARTBEAT_TIMEOUT (60 s)
    set first: WorkerRunner.heartbeat_timeout_checker reads that module global on every tick, so the
    worker's own code path is unchanged, only the silence it waits for is shorter."""
    if master_heartbeat_timeout_s is None:
        return [sys.executable, "-m", "locust"]
    return [
        sys.executable,
        "-c",
        "import sys, locust.runners; "
        f"locust.runners.MASTER_HEARTBEAT_TIMEOUT = {master_heartbeat_timeout_s!r}; "
        "sys.argv[0] = 'locust'; from locust.main import main; main()",
    ]


def start_locust_cluster(
    locustfile: Path,
    master_args: list[str],
    cwd: Path,
    log_dir: Path,
    workers: int = 2,
    master_heartbeat_timeout_s: float | None = None,
    worker_env: list[dict | None] | None = None,
    worker_args: list[list[str]] | None = None,
) -> tuple[subprocess.Popen, list[subprocess.Popen]]:
    """A headless Locust master on a free loopback port and `workers` workers, each logging to
    log_dir/master.log, log_dir/worker{i}.log. The master expects all of them before it starts.
    `master_heartbeat_timeout_s`: how long the workers wait on a silent master (Locust's default: 60 s).
    `worker_env`, `worker_args`: per worker, its environment (None: ours) and extra command-line options."""
    port = free_port()
    master = start(
        [
            sys.executable,
            "-m",
            "locust",
            "-f",
            str(locustfile),
            "--master",
            "--master-bind-host",
            "127.0.0.1",
            "--master-bind-port",
            str(port),
            "--headless",
            "--expect-workers",
            str(workers),
            *master_args,
        ],
        cwd,
        log_dir / "master.log",
    )
    worker = [*locust_command(master_heartbeat_timeout_s), "-f", str(locustfile)]
    started = [
        start(
            [
                *worker,
                "--worker",
                "--master-host",
                "127.0.0.1",
                "--master-port",
                str(port),
                *((worker_args or [])[i] if i < len(worker_args or []) else []),
            ],
            cwd,
            log_dir / f"worker{i}.log",
            env=(worker_env or [])[i] if i < len(worker_env or []) else None,
        )
        for i in range(workers)
    ]
    return master, started


def wait_for_http(url: str, proc: subprocess.Popen, log_path: Path, timeout_s: float = 30.0) -> None:
    """Until `url` answers (any HTTP status); fails with the process's log when it dies or times out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"process exited ({proc.returncode}): {tail(log_path)}")
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{url} did not answer within {timeout_s} s: {tail(log_path)}")


def wait_until(predicate, timeout_s: float, what: str, interval_s: float = 0.2):
    """Poll `predicate` until it returns something truthy (returned) or fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def stop(proc: subprocess.Popen, timeout_s: float = 20.0, sig: int = signal.SIGINT) -> int:
    """SIGINT first (Locust then stops the test and closes the run folder), kill as a last resort.

    `sig=signal.SIGTERM`: Locust's own handler shuts down in its main greenlet; a SIGINT raises
    KeyboardInterrupt in whichever greenlet runs (printed as a crash when it is not the main one)."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    return proc.returncode


def tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


def web_ui_command(port: int, host: str, out: Path, *extra: str) -> list[str]:
    """Locust's web UI on 127.0.0.1:`port` with the chat users and every shape (the class picker), as a
    QA team starts it, writing run folders under `out`."""
    return [
        sys.executable,
        "-m",
        "locust",
        "-f",
        "locustfiles/chat.py,locustfiles/shape.py",
        "--class-picker",
        "--web-host",
        "127.0.0.1",
        "--web-port",
        str(port),
        "--host",
        host,
        "--out",
        str(out),
        *extra,
    ]
