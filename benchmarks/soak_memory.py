"""Does the load generator's memory stay flat over a long run? (< 5 % growth after warm-up)

Runs `python -m loadline run --shape soak` against the embedded simulator for MODEL_HOURS of model
time, time-scaled (2 h at --time-scale 5 = 24 min wall), and samples the resident memory (VmRSS from
/proc/PID/status) and CPU time of the Locust master, every worker and the simulator every few wall
seconds (benchmarks/proc_samples.py: the processes are the descendants of the `loadline run` child,
told apart by command line).

Prints one row per process: RSS just after the warm-up and at the end (medians of a window each),
the max, the growth between the two and the least-squares slope after warm-up, and PASS/FAIL against
5 % for the master and the workers. The simulator is reported, not judged: it is the target, not
the generator. Then checks the run folder: every request accounted for (manifest, requests.csv, the
simulator's truth log), no errors of the generator's own, no saturation in the self-check, no
process left behind. The samples go to a CSV (default: rss_samples.csv in the run folder).

Time scaling compresses the requests of MODEL_HOURS into fewer wall seconds, so what grows per
request is measured in full; what grows per wall second (Locust's own stats history) grows X times
less than in a real run of the same length (docs/benchmarks.md says by how much).

    .venv/bin/python benchmarks/soak_memory.py [--model-hours 2] [--time-scale 5] [--users 200]
        [--workers 2] [--max-tokens 64] [--interval 2] [--out /tmp/loadline-soak] [--csv FILE]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from loadline.analysis.data.truth import read_truth  # noqa: E402

sys.path.insert(0, str(REPO / "benchmarks"))
from proc_samples import Sample, kill_leftovers, read_procs, sample_once  # noqa: E402

GROWTH_LIMIT_PCT = 5.0
# Warm-up: the first 20 % of the run's model time (24 min of a 2-h soak). The ramp (1 model minute)
# is not enough: after it, things that are meant to reach a steady size still fill up (the
# allocator's arenas and free lists, one kept-alive connection and its buffers per user, Locust's
# response-time buckets, one entry per distinct rounded value; the users' chat histories reach their
# longest sessions; the simulator's prefix cache). Growth after that is what a long run would keep
# adding.
WARMUP_FRACTION = 0.20
# Growth compares the median RSS of the first 5 % of the run after the warm-up with the median of the
# last 5 % (6 model minutes of a 2-h soak each, ~18 samples at 10x and 2 s): medians, so a garbage
# collection or a burst of buffered records in one sample does not decide the verdict.
COMPARE_FRACTION = 0.05
STOP_GRACE_S = 60.0  # after a SIGINT, loadline run stops the users and writes the run folder
JUDGED = ("master", "local", "worker")


def command(args: argparse.Namespace) -> list[str]:
    model_s = args.model_hours * 3600
    ramp_s = min(60.0, model_s * 0.1)  # the soak profile's 1-minute ramp (shortened for short trials)
    # Chat sessions with the default think time (lognormal, mean 8 s, p90 15 s, model time) and
    # ~4 turns per session: what a soak of people chatting looks like. The h100 profile keeps
    # the server far from saturation at 200 users (batch up to 1,024), so the generator's side is
    # what is measured; --max-tokens keeps the token rate per wall second within two cores.
    return [
        sys.executable,
        "-m",
        "loadline",
        "run",
        "--shape",
        "soak",
        "--sim-profile",
        args.sim_profile,
        "--time-scale",
        f"{args.time_scale:g}",
        "--workers",
        str(args.workers),
        "--out",
        str(args.out),
        "--no-report",
        "--",
        "--soak-users",
        str(args.users),
        "--soak-ramp",
        f"{ramp_s:g}",
        "--soak-hold",
        f"{model_s - ramp_s:g}",
        "--soak-window",
        f"{min(600.0, model_s / 4):g}",
        "--max-tokens",
        str(args.max_tokens),
    ]


def run(args: argparse.Namespace, log_path: Path) -> tuple[list[Sample], int, list[int], str]:
    """Runs the soak; returns the samples, loadline run's exit code, leftover pids killed, how it ended."""
    cmd = command(args)
    wall_budget = args.model_hours * 3600 / args.time_scale * 1.5 + 180  # start-up, stop, a busy box
    samples: list[Sample] = []
    seen: dict[int, int] = {}
    ended = "finished"
    with open(log_path, "wb") as log:
        # its own session: a Ctrl-C here reaches only us, and we forward exactly one SIGINT
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        me = read_procs().get(proc.pid)
        if me is not None:
            seen[proc.pid] = me.start
        deadline = time.monotonic() + wall_budget
        try:
            while proc.poll() is None:
                if time.monotonic() > deadline:
                    ended = f"timed out after {wall_budget:.0f} s"
                    break
                samples += sample_once(proc.pid, args.workers, seen)
                time.sleep(args.interval)
        except KeyboardInterrupt:
            ended = "interrupted"
        finally:
            # no second Ctrl-C/SIGTERM may cut the cleanup short: that is how orphans are made
            previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)  # loadline run's graceful stop: the run folder is completed
                try:
                    proc.wait(STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    pass
            time.sleep(0.5)  # the simulator is stopped right after Locust exits
            leftovers = kill_leftovers(seen)
            proc.wait(10)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    return samples, proc.returncode, leftovers, ended


def run_dir_of(log_path: Path) -> Path | None:
    for line in log_path.read_text(errors="replace").splitlines():
        if line.startswith("loadline: run folder "):
            return Path(line.removeprefix("loadline: run folder ").strip())
    return None


def load_window(run_dir: Path) -> tuple[float, float]:
    """Wall start of the ramp and end of the last soak window (phases.csv)."""
    with open(run_dir / "phases.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return float(rows[0]["start_wall"]), float(rows[-1]["end_wall"] or rows[-1]["start_wall"])


def median_in(points: list[Sample], lo: float, hi: float) -> float:
    inside = [s.rss_kib for s in points if lo <= s.wall <= hi]
    if not inside:  # a short trial: the sample nearest the window's middle
        inside = [min(points, key=lambda s: abs(s.wall - (lo + hi) / 2)).rss_kib]
    return statistics.median(inside) / 1024


def slope_mib_per_model_h(points: list[Sample], scale: float) -> float:
    if len(points) < 3:
        return float("nan")
    xs = [(s.wall - points[0].wall) * scale / 3600 for s in points]
    ys = [s.rss_kib / 1024 for s in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else float("nan")


def table(samples: list[Sample], start: float, end: float, scale: float) -> list[dict]:
    span = end - start
    warm_end = start + WARMUP_FRACTION * span
    window = COMPARE_FRACTION * span
    by_pid: dict[int, list[Sample]] = {}
    for s in samples:
        by_pid.setdefault(s.pid, []).append(s)
    rows = []
    worker_no = 0
    for pid, points in sorted(
        by_pid.items(), key=lambda kv: (("simulator", "master", "local", "worker").index(kv[1][0].role), kv[0])
    ):
        role = points[0].role
        if role == "worker":
            worker_no += 1
            role = f"worker-{worker_no}"
        load = [s for s in points if start <= s.wall <= end]
        after = [s for s in load if s.wall >= warm_end]
        if not after:
            continue
        early, late = median_in(after, warm_end, warm_end + window), median_in(after, end - window, end)
        growth = 100 * (late - early) / early
        cpu = (load[-1].cpu_s - load[0].cpu_s) / max(load[-1].wall - load[0].wall, 1e-9)
        judged = points[0].role in JUDGED
        rows.append(
            {
                "process": role,
                "pid": pid,
                "after warm-up MiB": early,
                "end MiB": late,
                "max MiB": max(s.rss_kib for s in load) / 1024,
                "growth %": growth,
                "MiB per model h": slope_mib_per_model_h(after, scale),
                "CPU %": 100 * cpu,
                "verdict": ("PASS" if growth < GROWTH_LIMIT_PCT else "FAIL") if judged else "(target)",
            }
        )
    return rows


def print_table(rows: list[dict]) -> None:
    print(
        f"{'process':>10} {'pid':>7} {'after warm-up':>14} {'end':>9} {'max':>9} {'growth':>8} "
        f"{'slope':>14} {'CPU':>6}  verdict"
    )
    for r in rows:
        print(
            f"{r['process']:>10} {r['pid']:>7} {r['after warm-up MiB']:>10.1f} MiB {r['end MiB']:>5.1f} MiB "
            f"{r['max MiB']:>5.1f} MiB {r['growth %']:>+7.1f}% {r['MiB per model h']:>+7.2f} MiB/h "
            f"{r['CPU %']:>5.0f}%  {r['verdict']}"
        )


def check_run(run_dir: Path, log_path: Path) -> list[str]:
    """Every request accounted for, and nothing the generator itself got wrong."""
    notes = []
    manifest = json.loads((run_dir / "manifest.json").read_text())
    csv.field_size_limit(1 << 30)
    statuses, classes, statuses_by_id = Counter(), Counter(), {}
    with open(run_dir / "requests.csv", newline="") as f:
        for row in csv.DictReader(f):
            statuses[row["status"]] += 1
            if row["error_class"]:
                classes[row["error_class"]] += 1
            statuses_by_id[row["request_id"]] = row["status"]
    rows, ids = sum(statuses.values()), set(statuses_by_id)
    served = read_truth(run_dir)  # the simulator's own log of what reached it
    truth = set() if served is None else set(served["request_id"].astype(str))
    unseen = Counter(status for request_id, status in statuses_by_id.items() if request_id not in truth)
    written, by_worker = manifest.get("requests_written"), sum((manifest.get("rows_by_worker") or {}).values())
    notes.append(
        f"manifest: status {manifest.get('status')}, requests_written {written}, rows_by_worker sum "
        f"{by_worker}, workers_lost {manifest.get('workers_lost')}, worker_errors "
        f"{manifest.get('worker_errors')}, clock_warnings {manifest.get('clock_warnings')}"
    )
    notes.append(
        f"requests.csv: {rows} rows ({len(ids)} distinct ids) {dict(statuses)}; error classes "
        f"{dict(classes) or 'none'}; {'matches' if rows == written == by_worker else 'DOES NOT match'} "
        f"the manifest"
    )
    notes.append(
        f"truth log: {len(truth)} requests reached the simulator; {len(truth - ids)} without a record, "
        f"{len(ids - truth)} records the simulator never saw {dict(unseen) or ''}"
    )
    notes += selfcheck_notes(run_dir)
    log_text = log_path.read_text(errors="replace")
    bad = [line for line in log_text.splitlines() if "Traceback" in line or " ERROR" in line or "CRITICAL" in line]
    notes.append(f"loadline run's log: {len(bad)} traceback/ERROR lines" + (f", first: {bad[0][:160]}" if bad else ""))
    return notes


def selfcheck_notes(run_dir: Path) -> list[str]:
    """The generator's self-check (generator_metrics.csv): the worst 5-sample median of CPU and loop lag
    per process, the figures its saturation thresholds (90 %, 20 ms) are judged on."""
    by_worker: dict[str, list[tuple[float, float]]] = {}
    with open(run_dir / "generator_metrics.csv", newline="") as f:
        for row in csv.DictReader(f):
            by_worker.setdefault(row["worker_id"], []).append((float(row["cpu_percent"]), float(row["loop_lag_ms"])))
    notes = []
    for worker, values in sorted(by_worker.items()):
        cpu = max(
            (statistics.median(v[0] for v in values[i : i + 5]) for i in range(max(1, len(values) - 4))), default=0
        )
        lag = max(
            (statistics.median(v[1] for v in values[i : i + 5]) for i in range(max(1, len(values) - 4))), default=0
        )
        notes.append(f"self-check {worker}: worst 5-sample median CPU {cpu:.0f} %, loop lag {lag:.1f} ms")
    return notes


def write_samples(path: Path, samples: list[Sample], start: float, scale: float) -> None:
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["wall", "model_s", "role", "pid", "rss_kib", "cpu_s", "load1"])
        for s in samples:
            out.writerow(
                [
                    f"{s.wall:.3f}",
                    f"{(s.wall - start) * scale:.1f}",
                    s.role,
                    s.pid,
                    s.rss_kib,
                    f"{s.cpu_s:.2f}",
                    s.load1,
                ]
            )


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-hours", type=float, default=2.0, help="model time of ramp + hold")
    parser.add_argument(
        "--time-scale",
        type=float,
        default=5.0,
        help="2 model hours in 24 wall minutes; at 10 the generator and the simulator take ~1.7 of the 2 cores",
    )
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2, help="local worker processes (0 = one process)")
    parser.add_argument("--max-tokens", type=int, default=64, help="reply cap per turn (the token rate's knob)")
    parser.add_argument("--sim-profile", default="h100-llama3-8b")
    parser.add_argument("--interval", type=float, default=2.0, help="wall seconds between RSS samples")
    parser.add_argument("--out", type=Path, default=Path("/tmp/loadline-soak"), help="where the run folder goes")
    parser.add_argument("--csv", type=Path, help="samples CSV (default: rss_samples.csv in the run folder)")
    args = parser.parse_args()
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _interrupt)  # a CI timeout: stop the run as Ctrl-C does
    log_path = args.out / f"soak-{time.strftime('%Y%m%d-%H%M%S')}.log"
    print("command: python", " ".join(command(args)[1:]), flush=True)
    samples, code, leftovers, ended = run(args, log_path)
    run_dir = run_dir_of(log_path)
    print(f"loadline run: exit {code}, {ended}; log {log_path}; run folder {run_dir}")
    print(f"processes left behind and killed: {leftovers or 'none'}")
    if run_dir is None or not (run_dir / "phases.csv").exists():
        print("no run folder with phases: nothing to measure")
        return 1
    start, end = load_window(run_dir)
    samples_path = args.csv or run_dir / "rss_samples.csv"
    write_samples(samples_path, samples, start, args.time_scale)
    print(
        f"load: {(end - start) * args.time_scale / 3600:.2f} model h in {end - start:.0f} wall s; warm-up = the "
        f"first {WARMUP_FRACTION:.0%}; growth = median of the last {COMPARE_FRACTION:.0%} vs the "
        f"{COMPARE_FRACTION:.0%} after warm-up; samples: {samples_path}"
    )
    loads = [s.load1 for s in samples if start <= s.wall <= end]
    if loads:
        print(
            f"load average (1 min) during the load: min {min(loads):.2f}, median {statistics.median(loads):.2f}, "
            f"max {max(loads):.2f} on {os.cpu_count()} CPUs"
        )
    rows = table(samples, start, end, args.time_scale)
    print_table(rows)
    for note in check_run(run_dir, log_path):
        print(note)
    judged = [r for r in rows if r["verdict"] != "(target)"]
    failed = [r["process"] for r in judged if r["verdict"] == "FAIL"]
    if ended != "finished":  # a cut-short run's "end" is not the end of a soak
        print(f"verdict: not judged, the run was {ended}")
        return 1
    print(
        f"verdict: {'FAIL (' + ', '.join(failed) + ')' if failed else 'PASS' if judged else 'no data'} "
        f"against {GROWTH_LIMIT_PCT:g} % growth after warm-up"
    )
    return 1 if failed or not judged else 0


if __name__ == "__main__":
    sys.exit(main())
