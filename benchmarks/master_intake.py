"""Records per second one Locust master takes in from N workers, and its CPU per 1,000 records.

    .venv/bin/python benchmarks/master_intake.py [--workers 1 2 4] [--rates 20000 40000 60000]
        [--seconds 20] [--rounds 1]

A real master (`locust --master`, the loadline plugin: run folder, clock sync, fleet watch, live
stats) and N real worker processes of benchmarks/intake_locustfile.py, whose users put chat-sized
records (a 64-token streamed reply: 63 gaps in `itl_us`, ~560 bytes a row in requests.csv) into
the worker's record buffer at a fixed total rate; each worker's own shipper sends them once a
second over Locust's messages (loadline/runtime/transport.py), as in a real run. No HTTP traffic:
the workers' CPU goes into building and sending batches, the master's into taking them in.

Over a window after the warm-up it reads the master's CPU time (/proc/PID/stat) and the rows that
reached requests.csv; prints offered and accepted records/s, the master's CPU % and CPU-s per 1,000
records, the records/s one master core would take at that cost (1,000 / CPU-s per 1k), the
workers' CPU %, and the 1-minute load average (the machine is shared: read figures beside it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generator_throughput import REPO, cpu_seconds, free_port  # noqa: E402  (the benchmarks' shared helpers)

LOCUSTFILE = REPO / "benchmarks" / "intake_locustfile.py"
WARMUP_S = 5.0


def measure(workers: int, rate: float, seconds: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        port = free_port()
        env = {**os.environ, "PYTHONPATH": str(REPO), "INTAKE_RATE": str(rate / workers)}
        common = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--loglevel", "WARNING"]
        master = subprocess.Popen(
            [
                *common,
                "--master",
                "--headless",
                "--master-bind-host",
                "127.0.0.1",
                "--master-bind-port",
                str(port),
                "--expect-workers",
                str(workers),
                "-u",
                str(workers),
                "-r",
                str(workers),
                "-t",
                f"{seconds}s",
                "--run-dir",
                str(run_dir),
                "--only-summary",
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        fleet = [
            subprocess.Popen(
                [*common, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)],
                cwd=REPO,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(workers)
        ]
        try:
            requests_csv = run_dir / "requests.csv"
            deadline = time.monotonic() + 30
            while not requests_csv.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(WARMUP_S)
            span = max(2.0, seconds - WARMUP_S - 3.0)
            t0, c0, b0 = time.time(), cpu_seconds(master.pid), requests_csv.stat().st_size
            w0 = sum(cpu_seconds(p.pid) for p in fleet)
            time.sleep(span)
            t1, c1, b1 = time.time(), cpu_seconds(master.pid), requests_csv.stat().st_size
            w1 = sum(cpu_seconds(p.pid) for p in fleet)
            load = os.getloadavg()[0]
            try:  # a master that fell behind is still taking in queued batches when the run ends
                master.wait(timeout=seconds + 30)
                finished = True
            except subprocess.TimeoutExpired:
                finished = False
        finally:
            for proc in (master, *fleet):
                if proc.poll() is None:
                    proc.kill()
                proc.wait(10)
        manifest = json.loads((run_dir / "manifest.json").read_text())
        rows = int(manifest.get("requests_written") or 0)
        with requests_csv.open("rb") as f:
            f.readline()  # the header
            sample = [len(f.readline()) for _ in range(2000)]
        bytes_per_row = sum(sample) / max(1, sum(1 for n in sample if n))
    accepted = (b1 - b0) / bytes_per_row
    cpu_per_1k = (c1 - c0) / max(accepted, 1) * 1000
    return {
        "workers": workers,
        "offered/s": rate,
        "accepted/s": accepted / (t1 - t0),
        "master CPU %": 100 * (c1 - c0) / (t1 - t0),
        "master CPU-s per 1k": cpu_per_1k,
        "records/s per master core": 1000 / cpu_per_1k if cpu_per_1k else float("nan"),
        "workers CPU %": 100 * (w1 - w0) / (t1 - t0),
        "rows written": rows,
        "ended in time": "yes" if finished else "no (still draining)",
        "bytes/row": bytes_per_row,
        "load avg 1m": load,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--rates", type=float, nargs="+", default=[20_000, 40_000, 60_000])
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    header = False
    for _ in range(args.rounds):
        for workers in args.workers:
            for rate in args.rates:
                row = measure(workers, rate, args.seconds)
                if not header:
                    print("| " + " | ".join(row) + " |")
                    print("|" + "---|" * len(row))
                    header = True
                cells = [v if isinstance(v, str) else f"{v:,.0f}" if abs(v) >= 10 else f"{v:.3g}" for v in row.values()]
                print("| " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
