"""How much load one generator process drives, at what CPU cost, and how true its timings stay.

Setup: a reference target that streams one token every STEP ms after a TTFT of
TTFT ms (the embedded simulator with a flat cost model, pinned to core 0), N concurrent streams
of TOKENS tokens (`--ignore-eos`), one Locust process pinned to core 1. Prints one row per run:
- tokens/s received over the load window (spawn + WARMUP_S .. end - COOLDOWN_S);
- generator CPU-s per 1,000 tokens in that window (user + system from /proc/PID/stat, sampled at
  the window's edges: robust to a busy machine, unlike wall-clock figures);
- TTFT error vs the simulator's truth, p50/p99 (|record TTFT - (first_token - arrival)|; includes
  the simulator's own lag in stamping arrivals);
- first-token stamp error, p50/p99: |start_wall + TTFT - first_token| (both sides' wall clocks;
  no truth-side arrival lag);
- pooled ITL p50 (every gap of every request whose tokens fall in the window) vs the true STEP;
- last-token stamp error p99: |start_wall + E2E - last_token| (with the first token's, it bounds the
  error of the mean gap);
- read delay p99 (kernel clock: how late the generator read its sockets), and which clock rows used;
- core speed: how fast the generator's core ran during the window (a fixed loop's steps per CPU-second,
  sampled twice a second on that core, median and range). Why: on the shared VMs we measure on, a
  core's speed moves up to 2x within a second with its neighbours' load (docs/benchmarks.md,
  "Machine"), and CPU-s per 1k tokens moves with it: compare rows at like speeds, or old and
  new paths interleaved.
`--hog` runs a busy process on the generator's core for the whole run (a "CPU hog sharing
the generator's core"); `--watch` sets the first-bytes watch as the product's LOADLINE_FIRST_BYTES_WATCH
does: `budget` (the default: on while its thread's wait for a core stays within its budget), `on`
(=1, whatever it costs), `off` (=0).

    python benchmarks/generator_throughput.py --preset heavy|light [--seconds 20] [--clock kernel|user]
        [--reads push|pull] [--watch budget|on|off] [--hog]
        [--repo PATH ...] [--rounds N]   # other code trees (`git archive OLD | tar -x -C PATH`), taking turns
    python benchmarks/generator_throughput.py --streams 16 64 256 --step-ms 10 --tokens 256 --ttft-ms 100
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from loadline.runtime.simprocess import start_simulator  # noqa: E402

PRESETS = {  # docs/benchmarks.md: heavy = 22.4k tokens/s offered (256 x 64 tokens every 0.73 s); light = 16 x 20 ms
    "heavy": {"streams": [256], "step_ms": 10.0, "tokens": 64, "ttft_ms": 100.0},
    "light": {"streams": [16], "step_ms": 20.0, "tokens": 64, "ttft_ms": 100.0},
}
WARMUP_S = 3.0  # after the spawn: every stream is in its steady cycle
COOLDOWN_S = 1.0
TICK_S = os.sysconf("SC_CLK_TCK")


def flat_model(step_ms: float, ttft_ms: float) -> list[str]:
    """Every engine step costs step_ms (however many sequences), every request ttft_ms before its first
    token; no batch limit."""
    return [
        "weights_gib=0.001",
        "kv_bytes_per_token=1",
        "hbm_bandwidth_gbs=100000",
        "peak_tflops=100000",
        f"step_overhead_ms={step_ms}",
        "per_layer_overhead_us=0",
        "per_seq_overhead_us=0",
        f"request_overhead_ms={ttft_ms}",
        "max_num_seqs=1024",
        "num_gpu_blocks=200000",
        "max_num_batched_tokens=65536",
        "max_model_len=65536",
    ]


def pin(core: int) -> list[str]:
    return ["taskset", "-c", str(core)] if (os.cpu_count() or 1) > 1 else []


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK_S  # utime, stime


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (the master's, for benchmarks that start master and workers)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def token_times(records: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Wall-clock arrival of every content chunk, and every gap (us) with the arrival that ended it."""
    arrivals, gaps, gap_ends = [], [], []
    for start, ttft, itl in zip(records.start_wall, records.ttft_ms, records.itl_us.fillna("")):
        first = start + ttft / 1000
        steps = np.array(str(itl).split(), dtype=np.int64) if itl else np.zeros(0, dtype=np.int64)
        times = first + np.concatenate([[0], np.cumsum(steps)]) / 1e6
        arrivals.append(times)
        gaps.append(steps)
        gap_ends.append(times[1:])
    return np.concatenate(arrivals), np.stack([np.concatenate(gaps), np.concatenate(gap_ends)])


