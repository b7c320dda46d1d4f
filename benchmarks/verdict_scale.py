"""How much the server-metrics side costs: the exporter on the master, and the verdict on a long soak.

    .venv/bin/python benchmarks/verdict_scale.py

Prints a table; results, date and command are in docs/benchmarks.md.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def exporter_rate(records: int = 5000, gaps: int = 63) -> float:
    from loadline.runtime.exporter import Exporter
    from loadline.core.records import RequestRecord

    rows = [RequestRecord(request_id=str(i), worker_id="w", user_id="u", user_class="c", session_id="s", turn=0,
                          endpoint="/", model="m", start_wall=time.time(), ttft_ms=50.0, e2e_ms=900.0,
                          output_tokens=gaps + 1, itl_us=" ".join(["15000"] * gaps)).to_row() for i in range(records)]
    exporter = Exporter()
    started = time.perf_counter()
    exporter.observe_records(rows)
    return records / (time.perf_counter() - started)


def verdict_time(phase_s: int) -> tuple[int, float, float]:
    import metric_scenarios as ms
    from analysis.verdict.bottleneck import judge
    from analysis.data.load import load_run
    from analysis.report.server_charts import charts
    from analysis.stats.phases import phase_table

    ms.PHASE_S = phase_s
    folder = Path(tempfile.mkdtemp())
    ms.write_scenario(ms.memory_leak(), folder)
    run = load_run(folder)
    table = phase_table(run)
    started = time.perf_counter()
    judge(run, table)
    judged = time.perf_counter() - started
    started = time.perf_counter()
    charts(run, table, folder / "charts")
    return len(run.server_metrics), judged, time.perf_counter() - started


def main() -> None:
    print("| what | size | result |\n|---|---|---|")
    print(f"| Exporter.observe_records | 5,000 records x 64 tokens | {exporter_rate():,.0f} records/s |")
    for phase_s in (60, 600):
        rows, judged, drawn = verdict_time(phase_s)
        print(f"| judge() / server charts | {rows:,} server-metric rows (6 x {phase_s} s, 1 s scrapes) | "
              f"{judged:.2f} s / {drawn:.2f} s |")


if __name__ == "__main__":
    main()
