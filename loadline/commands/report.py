"""`loadline report RUN`: turn a run folder into report/ and exit with the SLO gate's verdict."""

from __future__ import annotations

import argparse
import sys

from loadline.analysis.report.build import build_report, unusable_reason
from loadline.core.slo import SLO, defaults_text

HELP = (
    "Analyse a run folder (or a folder of plain `locust --csv` exports): per-phase percentiles, knee, break "
    "point, SLO gate, bottleneck verdict, charts. Writes RUN/report/ (report.html, summary.md, verdict.json, "
    "junit.xml). Exit 0: SLO passed, 1: SLO failed, INCOMPLETE (a criterion that applies had no data, e.g. "
    "TTFT in a plain Locust CSV), INTERRUPTED or STOPPED BY USER (the run did not end on its own), 2: unusable "
    "input, an unusable run (most requests rejected, or not an event stream: the reason is printed), or a "
    "verdict within the error of a load generator that fell behind (rerun with more --workers)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="the run folder")
    parser.add_argument(
        "--slo",
        metavar="FILE",
        help="re-judge with these SLO thresholds (TOML, see configs/slo/, or a name: strict); the "
        "report then names it beside the run's own. Default: the SLO the run recorded at its "
        f"start (a run folder without one: {defaults_text()})",
    )
    parser.add_argument("--out", metavar="DIR", help="where to write the report (default: RUN/report)")
    parser.add_argument(
        "--prometheus",
        metavar="FILE",
        nargs="+",
        action="extend",
        default=[],
        help="Prometheus query_range JSON exports to merge into the server metrics",
    )
    parser.add_argument(
        "--no-charts",
        action="store_true",
        help="verdict, summary, HTML and JUnit without the PNG charts (seconds faster: a CI gate)",
    )


def main(args: argparse.Namespace) -> int:
    result = build_report(
        args.run,
        SLO.from_file(args.slo) if args.slo else None,
        args.out,
        prometheus=args.prometheus,
        charts=not args.no_charts,
        slo_name=args.slo,
    )
    print(result.summary)
    assert result.out_dir is not None  # build_report always says where it wrote
    print(f"report: {result.out_dir / 'report.html'}")
    reason = unusable_reason(result.verdict)
    if reason:
        print(f"loadline report: unusable run: {reason}", file=sys.stderr)
    return result.exit_code
