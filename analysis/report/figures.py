"""Every chart of a report, drawn into its folder; a chart that fails is named, the others are kept.

Its own module so that matplotlib is imported only by a report that draws (build.py imports this
when asked for charts): the import costs ~0.6 s of CPU, a --no-charts report (a CI gate) skips it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from loadline.analysis.data.load import RunData
from loadline.analysis.report import charts, server_charts
from loadline.analysis.report.guard import guarded
from loadline.analysis.report.recovery_chart import recovery_chart
from loadline.analysis.stats import knee
from loadline.analysis.stats.phases import ITL_HISTOGRAM


def draw_charts(run: RunData, table: pd.DataFrame, verdict: dict, out_dir: Path) -> tuple[list[Path], list[str]]:
    """(the PNG files drawn, one line per chart that could not be); `run` in model time
    (loadline.analysis.data.timescale.model_run), as every chart draws it."""
    jobs: list[tuple[str, Callable[[], Path | list[Path] | None]]] = []
    if run.has_records:
        curve = knee.load_curve(table)
        slo_lines = charts.slo_lines(verdict["slo"]["criteria"])
        jobs += [
            ("chart 'latency over time'", lambda: charts.latency_over_time(run, out_dir / "latency_over_time.png")),
            (
                "chart 'throughput vs concurrency'",
                lambda: charts.throughput_vs_concurrency(
                    curve, verdict["knee"], verdict["break_point"], slo_lines, out_dir / "throughput_vs_concurrency.png"
                ),
            ),
            (
                "chart 'latency CDFs'",
                lambda: charts.latency_cdfs(run, out_dir / "latency_cdf.png", table.attrs.get(ITL_HISTOGRAM)),
            ),
            ("chart 'tokens over time'", lambda: charts.tokens_over_time(run, out_dir / "tokens_over_time.png")),
            ("chart 'errors over time'", lambda: charts.errors_over_time(run, out_dir / "errors_over_time.png")),
        ]
    elif run.locust_history is not None:
        jobs.append(
            (
                "chart 'locust history'",
                lambda: charts.locust_history_chart(run.locust_history, out_dir / "locust_history.png"),
            )
        )
    jobs.append(("server charts", lambda: list(server_charts.charts(run, table, out_dir))))
    jobs.append(("chart 'recovery'", lambda: recovery_chart(verdict["recovery"], out_dir / "recovery.png")))
    drawn: list[Path] = []
    problems: list[str] = []
    for name, job in jobs:
        result = guarded(name, job, {})  # each chart's memory handed back before the next
        if isinstance(result, Path):
            drawn.append(result)
        elif isinstance(result, list):
            drawn += [Path(p) for p in result]
        elif isinstance(result, dict):  # guarded's report of a chart that failed
            problems.append(result["error"])
    return drawn, problems