SPEED_PROBE = """
import sys, time
begin, end = float(sys.argv[1]), float(sys.argv[2])
time.sleep(max(0.0, begin - time.time()))
while time.time() < end:
    start, n = time.thread_time(), 0
    for _ in range(20000):
        n += 1
    print(20000 / (time.thread_time() - start) / 1e6, flush=True)
    time.sleep(0.5)
"""  # ~1 ms of CPU every 0.5 s: 0.2 % of the core it measures


def start_speed_probe(begin: float, end: float) -> subprocess.Popen:
    """Samples the generator's core speed (M loop steps per CPU-second of the probe's own thread, so a
    probe that waits for the core does not read as slow) from `begin` to `end` (time.time()). Started
    with the generator, so that its own start-up falls outside the window."""
    return subprocess.Popen(
        [*pin(1), sys.executable, "-c", SPEED_PROBE, str(begin), str(end)], stdout=subprocess.PIPE, text=True
    )


def core_speed(probe: subprocess.Popen) -> str:
    """median (min-max) of the probe's samples."""
    out, _ = probe.communicate(timeout=30)
    samples = np.array([float(line) for line in out.split()])
    if not len(samples):
        return "-"
    return f"{np.median(samples):.0f} ({samples.min():.0f}-{samples.max():.0f})"


def start_hog() -> subprocess.Popen:
    """A process that keeps the generator's core busy (bounded: it ends by itself after 10 minutes)."""
    spin = "import time\nend = time.monotonic() + 600\nwhile time.monotonic() < end: pass"
    return subprocess.Popen([*pin(1), sys.executable, "-c", spin])


def one(
    streams: int, seconds: int, step_ms: float, tokens: int, ttft_ms: float, clock: str, repo: Path, hog: bool = False
) -> dict:
    hogger = start_hog() if hog else None
    try:
        return measure(streams, seconds, step_ms, tokens, ttft_ms, clock, repo)
    finally:
        if hogger is not None:
            hogger.kill()
            hogger.wait(10)


