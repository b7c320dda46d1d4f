"""Tokens/s of N local Locust workers against one, and the CPU each token costs.

    .venv/bin/python benchmarks/worker_scaling.py [--workers 1 2] [--streams 512] [--seconds 20] [--rounds 2]
        [--worker-cpu 0.5]

The simulator with benchmarks/generator_throughput.py's flat cost model (a token every 10 ms after
100 ms, 64-token replies, no batch limit), then a Locust master and N worker processes of
locustfiles/single_shot.py (`--ignore-eos`, the plugin's shipper, scraper and samplers included)
sharing the same STREAMS users. Over the load window it counts the tokens that arrived (from
requests.csv: each reply's first token and gaps) and reads the CPU time of the workers, the master
and the simulator (/proc/PID/stat). Printed per run: offered and received tokens/s, the workers'
CPU-s per 1,000 tokens (the figure that carries over to other machines: a worker core takes
1 / that thousand tokens a second), each part's CPU %, and the 1-minute load average.

On a 2-core machine the simulator and the master share the cores with the workers: with N
workers that each want a core, received tokens/s is bounded by what the box has left, so read
the ratio of tokens/s beside the CPU columns (docs/benchmarks.md, "Worker scaling").
`--worker-cpu C` caps each worker at C cores (benchmarks/cpu_cap.py, root only), so that N workers
get N times one worker's CPU while the target keeps what it needs: the ratio then measures the
generator's own scaling.
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

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_cap import CpuCap  # noqa: E402
from generator_throughput import REPO, cpu_seconds, flat_model, free_port, start_simulator, token_times  # noqa: E402

WARMUP_S, COOLDOWN_S = 4.0, 2.0
STEP_MS, TTFT_MS, TOKENS = 10.0, 100.0, 64


def measure(workers: int, streams: int, seconds: int, cores_each: float | None = None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        sim = start_simulator(["--profile", "tiny", *sum((["--set", kv] for kv in flat_model(STEP_MS, TTFT_MS)), [])])
        procs: list[subprocess.Popen] = []
        caps: list[CpuCap] = []
        try:
            port = free_port()
            env = {**os.environ, "PYTHONPATH": str(REPO)}
            common = [sys.executable, "-m", "locust", "-f", str(REPO / "locustfiles" / "single_shot.py")]
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
                    str(streams),
                    "-r",
                    str(streams),
                    "-t",
                    f"{seconds}s",
                    "--host",
                    sim.url,
                    "--run-dir",
                    str(run_dir),
                    "--max-tokens",
                    str(TOKENS),
                    "--ignore-eos",
                    "--event-interval",
                    "0",
                    "--prompt-mix",
                    "short=1",
                    "--only-summary",
                    "--loglevel",
                    "WARNING",
                ],
                cwd=REPO,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            procs.append(master)
            fleet = [
                subprocess.Popen(
                    [
                        *common,
                        "--worker",
                        "--master-host",
                        "127.0.0.1",
                        "--master-port",
                        str(port),
                        "--loglevel",
                        "WARNING",
                    ],
                    cwd=REPO,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for _ in range(workers)
            ]
            procs += fleet
            if cores_each:
                for k, proc in enumerate(fleet):
                    caps.append(CpuCap(f"loadline-bench-{os.getpid()}-{k}", cores_each))
                    caps[-1].add(proc.pid)
            requests_csv = run_dir / "requests.csv"
            deadline = time.monotonic() + 30
            while not requests_csv.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(WARMUP_S)
            span = max(2.0, seconds - WARMUP_S - COOLDOWN_S - 1.0)

            def cpu() -> tuple[float, float, float]:
                return (
                    sum(cpu_seconds(p.pid) for p in fleet),
                    cpu_seconds(master.pid),
                    cpu_seconds(sim.proc.pid),
                )

            t0, c0 = time.time(), cpu()
            time.sleep(span)
            t1, c1 = time.time(), cpu()
            load = os.getloadavg()[0]
            master.wait(timeout=seconds + 90)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                proc.wait(10)
            for cap in caps:
                cap.remove()
            sim.stop()
        manifest = json.loads((run_dir / "manifest.json").read_text())
        records = pd.read_csv(requests_csv, low_memory=False)
    got = records[records.ttft_ms.notna()]
    arrivals, _ = token_times(got)
    tokens = int(((arrivals >= t0) & (arrivals < t1)).sum())
    wall = t1 - t0
    worker_cpu, master_cpu, sim_cpu = (b - a for a, b in zip(c0, c1))
    return {
        "workers": workers,
        "cores per worker": cores_each or 0,
        "streams": streams,
        "offered tok/s": streams * TOKENS / ((TTFT_MS + (TOKENS - 1) * STEP_MS) / 1000),
        "tokens/s": tokens / wall,
        "workers CPU-s per 1k tok": worker_cpu / max(tokens, 1) * 1000,
        "workers CPU %": 100 * worker_cpu / wall,
        "master CPU %": 100 * master_cpu / wall,
        "sim CPU %": 100 * sim_cpu / wall,
        "workers lost": len(manifest.get("workers_lost") or []),
        "load avg 1m": load,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--streams", type=int, default=512)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--worker-cpu", type=float, default=None, help="cap each worker at this many cores")
    args = parser.parse_args()
    print(f"started at load average {os.getloadavg()[0]:.2f}", flush=True)
    header = False
    for _ in range(args.rounds):  # rounds interleave N = 1 and N = 2, so both see the same phases of the box
        for workers in args.workers:
            row = measure(workers, args.streams, args.seconds, args.worker_cpu)
            if not header:
                print("| " + " | ".join(row) + " |")
                print("|" + "---|" * len(row))
                header = True
            cells = [f"{v:,.0f}" if abs(v) >= 10 else f"{v:.3g}" for v in row.values()]
            print("| " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
