"""How much the server-metrics side costs: the exporter on the master, the verdict on a long soak,
judge() over the scenario matrix, and optionally a whole `loadline report` of a run folder.

    .venv/bin/python benchmarks/verdict_scale.py [--report RUN]

CPU seconds are reported beside wall time: the machines this runs on are shared, and wall time
there says more about the neighbours than about the code. Prints a table; results, date and
command are in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

SCENARIOS = (
    "healthy",
    "gpu_compute",
    "kv_cache",
    "scheduler",
    "gateway",
    "outside_engine",
    "host_cpu",
    "load_generator",
    "memory_leak",
)


def exporter_rate(records: int = 5000, gaps: int = 63) -> float:
    from loadline.core.records import RequestRecord
    from loadline.runtime.exporter import Exporter

    rows = [
        RequestRecord(
            request_id=str(i),
            worker_id="w",
            user_id="u",
            user_class="c",
            session_id="s",
            turn=0,
            endpoint="/",
            model="m",
            start_wall=time.time(),
            ttft_ms=50.0,
            e2e_ms=900.0,
            output_tokens=gaps + 1,
            itl_us=" ".join(["15000"] * gaps),
        ).to_row()
        for i in range(records)
    ]
    exporter = Exporter()
    started = time.perf_counter()
    exporter.observe_records(rows)
    return records / (time.perf_counter() - started)


def verdict_time(phase_s: int) -> tuple[int, float, float]:
    import layer_scenarios as layers
    import metric_scenarios as ms

    from loadline.analysis.data.load import load_run
    from loadline.analysis.report.server_charts import charts
    from loadline.analysis.stats.phases import phase_table
    from loadline.analysis.verdict.bottleneck import judge

    ms.PHASE_S = phase_s
    folder = Path(tempfile.mkdtemp())
    ms.write_scenario(layers.memory_leak(), folder)
    run = load_run(folder)
    table = phase_table(run)
    started = time.perf_counter()
    judge(run, table)
    judged = time.perf_counter() - started
    started = time.perf_counter()
    charts(run, table, folder / "charts")
    return len(run.server_metrics), judged, time.perf_counter() - started


def matrix_cpu() -> tuple[int, float, float, float]:
    """judge() over every variant of tests/verdict_matrix.py and every named scenario of
    tests/layer_scenarios.py (what the verdict unit tests do): (calls, CPU s total, CPU s worst call, wall s)."""
    import layer_scenarios as layers
    import metric_scenarios as ms
    import verdict_matrix as vm

    from loadline.analysis.data.load import load_run
    from loadline.analysis.stats.phases import phase_table
    from loadline.analysis.verdict.bottleneck import judge

    root = Path(tempfile.mkdtemp())
    runs = []
    for v in vm.VARIANTS:
        sc = vm.scenario(v)
        runs.append(load_run(ms.write_scenario(sc, root / v.id, vm.server_table(v, sc), one_phase=v.shape == "fixed")))
    runs += [load_run(ms.write_scenario(getattr(layers, name)(), root / name)) for name in SCENARIOS]
    cpu, worst, wall = 0.0, 0.0, time.perf_counter()
    for run in runs:
        table = phase_table(run)
        started = time.process_time()
        judge(run, table)
        spent = time.process_time() - started
        cpu, worst = cpu + spent, max(worst, spent)
    shutil.rmtree(root, ignore_errors=True)
    return len(runs), cpu, worst, time.perf_counter() - wall


def report_time(run: Path) -> tuple[float, float]:
    """`loadline report` of a copy of RUN in a child process: (wall s, CPU s of the child)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / run.name
        shutil.copytree(run, copy, ignore=shutil.ignore_patterns("report"))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "loadline", "report", str(copy)], check=False, capture_output=True, timeout=600
        )
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, help="also time `loadline report` of this run folder (on a copy)")
    args = parser.parse_args()
    print("| what | size | result |\n|---|---|---|")
    print(f"| Exporter.observe_records | 5,000 records x 64 tokens | {exporter_rate():,.0f} records/s |")
    calls, cpu, worst, wall = matrix_cpu()  # first: verdict_time changes the scenarios' phase length
    print(
        f"| judge() over the scenario matrix | {calls} runs (verdict_matrix + metric_scenarios) | "
        f"{cpu:.2f} CPU s ({cpu / calls:.2f} per run, worst {worst:.2f}); {wall:.1f} s wall |"
    )
    for phase_s in (60, 600):
        rows, judged, drawn = verdict_time(phase_s)
        print(
            f"| judge() / server charts | {rows:,} server-metric rows (6 x {phase_s} s, 1 s scrapes) | "
            f"{judged:.2f} s / {drawn:.2f} s |"
        )
    if args.report:
        wall, cpu = report_time(args.report)
        print(f"| loadline report | {args.report.name} | {wall:.1f} s wall, {cpu:.1f} CPU s |")


if __name__ == "__main__":
    main()
