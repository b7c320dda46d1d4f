"""Trace replay at scale: a 10,000-request synthetic Mooncake trace replayed against the simulator.

Generates the trace (loadline/core/trace_synth.py: shared system prompts, multi-turn histories, a
unique last block per prompt), replays it with `loadline run --trace` at each --speed and --workers
given, and prints one row per run from the run folder and the simulator's truth log:
- requests scheduled / sent / never sent, and the replay's length;
- lateness (due -> sent) p50 / p99 / max, wall ms, over every first attempt;
- seconds whose sent count equals the schedule's, of all seconds (`seconds_matching`, the report's
  definition: a request due at x.999 s and sent at x+1.0005 s is a mismatch of two seconds), and
  seconds whose sent count is within one request of the schedule's (`seconds_within_1`);
- input / output tokens as the server counted them equal to the trace's, share of requests;
- the trace's block reuse (by block and by token) beside the simulator's prefix-cache hit rate
  (truth log: cached / prompt tokens) and the engine's exported counters (the report's section).

    python benchmarks/trace_replay.py [--requests 10000] [--rate 10] [--speed 1 4] [--workers 0 2]
        [--prompt-blocks 1-2] [--out runs/bench-trace]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from loadline.commands.trace_input import read_trace
from loadline.core.trace import block_reuse
from loadline.core.trace_synth import mooncake_rows, write_mooncake

REPO = Path(__file__).resolve().parents[1]


def replay(trace: Path, speed: float, workers: int, out: Path) -> Path:
    cmd = [sys.executable, "-m", "loadline", "run", "--trace", str(trace), "--trace-speed", f"{speed:g}",
           "--workers", str(workers), "--out", str(out), "--no-charts", "--", "--trace-drain", "10"]  # fmt: skip
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if not done.stdout.strip():
        raise SystemExit(done.stderr[-3000:])
    return Path(done.stdout.strip().splitlines()[-1])


def measure(run_dir: Path, trace_path: Path) -> dict:
    trace = read_trace(str(trace_path))
    requests = pd.read_csv(run_dir / "requests.csv")
    first = requests[requests["attempt"] == 0]
    phases = pd.read_csv(run_dir / "phases.csv")
    start = float(phases.loc[phases["label"] == "start", "end_wall"].iloc[0])
    due = pd.Series([float(r) for r in first["due_wall"] - start])
    sent = Counter(((first["start_wall"] - start) // 1).astype(int))
    planned = Counter((due // 1).astype(int))
    seconds = set(sent) | set(planned)
    truth = [json.loads(line) for line in (run_dir / "truth.jsonl").read_text().splitlines() if line.strip()]
    cached = sum(t["cached_tokens"] or 0 for t in truth if t.get("cached_tokens") is not None)
    prompt = sum(t["prompt_tokens"] for t in truth if t.get("cached_tokens") is not None)
    asked = first["trace_index"].map({r.index: (r.input_tokens, r.output_tokens) for r in trace.requests})
    ok = first["status"] == "ok"
    verdict = json.loads((run_dir / "report" / "verdict.json").read_text())
    blocks, tokens = block_reuse(trace.requests, trace.block_tokens)
    lateness = first["lateness_ms"].to_numpy(dtype=float)
    return {
        "scheduled": len(trace.requests),
        "sent": int(first["trace_index"].nunique()),
        "ok": int(ok.sum()),
        "lateness_p50_ms": float(np.percentile(lateness, 50)),
        "lateness_p99_ms": float(np.percentile(lateness, 99)),
        "lateness_max_ms": float(lateness.max()),
        "seconds_matching": f"{sum(sent[s] == planned[s] for s in seconds)}/{len(seconds)}",
        "seconds_within_1": f"{sum(abs(sent[s] - planned[s]) <= 1 for s in seconds)}/{len(seconds)}",
        "input_exact": float((first.loc[ok, "prompt_tokens"] == asked[ok].str[0]).mean()),
        "output_exact": float((first.loc[ok, "output_tokens"] == asked[ok].str[1]).mean()),
        "trace_block_reuse": blocks,
        "trace_token_reuse": tokens,
        "truth_hit_rate": cached / prompt if prompt else None,
        "engine_hit_rate": (verdict.get("trace") or {}).get("engine_hit_rate"),
        "answer": verdict["answer"]["status"] if "answer" in verdict else None,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=10_000)
    p.add_argument("--rate", type=float, default=10.0, help="the trace's mean requests/s at speed 1")
    p.add_argument("--speed", type=float, nargs="+", default=[1.0, 4.0])
    p.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    p.add_argument("--prompt-blocks", default="1-2", help="new 512-token blocks per turn, LO-HI")
    p.add_argument("--out", default="runs/bench-trace")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    low, high = (int(x) for x in args.prompt_blocks.split("-"))
    rows = mooncake_rows(args.requests, args.rate, seed=11, new_blocks=(low, high), output=(16, 64))
    trace = write_mooncake(out / "trace.jsonl", rows)
    print(f"trace: {args.requests} requests over {rows[-1]['timestamp'] / 1000:.0f} s at speed 1")
    for speed in args.speed:
        for workers in args.workers:
            began = time.monotonic()
            run_dir = replay(trace, speed, workers, out)
            row = measure(run_dir, trace)
            print(json.dumps({"speed": speed, "workers": workers, "wall_s": round(time.monotonic() - began), **row}))


if __name__ == "__main__":
    main()
