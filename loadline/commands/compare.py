"""`loadline compare BASE NEW`: per-phase deltas and a regression exit code (1 on regression)."""

from __future__ import annotations

import argparse
from pathlib import Path

from loadline.analysis.data.load import load_run
from loadline.analysis.report import formatting as f
from loadline.analysis.stats.compare import Comparison, compare_runs
from loadline.core.errors import UsageError

HELP = (
    "Compare two run folders phase by phase. A latency percentile regresses when it is worse by more "
    "than --threshold and the runs' 95 % confidence intervals do not overlap; throughput when it falls "
    "by more than --threshold and 3 Poisson SDs; two rate sweeps' answers (max SLO-compliant rate) when it "
    "falls by more than --threshold or to none. Exit 0: no regression, 1: regression, 2: unusable input."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", help="the baseline run folder")
    parser.add_argument("new", help="the run folder to judge against the baseline")
    parser.add_argument(
        "--threshold",
        type=float,
        default=0.10,
        help="relative change that counts as a regression (default 0.10 = 10%%)",
    )
    parser.add_argument("--all", action="store_true", help="print every metric, not only p95/p99 and throughput")
    parser.add_argument(
        "--out", metavar="FILE", help="also write the comparison (Markdown) to FILE, e.g. for a PR comment"
    )


def render(comparison: Comparison, show_all: bool = False) -> str:
    rows = comparison.rows
    if not show_all:
        rows = rows[rows["metric"].str.contains("p95|p99|rps|error_rate|sweep") | rows["regression"]]
    lines = ["| phase | metric | base | new | change | regression |", "|---|---|---|---|---|---|"]
    for _, r in rows.iterrows():
        change = (
            f.pct(r["change"])
            if r["metric"] == "error_rate"
            else ("-" if f.missing(r["change"]) else f"{r['change']:+.1%}")
        )
        if r["metric"] == "error_rate":
            base, new = f.pct(r["base"]), f.pct(r["new"])
        else:
            base, new = f.num(r["base"]), f.num(r["new"])
        lines.append(
            f"| {r['phase']} | {r['metric']} | {base} | {new} | {change} | {'**REGRESSION**' if r['regression'] else ''} |"
        )
    lines += [f"Unmatched phase: {u}" for u in comparison.unmatched]
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    if not 0 < args.threshold < 10:
        raise UsageError(f"--threshold must be a fraction such as 0.10, got {args.threshold}")
    base, new = load_run(args.base), load_run(args.new)
    comparison = compare_runs(base, new, args.threshold)
    if comparison.rows.empty:
        raise UsageError("the two runs have no phase in common: nothing to compare")
    regressions = comparison.regressions
    if len(regressions):
        verdict = f"REGRESSION: {len(regressions)} metric(s) worse by more than {args.threshold:.0%} beyond noise"
    else:
        verdict = f"no regression beyond {args.threshold:.0%} and run-to-run noise"
    text = f"{render(comparison, args.all)}\n\n{verdict}\n"
    print(text, end="")
    if args.out:
        try:
            Path(args.out).write_text(f"## Loadline compare: {args.base} -> {args.new}\n\n{text}")
        except OSError as exc:
            raise UsageError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    return 1 if len(regressions) else 0
