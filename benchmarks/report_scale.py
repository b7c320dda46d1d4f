"""Time `build_report` on a 1,000,000-row requests table (target: < 60 s, < 2 GB peak RSS).

    .venv/bin/python benchmarks/report_scale.py [--rows 1000000] [--keep DIR]

Generates a stepped run folder (10 phases, realistic row width: each request carries 20-200
inter-token gaps in `itl_us`), then runs `loadline report` in a child process so the peak RSS
measured (getrusage of children) is the report's alone. Prints a table.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # synthetic runs are a test helper
from synthetic import make_requests, write_run  # noqa: E402

PHASES = 10


def _itl_pool(rng: np.random.Generator, size: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """Distinct gap strings to draw from: parsing cost depends on length, not on uniqueness."""
    lengths = rng.integers(19, 200, size)
    strings = np.array([" ".join(map(str, rng.integers(8_000, 60_000, k))) for k in lengths], dtype=object)
    return strings, lengths + 1


def generate(run_dir: Path, rows: int, seed: int = 7) -> Path:
    rng = np.random.default_rng(seed)
    t0, phase_s = 1_700_000_000.0, 600.0
    start = np.sort(rng.uniform(t0, t0 + PHASES * phase_s, rows))
    phase = ((start - t0) // phase_s).astype(int)
    load = 1.0 + phase / 3.0  # latency climbs with the step
    e2e = rng.lognormal(np.log(800.0 * load), 0.35)
    ttft = e2e * rng.uniform(0.05, 0.3, rows)
    strings, tokens = _itl_pool(rng)
    pick = rng.integers(0, len(strings), rows)
    status = np.where(rng.random(rows) < 0.002, "error", "ok")
    requests = make_requests(
        start,
        e2e,
        ttft_ms=ttft,
        tpot_ms=(e2e - ttft) / (tokens[pick] - 1),
        output_tokens=tokens[pick],
        itl_us=strings[pick],
        status=status,
        error_class=np.where(status == "error", "timeout", ""),
    )
    requests["request_id"] = np.char.add("r", np.arange(rows).astype(str))
    phases = [
        {
            "index": i,
            "label": f"step-{i + 1} ({10 * (i + 1)} users)",
            "kind": "step",
            "start_wall": t0 + i * phase_s,
            "end_wall": t0 + (i + 1) * phase_s,
            "target_users": 10 * (i + 1),
            "spawn_rate": 10,
            "users_start": 10 * (i + 1),
            "users_end": 10 * (i + 1),
            "note": "",
        }
        for i in range(PHASES)
    ]
    return write_run(run_dir, requests, phases, {"name": f"scale-{rows}"})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--keep", help="generate into (or reuse) this folder instead of a temporary one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(args.keep or tmp) / "run"
        started = time.perf_counter()
        if not (run_dir / "requests.csv").exists():
            generate(run_dir, args.rows)
        generated = time.perf_counter() - started
        size_mb = (run_dir / "requests.csv").stat().st_size / 1e6
        started = time.perf_counter()
        child = subprocess.run(
            [sys.executable, "-m", "loadline", "report", str(run_dir)],
            check=False,
            capture_output=True,
            text=True,
            timeout=600,
        )
        elapsed = time.perf_counter() - started
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        if child.returncode not in (0, 1):
            print(child.stderr, file=sys.stderr)
            return 1
        rows = len(pd.read_csv(run_dir / "requests.csv", usecols=["start_wall"]))
        print("| rows | requests.csv | generate | build_report (loadline report) | peak RSS | exit |")
        print("|---|---|---|---|---|---|")
        print(
            f"| {rows:,} | {size_mb:,.0f} MB | {generated:.1f} s | {elapsed:.1f} s | {peak_mb:,.0f} MB | {child.returncode} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