def measure(streams: int, seconds: int, step_ms: float, tokens: int, ttft_ms: float, clock: str, repo: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        sim = start_simulator(
            [
                "--profile",
                "tiny",
                "--truth",
                str(Path(tmp) / "truth.jsonl"),
                *sum((["--set", kv] for kv in flat_model(step_ms, ttft_ms)), []),
            ]
        )
        try:
            subprocess.run(["taskset", "-cp", "0", str(sim.proc.pid)], capture_output=True)
            cmd = [
                *pin(1),
                sys.executable,
                "-m",
                "locust",
                "-f",
                str(repo / "locustfiles" / "single_shot.py"),
                "--headless",
                "-u",
                str(streams),
                "-r",
                str(streams),
                "-t",
                f"{seconds}s",
                "--host",
                sim.url,
                "--run-dir",
                str(run_dir),
                "--max-tokens",
                str(tokens),
                "--ignore-eos",
                "--event-interval",
                "0",
                "--prompt-mix",
                "short=1",
                "--only-summary",
                "--loglevel",
                "WARNING",
            ]
            env = {**os.environ, "PYTHONPATH": str(repo), "LOADLINE_KERNEL_CLOCK": "1" if clock == "kernel" else "0"}
            proc = subprocess.Popen(cmd, cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            span, begin = max(1.0, seconds - WARMUP_S - COOLDOWN_S), time.time() + 1.0 + WARMUP_S
            probe = start_speed_probe(begin, begin + span - 0.5)
            # the window: from WARMUP_S after the spawn (Locust starts spawning ~1 s after launch) to the end
            time.sleep(1.0 + WARMUP_S)
            window = [time.time(), cpu_seconds(proc.pid)]
            time.sleep(span)
            window += [time.time(), cpu_seconds(proc.pid)]
            speed = core_speed(probe)
            proc.wait(timeout=seconds + 60)
        finally:
            sim.stop()
        records = pd.read_csv(run_dir / "requests.csv", low_memory=False)
        truth = pd.DataFrame(json.loads(line) for line in (Path(tmp) / "truth.jsonl").read_text().splitlines())
    t_start, cpu_start, t_end, cpu_end = window
    got = records[records.ttft_ms.notna()]
    arrivals, (gaps, gap_ends) = token_times(got)
    in_window = int(((arrivals >= t_start) & (arrivals < t_end)).sum())
    window_gaps = gaps[(gap_ends >= t_start) & (gap_ends < t_end)] / 1000
    ok = records[records.status == "ok"].merge(truth, on="request_id", suffixes=("", "_t"))
    ok = ok[(ok.start_wall >= t_start) & (ok.start_wall + ok.e2e_ms / 1000 < t_end)]
    ttft_err = (ok.ttft_ms - (ok.first_token - ok.arrival) * 1000).abs()
    stamp_err = (ok.start_wall + ok.ttft_ms / 1000 - ok.first_token).abs() * 1000
    last_err = (ok.start_wall + ok.e2e_ms / 1000 - ok.last_token).abs() * 1000
    clocks = got.clock.dropna().unique() if "clock" in got else ["user (old)"]  # rows that streamed
    # over the replies that ended: the report judges "behind" on those (a stream cut at stop waits out its last read)
    ended = records[records.status == "ok"]
    delay = ended.read_delay_ms.quantile(0.99) if "read_delay_ms" in records else float("nan")
    return {
        "streams": streams,
        "step ms": step_ms,
        "clock": "/".join(map(str, clocks)),
        "tokens/s": in_window / (t_end - t_start),
        "CPU-s/1k tok": (cpu_end - cpu_start) / max(in_window, 1) * 1000,
        "CPU %": 100 * (cpu_end - cpu_start) / (t_end - t_start),
        "TTFT err p50": ttft_err.quantile(0.5),
        "TTFT err p99": ttft_err.quantile(0.99),
        # steadier than the p99 near its 5 ms bar: the p99 jumps by a token gap when this crosses 1 %
        "TTFT err >5ms %": 100 * float((ttft_err > 5.0).mean()) if len(ttft_err) else float("nan"),
        "stamp err p50": stamp_err.quantile(0.5),
        "stamp err p99": stamp_err.quantile(0.99),
        "last err p99": last_err.quantile(0.99),
        "ITL p50": float(np.median(window_gaps)) if len(window_gaps) else float("nan"),
        "read delay p99": delay,
        "requests": len(ok),
        "core speed": speed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=sorted(PRESETS))
    parser.add_argument("--streams", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--step-ms", type=float, default=10.0)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--ttft-ms", type=float, default=100.0)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument(
        "--clock",
        choices=["kernel", "user"],
        default="kernel",
        help="user: LOADLINE_KERNEL_CLOCK=0 (stamps at read time)",
    )
    parser.add_argument(
        "--reads",
        choices=["push", "pull"],
        default="push",
        help="pull: LOADLINE_PUSH_READS=0 (every body read in its user's greenlet)",
    )
    parser.add_argument(
        "--watch",
        choices=["budget", "on", "off"],
        default="budget",
        help="the first-bytes watch (first tokens stamped by a watching thread): budget, the "
        "default (it rests while it costs the loop too much); on: LOADLINE_FIRST_BYTES_WATCH=1 "
        "whatever it costs; off: =0",
    )
    parser.add_argument("--hog", action="store_true", help="a busy process on the generator's core")
    parser.add_argument(
        "--repo",
        type=Path,
        action="append",
        help="a code tree whose generator is measured (repeat it to compare trees: they take turns)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="runs of each tree, interleaved (the core's speed drifts: see `core speed`)",
    )
    args = parser.parse_args()
    os.environ["LOADLINE_PUSH_READS"] = "1" if args.reads == "push" else "0"  # the generator inherits it
    os.environ["LOADLINE_FIRST_BYTES_WATCH"] = {"budget": "", "on": "1", "off": "0"}[args.watch]
    setting = (
        PRESETS[args.preset]
        if args.preset
        else {"streams": args.streams, "step_ms": args.step_ms, "tokens": args.tokens, "ttft_ms": args.ttft_ms}
    )
    repos = [repo.resolve() for repo in args.repo or [REPO]]
    rows = [
        {
            "tree": repo.name,
            **one(
                n, args.seconds, setting["step_ms"], setting["tokens"], setting["ttft_ms"], args.clock, repo, args.hog
            ),
        }
        for _ in range(max(1, args.rounds))
        for n in setting["streams"]
        for repo in repos
    ]
    print(
        pd.DataFrame(rows).to_string(
            index=False, float_format=lambda v: f"{v:,.3f}", formatters={"CPU-s/1k tok": lambda v: f"{v:.4f}"}
        )
    )  # steps of ~1 %


if __name__ == "__main__":
    main()
