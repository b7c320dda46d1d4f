"""The simulator as ground truth for the twin: fit on a run of a profile, predict what-ifs (a smaller
batch cap, a smaller KV cache, two replicas), and compare each with an actual run of the simulator so
changed, per phase: throughput and median TPOT within 10 %, median TTFT within 15 %. docs/twin.md has
the measured tables; this test rewrites runs/twin-validation-PROFILE.md with today's."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from loadline.simulator.config import build_config
from tests.spine_helpers import REPO, loadline

pytestmark = [pytest.mark.e2e, pytest.mark.exclusive]  # time-scaled runs: a starved client moves their figures

SCALE = "5"  # the Makefile demo's scale (its comment says why not more on a 2-core machine)
LOAD = ["--scenario", "single", "--shape", "stepped"]
# One unimodal prompt distribution (a class mix puts its median on a class edge, where a few draws more
# or fewer of one class move it by 20 %), think time short enough for a few hundred requests a step.
LOCUST = ["--step-start-users", "4", "--step-max-users", "16", "--step-hold", "60", "--baseline-hold", "20"]
LOCUST += ["--event-interval", "0.2", "--max-tokens", "64", "--prompt-tokens", "lognormal:200,0.5"]
# Three engines of other shapes: the tiny profile (max_num_seqs 8, 256 KV blocks, compute-bound prefill of a
# slow model: ~20 ms steps), an H100 running Llama-3-8B (memory-bound decode, ~10 ms steps, no cap and a
# pool no 16 users fill), and the tiny profile whose prefill pays attention (a prompt's cost per token
# bends up with its length, as llama.cpp's tiny CPU model's does: the linear cost doubles at ~1,350 tokens
# of context). Each predicts a smaller batch cap and a smaller KV cache or two replicas or longer prompts.
# A smaller KV pool needs a shorter max_model_len (the simulator refuses a sequence longer than its pool,
# as vLLM does). The H100's pool: 128 blocks of 16 hold ~7 of these requests.
# The bend shows only across lengths above the memory floor (docs/twin.md): the tiny profile's short
# prompts sit under it (6.7 ms of weights), and 500 short and medium prompts at its ~10 % TTFT noise did
# not show the bend. So that case is fitted on the default mix (short, medium and long), from 2 users,
# and predicts a shift to long prompts only (1,000-2,000 tokens), in a pool that holds them (1,024 blocks;
# 256 preempted them from the first step). Its batch cap what-if is left to the other two: on this mix the
# median TTFT sits at the top of the short class, and it read +23 % at 4 users with the cap at 4 where
# throughput and TPOT were within 2 %.
# The fourth speaks llama.cpp's metrics and keeps a KV buffer per slot: a batch also reads the idle slots
# inside its span (slot_span_kv_bytes_per_cell, a KV token's bytes per cell: +16 % on a step of 2 among 8
# slots, nothing among 2). Its fit finds the slot cap from the deferred requests and the idle slots' cost
# from the gaps; it predicts 2 slots, from 1 user. The KV pool is not exported there, so the twin's never
# limits.
MIXED = ["--prompt-tokens", "short=0.6,medium=0.3,long=0.1", "--step-start-users", "2", "--seed", "7"]
LONG_PROMPTS = ["--prompt-tokens", "long=1"]
PROFILES = {  # name -> (profile, its sim options, its load, {what-if: (sim changes, load changes)})
    "tiny": (
        "tiny",
        [],
        [],
        {
            "max_num_seqs=4": (["max_num_seqs=4"], []),
            "num_gpu_blocks=96": (["num_gpu_blocks=96", "max_model_len=1536"], []),
            "replicas=2": (["replicas=2"], []),
        },
    ),
    "h100-llama3-8b": (
        "h100-llama3-8b",
        [],
        [],
        {
            "max_num_seqs=4": (["max_num_seqs=4"], []),
            "num_gpu_blocks=128": (["num_gpu_blocks=128", "max_model_len=2048"], []),
            "replicas=2": (["replicas=2"], []),
        },
    ),
    "tiny-llamacpp-slots": (
        "tiny",
        # llama.cpp's prefill batch (n_batch 2048), which the twin takes where no step shows the chunk: with
        # the tiny profile's 512 the prompts over it paid a second step, and the fit read that as a bend
        ["quirks=llamacpp-api", "slot_span_kv_bytes_per_cell=262144", "max_num_batched_tokens=2048"],
        # 2 slots break the SLO at 4 users, so from 1; seeded: a 1-user step holds ~80 requests, and
        # unseeded the actual run's median prompt read 146 tokens where the twin's drew 186
        ["--step-start-users", "1", "--seed", "7"],
        {
            "max_num_seqs=2": (["max_num_seqs=2"], []),
        },
    ),
    "tiny-attention": (
        "tiny",
        ["attention_flops_per_cell=740000", "num_gpu_blocks=1024"],  # 7.4e-4 of 2 x P per context token
        MIXED,
        {
            "long prompts": ([], LONG_PROMPTS),
        },
    ),
}
# Four time-scaled runs at the least (fit, then a what-if's actual and predicted runs): about three minutes
# alone on the machine, which put `make test` at 14.7 minutes on 2 cores. `make twin-validation`
# (LOADLINE_TWIN_ALL=1) runs every case with all its what-ifs; `make test` checks the twin through
# tests/e2e/test_twin_commands.py (fit, replay on the run's own load, plan --twin) and tests/unit/test_twin.py.
if not os.environ.get("LOADLINE_TWIN_ALL"):
    pytestmark.append(pytest.mark.skip(reason="the twin against the simulator: `make twin-validation`"))
# Held per phase below the break point: throughput and the median TPOT to 10 %; the median TTFT to 15 %
# (measured within 10 %, the median of a one-minute step moves a few % between runs); ITL P50 and the
# P95s are reported beside them (docs/twin.md). The decode step is held through TPOT (each request's
# mean gap), not the pooled ITL median: at x5 the engine's steps (~4 ms of wall time) wake up to ~0.5 ms
# late and the next one catches up, so light-load gaps fall in two modes (17.5 and 22.5 ms for a 20 ms
# step) with the median between them, and it moved 11 % where TPOT moved 1.4 %.
TOLERANCE = {"rps": 0.10, "tpot_p50_ms": 0.10, "ttft_p50_ms": 0.15}
REPORTED = ("itl_p50_ms", "ttft_p95_ms", "itl_p95_ms")


def _run(out: Path, profile: str, sim_options: list[str], load: list[str]) -> Path:
    options = [arg for o in sim_options for arg in ("--sim-option", o)]
    done = loadline(
        "run",
        "--sim-profile",
        profile,
        "--time-scale",
        SCALE,
        *LOAD,
        *options,
        "--out",
        str(out),
        "--no-charts",
        "--",
        *LOCUST,
        *load,
        timeout=300,
    )
    assert done.code in (0, 1), done.stderr[-2000:]
    return done.run_dir


def _verdict(run_dir: Path) -> dict:
    return json.loads((run_dir / "report" / "verdict.json").read_text())


def _phases(verdict: dict) -> dict[str, dict]:
    return {p["label"]: p for p in verdict["phases"] if p["kind"] != "baseline" and p.get("requests")}


def _break(answer: dict) -> str:
    return (answer["break_point"].get("load") or {}).get("phase") or "none"


@pytest.mark.parametrize("profile", list(PROFILES))
def test_twin_predicts_what_ifs_within_ten_percent_of_the_simulator(profile: str, tmp_path: Path) -> None:
    base, own, own_load, what_ifs = PROFILES[profile]
    truth = build_config(base, dict(o.split("=", 1) for o in own))
    fitted_run = _run(tmp_path / "fit", base, own, own_load)
    twin = tmp_path / "twin"
    done = loadline("twin", "fit", str(fitted_run), "--out", str(twin))
    assert done.code == 0, done.stderr[-2000:]
    fitted = json.loads((twin / "twin.json").read_text())
    values = {p["name"]: p["value"] for p in fitted["parameters"]}
    if "llamacpp" not in truth.quirks:  # llama.cpp exports no KV pool
        assert values["num_gpu_blocks"] == truth.num_kv_blocks()  # read from the engine's own metrics
    # the idle slots' reads per KV cell, in seconds: the twin's unit machine reads 1e12 bytes a second
    per_cell = truth.slot_span_kv_bytes_per_cell / (truth.memory_efficiency * truth.hbm_bandwidth_gbs * 1e9)
    assert values["slot_span_kv_bytes_per_cell"] / 1e12 == pytest.approx(per_cell, rel=0.5, abs=1e-12)
    assert values["max_num_seqs"] >= min(8, truth.max_num_seqs)  # the cap, or a bound when the run did not reach it
    # attention's share of a prompt token's cost at the fitted p95 prompt: a bend where the engine has one,
    # none to speak of where it has none
    bend = values["attention_flops_per_cell"] * fitted["fitted_range"]["prompt_tokens"][1] / (2e9 * values["params_b"])
    assert bend > 0.1 if truth.attention_flops_per_cell else bend < 0.05, bend

    lines = ["| what-if | phase | figure | simulator | twin | error |", "|---|---|---|---|---|---|"]
    failures = []
    for name, (changes, load) in what_ifs.items():
        load = [*own_load, *load]
        verdict = _verdict(_run(tmp_path / f"actual-{name}", base, [*own, *changes], load))
        actual = _phases(verdict)
        sets = [arg for change in changes for arg in ("--set", change)]
        out = tmp_path / f"predict-{name}"
        done = loadline(
            "twin",
            "predict",
            str(twin),
            *sets,
            "--time-scale",
            SCALE,
            "--out",
            str(out),
            "--json",
            "--",
            *LOCUST,
            *load,
            timeout=300,
        )
        assert done.code == 0, done.stderr[-2000:]
        prediction = json.loads(done.stdout)
        predicted = {p["phase"]: p for p in prediction["phases"]}
        twin_run = _phases(_verdict(Path(prediction["run"])))  # TPOT is in the twin run's report, not the answer
        broke, twin_broke = _break(verdict["answer"]), _break(prediction["answer"])
        lines.append(f"| {name} | - | break point | {broke} | {twin_broke} | |")
        for label, phase in actual.items():
            if label == broke:
                break
            if label not in predicted:
                failures.append(f"{name} {label}: the twin's run has no such step")
                continue
            for figure in (*TOLERANCE, *REPORTED):
                twin_value = twin_run[label][figure] if figure == "tpot_p50_ms" else predicted[label][figure]
                truth = phase[figure]
                error = (twin_value - truth) / truth
                lines.append(f"| {name} | {label} | {figure} | {truth:.3g} | {twin_value:.3g} | {error:+.0%} |")
                if abs(error) > TOLERANCE.get(figure, float("inf")):
                    failures.append(f"{name} {label} {figure}: simulator {truth:.3g}, twin {twin_value:.3g}")
    (REPO / "runs").mkdir(exist_ok=True)
    (REPO / "runs" / f"twin-validation-{profile}.md").write_text("\n".join(lines) + "\n")
    assert not failures, "\n".join(failures)
