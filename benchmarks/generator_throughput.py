"""How much load one generator process drives, at what CPU cost, and how true its TTFT stays.

Setup (the brief's "figures to beat"): a reference target that streams every token 10 ms apart
after a 100 ms TTFT (the embedded simulator with a flat cost model), N concurrent streams of 256
tokens, one Locust process pinned to one core (the simulator on the other). Prints a table:
streams, tokens/s received, generator CPU-s per 1,000 tokens, TTFT error vs the simulator's truth
(p50/p99), and the generator's own saturation signal (CPU %).

    python benchmarks/generator_throughput.py [--streams 16 64 256] [--seconds 20]
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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from loadline.runtime.simprocess import start_simulator  # noqa: E402

FLAT_10MS = ["weights_gib=0.001", "kv_bytes_per_token=1", "hbm_bandwidth_gbs=100000", "peak_tflops=100000",
             "step_overhead_ms=10", "per_layer_overhead_us=0", "request_overhead_ms=100", "max_num_seqs=1024",
             "num_gpu_blocks=200000", "max_num_batched_tokens=65536", "max_model_len=65536"]


def pin(core: int) -> list[str]:
    return ["taskset", "-c", str(core)] if os.cpu_count() and os.cpu_count() > 1 else []


def one(streams: int, seconds: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        sim = start_simulator(["--profile", "tiny", "--truth", str(Path(tmp) / "truth.jsonl"),
                               *sum((["--set", kv] for kv in FLAT_10MS), [])])
        try:
            subprocess.run(["taskset", "-cp", "0", str(sim.proc.pid)], capture_output=True)
            cmd = [*pin(1), sys.executable, "-m", "locust", "-f", str(REPO / "locustfiles" / "single_shot.py"),
                   "--headless", "-u", str(streams), "-r", str(streams), "-t", f"{seconds}s", "--host", sim.url,
                   "--run-dir", str(run_dir), "--max-tokens", "256", "--ignore-eos", "--event-interval", "0",
                   "--prompt-mix", "short=1", "--only-summary", "--loglevel", "WARNING"]
            proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _, status, usage = os.wait4(proc.pid, 0)
            cpu = usage.ru_utime + usage.ru_stime
        finally:
            sim.stop()
        records = pd.read_csv(run_dir / "requests.csv")
        truth = pd.DataFrame(json.loads(line) for line in (Path(tmp) / "truth.jsonl").read_text().splitlines())
        manifest = json.loads((run_dir / "manifest.json").read_text())
    span = manifest["ended_at"] - manifest["started_at"]
    tokens = int(records.content_chunks.sum())
    merged = records[records.status == "ok"].merge(truth, on="request_id", suffixes=("", "_t"))
    err = (merged.ttft_ms - (merged.first_token - merged.arrival) * 1000).abs()
    return {"streams": streams, "tokens/s": tokens / span, "CPU-s per 1k tokens": cpu / tokens * 1000,
            "generator CPU %": 100 * cpu / span, "TTFT err p50 ms": err.quantile(0.5),
            "TTFT err p99 ms": err.quantile(0.99), "requests": len(records)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--seconds", type=int, default=20)
    args = parser.parse_args()
    rows = [one(n, args.seconds) for n in args.streams]
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:,.3f}"))


if __name__ == "__main__":
    main()
