"""End to end: each bottleneck the simulator can produce, run briefly with `loadline run`; the
report's verdict.json must name that layer, and a healthy run must say `headroom`.

Every run uses the tiny profile, time-scaled x10 (x50 for the starved generator), ~12-20 s of
wall time each. The simulator options create the limit; the rules know nothing of them:
- scheduler:      max_num_seqs=2            (the batch cap, far below what KV and GPU allow)
- kv-cache:       num_gpu_blocks=160 (max_model_len=2048 to fit) + long prompts (KV pool too small for the contexts)
- gpu-compute:    peak_tflops=1, large batch cap and KV pool (decode step grows with the batch)
- gateway:        max_connections=4         (the simulator's gateway refuses extra connections)
- memory-leak:    leak_blocks_per_s=2 in a soak (KV blocks lost until an out-of-memory restart)
- load-generator: 160 users without think time on one process against a x50 fast engine
Two more runs use fixed users and no shape on the default profile (one phase, judged on time slices):
32 users on max_num_seqs=4 must say scheduler; 4 users with 64-token replies must say headroom and pass.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 120

# 1 user, then 4, then 16, each held 4 s of wall time (40 s / time-scale 10)
STEPPED = [
    "--shape",
    "stepped",
    "--time-scale",
    "10",
    "--scenario",
    "single",
    "--",
    "--baseline-hold",
    "40",
    "--step-start-users",
    "4",
    "--step-factor",
    "4",
    "--step-hold",
    "40",
    "--step-max-users",
    "16",
    "--step-stop-on-slo",
    "false",
    "--scrape-interval",
    "0.5",
    "--seed",
    "1",
    "--event-interval",
    "2",
]
SHORT_PROMPTS = ["--prompt-mix", "short=0.7,medium=0.3"]

CASES = {
    "headroom": (
        [],
        [
            "--shape",
            "stepped",
            "--time-scale",
            "10",
            "--scenario",
            "single",
            "--",
            "--baseline-hold",
            "40",
            "--step-start-users",
            "2",
            "--step-factor",
            "2",
            "--step-hold",
            "40",
            "--step-max-users",
            "4",
            "--step-stop-on-slo",
            "false",
            "--scrape-interval",
            "0.5",
            "--seed",
            "1",
            "--event-interval",
            "5",
            *SHORT_PROMPTS,
        ],
    ),
    "scheduler": (["max_num_seqs=2"], STEPPED + SHORT_PROMPTS),
    "kv-cache": (
        ["num_gpu_blocks=160", "max_model_len=2048"],
        STEPPED + ["--prompt-mix", "long=1", "--max-tokens", "64"],
    ),
    "gpu-compute": (
        ["peak_tflops=1", "max_num_seqs=64", "num_gpu_blocks=4096"],
        STEPPED + SHORT_PROMPTS + ["--max-tokens", "96", "--ignore-eos"],
    ),
    "gateway": (["max_connections=4"], STEPPED + SHORT_PROMPTS),
    "memory-leak": (
        ["leak_blocks_per_s=2"],
        [
            "--shape",
            "soak",
            "--time-scale",
            "10",
            "--scenario",
            "single",
            "--",
            "--soak-users",
            "8",
            "--soak-ramp",
            "20",
            "--soak-hold",
            "120",
            "--soak-window",
            "40",
            "--scrape-interval",
            "0.5",
            "--seed",
            "1",
            "--event-interval",
            "2",
            *SHORT_PROMPTS,
        ],
    ),
    "load-generator": (
        ["max_num_seqs=256", "num_gpu_blocks=8192", "max_num_batched_tokens=8192"],
        [
            "--users",
            "160",
            "--spawn-rate",
            "160",
            "--run-time",
            "12s",
            "--time-scale",
            "50",
            "--scenario",
            "single",
            "--",
            "--scrape-interval",
            "0.5",
            "--seed",
            "1",
            "--event-interval",
            "0.2",
            "--prompt-mix",
            "short=1",
            "--max-tokens",
            "64",
            "--ignore-eos",
        ],
    ),
}


def run_verdict(sim_options: list[str], run_args: list[str], out: Path, profile: str = "tiny") -> dict:
    sim = [arg for option in sim_options for arg in ("--sim-option", option)]
    command = [
        sys.executable,
        "-m",
        "loadline",
        "run",
        *(["--sim-profile", profile] if profile else []),
        *sim,
        "--out",
        str(out),
        "--no-charts",
        *run_args,
    ]  # the verdict is what is judged here
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    # 2: the validity check found the numbers untrustworthy (a lagging generator on a busy machine);
    # the report and its bottleneck verdict are still written, and judged here
    # a run folder on stdout: else the run stopped on a usage error (exit 2), said on stderr
    assert done.returncode in (0, 1, 2) and done.stdout.strip(), done.stderr[-3000:]
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    verdict = json.loads((run_dir / "report" / "verdict.json").read_text())
    assert done.returncode != 2 or (verdict.get("validity") or {}).get("usable") is not False, verdict.get("validity")
    return verdict


def run_case(sim_options: list[str], run_args: list[str], out: Path) -> dict:
    return run_verdict(sim_options, run_args, out)["bottleneck"]


# The load-generator case runs beside the other test processes, as it would on a shared machine: there
# the generator gets ~65 % of a core and waits for it the rest of the time, which its demand for the
# core (CPU + wait, loadline/core/saturation.py) counts; CPU % alone read that as not saturated.
# The engine cases run alone (exclusive): each names the limit of an engine model, and a simulator
# starved by four test processes on two cores is another engine (its x10 steps stretch, its KV pool
# drains between them). The kv-cache case read 'scheduler' there while the pool counted as full only at
# 90 % (KV p90 84 %, max 86 %, 290 preemptions); it is full once the room left cannot hold one of its
# 1,000-2,000-token requests (analysis/verdict/reading.py kv_full_level): kv-cache in 3 of 3 runs beside
# three busy loops.
# The gateway case runs beside them too: it counts refused connections while at most 4 requests reach
# an engine whose batch holds 8, so a slower engine still never queues (measured beside three busy
# loops on two cores: gateway, margin 3.0, in 2 runs of 2).
SHARED_CASES = ("load-generator", "gateway")
ENGINE_CASES = [pytest.param(layer, marks=pytest.mark.exclusive) for layer in CASES if layer not in SHARED_CASES]


@pytest.mark.parametrize("layer", [*ENGINE_CASES, *SHARED_CASES])
def test_simulated_bottleneck_is_named(layer, tmp_path):
    sim_options, run_args = CASES[layer]
    bottleneck = run_case(sim_options, run_args, tmp_path)
    assert bottleneck["layer"] == layer, json.dumps(bottleneck, indent=1)
    assert bottleneck["evidence"], bottleneck
    if layer != "headroom":
        # the verdict's own margin; the final confidence is lowered by the validity check on a busy machine
        assert bottleneck["margin"] >= 0.5 and bottleneck["actions"], bottleneck
        assert bottleneck["limit"]["reached"] or layer in ("memory-leak", "load-generator")


# Fixed users, no shape (the web UI's default): one phase, so no baseline phase to compare with; the
# verdict reads the run's own time windows. The default profile (h100-llama3-8b), x10 time scale.
# 12 s of wall time still cuts 6 slices of >= 3 scrapes each (analysis/verdict/context.py slice_windows);
# at 20 s the slices already held too few requests for the P95 and flat-throughput comparisons (76 and
# 50 needed, ~25 per slice), and slices of one user count are never compared for a latency rise, so the
# windows' engine signals (queue, batch, KV) decide at either length. Measured (3 runs at 12 s): scheduler
# held with margin 3.0 (231-237 requests), headroom with the SLO passed (84-85 requests, TTFT P95 90-101 ms).
FIXED = [
    "--spawn-rate",
    "64",
    "--run-time",
    "12s",
    "--time-scale",
    "10",
    "--scenario",
    "single",
    "--",
    "--scrape-interval",
    "0.5",
    "--seed",
    "1",
    *SHORT_PROMPTS,
]


def test_fixed_user_run_held_by_the_batch_cap_says_scheduler(tmp_path):
    """32 users on max_num_seqs=4: one phase, no baseline phase, still the scheduler, not "headroom"."""
    verdict = run_verdict(["max_num_seqs=4"], ["--users", "32", *FIXED], tmp_path, profile="")
    bottleneck = verdict["bottleneck"]
    assert bottleneck["layer"] == "scheduler", json.dumps(bottleneck, indent=1)
    # confidence is not asserted: on a busy machine the validity check lowers it (generator lag, floor)
    assert bottleneck["limit"]["reached"] and bottleneck["margin"] >= 0.5
    text = " ".join(bottleneck["evidence"])
    assert "running requests p50 4" in text and "requests waiting in" in text


def test_healthy_fixed_user_run_says_headroom_and_passes_the_default_slo(tmp_path):
    verdict = run_verdict([], ["--users", "4", *FIXED, "--max-tokens", "64"], tmp_path, profile="")
    bottleneck = verdict["bottleneck"]
    assert bottleneck["layer"] == "headroom", json.dumps(bottleneck, indent=1)
    assert verdict["slo"]["passed"], verdict["slo"]["criteria"]
