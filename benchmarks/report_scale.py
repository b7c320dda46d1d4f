"""Time `loadline report` on a large run folder, and read its peak memory.

    .venv/bin/python benchmarks/report_scale.py [--rows 1000000] [--keep DIR] [--rounds 1] [--no-charts] [--no-copy]
        [--table-memory-mb MB]

Generates a realistic stepped run folder (tests/synthetic_wide.py: every requests.csv column,
10 steps of 600 s, 0.2 % errors, requests cut at each step's end, 20-200 inter-token gaps per
request in `itl_us`, ~1 KB a row; phases.csv, manifest.json, server_metrics.csv), then runs
`loadline report` in a child process so that its peak RSS (getrusage of the children) is the
report's alone. Generation is not timed (10 M rows: ~2.5 min, 9.9 GB); `--keep DIR` keeps the
folder for the next run. Prints one row per round with the 1-minute load average (a shared box:
read wall times beside it). `--table-memory-mb`: the requests table's budget in memory before it
goes to disk (analysis/data/spill.py; default the product's, 0: on disk from its first block).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # synthetic runs are a test helper
from synthetic_wide import wide_run  # noqa: E402


def report_once(run_dir: Path, charts: bool, table_mb: float | None = None) -> tuple[float, float, float, int]:
    """(wall s, CPU s, peak RSS MB, exit code) of one `loadline report` in a fresh child."""
    code = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode\n"
        "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(time.perf_counter() - t, u.ru_utime + u.ru_stime, u.ru_maxrss / 1024, rc)\n"
    )
    args = ["report", str(run_dir), *([] if charts else ["--no-charts"])]
    cmd = [sys.executable, "-m", "loadline", *args]
    if table_mb is not None:  # the product's command with another budget
        budget = f"from loadline.analysis.data import spill; spill.MEMORY_BYTES = {int(table_mb * (1 << 20))}"
        cmd = [
            sys.executable,
            "-c",
            f"import sys; {budget}; from loadline.commands.main import main; sys.exit(main({args!r}))",
        ]
    out = subprocess.run([sys.executable, "-c", code, *cmd], capture_output=True, text=True, timeout=1800, check=True)
    wall, cpu, rss, rc = out.stdout.split()
    return float(wall), float(cpu), float(rss), int(rc)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--keep", help="generate into (or reuse) this folder instead of a temporary one")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--no-charts", action="store_true")
    parser.add_argument(
        "--no-copy", action="store_true", help="generate without requests.arrows: the report reads the CSV's text"
    )
    parser.add_argument("--table-memory-mb", type=float, help="the table's memory budget (default: the product's)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(args.keep or tmp)
        if not (run_dir / "requests.csv").exists():
            wide_run(run_dir, args.rows, copy=not args.no_copy)
        size_gb = (run_dir / "requests.csv").stat().st_size / 1e9
        rows = json.loads((run_dir / "manifest.json").read_text()).get("records_written", args.rows)
        print("| rows | requests.csv | `loadline report` wall | CPU | peak RSS | exit | load avg 1m |")
        print("|---|---|---|---|---|---|---|")
        for _ in range(args.rounds):
            wall, cpu, rss, rc = report_once(run_dir, not args.no_charts, args.table_memory_mb)
            load = os.getloadavg()[0]
            print(
                f"| {rows:,} | {size_gb:.2f} GB | {wall:.1f} s | {cpu:.1f} s | {rss:,.0f} MB | {rc} | {load:.2f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
