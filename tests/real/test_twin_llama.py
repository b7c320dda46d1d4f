"""The twin against a real engine: llama-server at 8 slots, 4 slots, 2 slots and with a longer and a long
prompt mix, each run for real three times, round by round; the twin fitted on the three 8-slot runs predicts the
other three setups and is held to 15 % of the real runs' median on throughput and TTFT P95 at every
step below the real break point, with the same limiting layer (docs/twin.md has the measured table)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
TOLERANCE = 0.15
# Each what-if is run for real this many times and the twin is held to the median: one 20-second step
# is a sample of the host as much as of the engine (on a quiet box llama-server's own per-token prompt
# time once doubled for a step, and that step read 30 % less throughput than the next, heavier one).
REPEATS = 3
FIGURES = ("rps", "ttft_p95_ms")  # held to TOLERANCE at every step below the break point
MAX_TOKENS = 64  # the tiny model never emits EOS: every reply is this long
# This model decodes a token in ~0.5 ms on one thread: the engine is loaded by prefill (medium prompts,
# ~0.2 ms a token) and short think times; at 16 users the client itself starts to lag (the run's trust
# says so), so the steps stop there.
STEPS = ("--step-start-users", "2", "--step-max-users", "16", "--step-hold", "20", "--baseline-hold", "10")
# A fixed seed: the twin replays it, so each user's prompts and think times are drawn the same in the
# real runs and the twin's (common random numbers). A 20-second step holds ~100-170 requests, and its
# throughput alone moves by ~10 % with the draws (one real step read 7.25 req/s, a rerun 8.85).
LOAD = (
    *STEPS,
    "--max-tokens",
    str(MAX_TOKENS),
    "--event-interval",
    "0.1",
    "--scrape-interval",
    "1",
    "--seed",
    "7",
)
FITTED_MIX = ("--prompt-mix", "short=0.5,medium=0.5")
LONGER_MIX = ("--prompt-mix", "medium=1")
# 1,000-2,000 tokens, three times the fitted p95 prompt: the bend of the fitted prefill cost (attention,
# docs/twin.md) carries the twin there; a straight line fitted on short and medium prompts reads them short.
LONG_MIX = ("--prompt-mix", "long=1")
WHAT_IFS = {  # name -> (slots, load options, twin changes)
    "parallel 4": (4, FITTED_MIX, ["max_num_seqs=4"]),
    "parallel 2": (2, FITTED_MIX, ["max_num_seqs=2"]),
    "longer prompts": (8, LONGER_MIX, []),
    "long prompts": (8, LONG_MIX, []),
}


def _phases(verdict: dict) -> dict[str, dict]:
    return {p["label"]: p for p in verdict["phases"] if p["kind"] != "baseline" and p.get("requests")}


def _below_break(verdict: dict) -> list[str]:
    """The real run's step labels before its break point (all of them when nothing broke)."""
    broke = (verdict["answer"]["break_point"].get("load") or {}).get("phase")
    labels = list(_phases(verdict))
    return labels[: labels.index(broke)] if broke in labels else labels


def _real_figures(runs: list) -> tuple[dict[tuple[str, str], list[float]], list[str], str]:
    """Each step's figures over the repeats ({(step, figure): values}), the steps below the break point
    in every repeat, and the limiting layer most repeats named."""
    verdicts = [run.verdict for run in runs]
    labels = min((_below_break(v) for v in verdicts), key=len)
    values = {(label, figure): [_phases(v)[label][figure] for v in verdicts] for label in labels for figure in FIGURES}
    layers = [v["answer"]["layer"]["name"] for v in verdicts]
    return values, labels, max(set(layers), key=layers.count)


def _real_run(llama_server, loadline_run, slots: int, mix: tuple[str, ...]):
    """A stepped run on a fresh llama-server, stopped once the run is done (an idle server keeps its
    prompt cache, ~1.5 GB after a run)."""
    server = llama_server(parallel=slots)
    done = loadline_run(server.url, "--scenario", "single", "--shape", "stepped", locust=(*LOAD, *mix), timeout=600)
    server.stop()
    assert done.returncode in (0, 1, 2) and (done.folder / "report" / "verdict.json").is_file(), done.output[-2000:]
    return done


def test_twin_fitted_at_eight_slots_predicts_four_two_and_longer_prompts(
    llama_server, loadline_run, real_summary, real_dir
):
    # Every real run first, one server at a time, then the twin's. Interleaved (a real run after each
    # prediction, every server left running) the real engine read ~20 % less capacity at 8 users than
    # the same run alone on a fresh box; a CPU hog before a run alone did not reproduce that.
    # The fitted setup is run in every round too and the twin is fitted on all three: fitted on one run
    # made first, the twin reproduced that run, which read 15-20 % less throughput than the 4-slot runs
    # of the next 15 minutes (a host that sped up made the fit the outlier).
    fitted: list = []
    reals: dict[str, list] = {name: [] for name in WHAT_IFS}
    for _ in range(REPEATS):  # round by round: a slow spell of the host lands in one repeat of one setup
        fitted.append(_real_run(llama_server, loadline_run, 8, FITTED_MIX))
        for name, (slots, mix, _changes) in WHAT_IFS.items():
            reals[name].append(_real_run(llama_server, loadline_run, slots, mix))
    twin = real_dir / "twin"
    done = subprocess.run(
        [sys.executable, "-m", "loadline", "twin", "fit", *(str(run.folder) for run in fitted), "--out", str(twin)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    values = {p["name"]: p["value"] for p in json.loads((twin / "twin.json").read_text())["parameters"]}
    assert (
        values["max_num_seqs"] >= 8
    )  # the slots (requests_processing pinned while requests were deferred), or a bound

    lines = [
        f"| what-if | step | figure | llama-server, median of {REPEATS} (range) | twin | error |",
        "|---|---|---|---|---|---|",
    ]
    failures = []
    for name, (_, mix, changes) in WHAT_IFS.items():
        real_values, labels, real_layer = _real_figures(reals[name])
        sets = [arg for change in changes for arg in ("--set", change)]
        out = real_dir / f"predict-{name.replace(' ', '-')}"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "loadline",
                "twin",
                "predict",
                str(twin),
                *sets,
                "--out",
                str(out),
                "--json",
                "--",
                *mix,
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        prediction = json.loads(done.stdout)
        predicted = {p["phase"]: p for p in prediction["phases"]}
        for label in labels:
            for figure in FIGURES:
                seen = real_values[(label, figure)]
                truth, twin_value = statistics.median(seen), (predicted.get(label) or {}).get(figure)
                if twin_value is None:
                    failures.append(f"{name} {label}: the twin's run has no such step")
                    continue
                error = (twin_value - truth) / truth
                lines.append(
                    f"| {name} | {label} | {figure} | {truth:.3g} ({min(seen):.3g}-{max(seen):.3g}) "
                    f"| {twin_value:.3g} | {error:+.0%} |"
                )
                if abs(error) > TOLERANCE:
                    failures.append(f"{name} {label} {figure}: llama-server {truth:.3g}, twin {twin_value:.3g}")
        twin_layer = prediction["answer"]["layer"]["name"]
        lines.append(f"| {name} | - | limiting layer | {real_layer} | {twin_layer} | |")
        real_summary(f"twin {name}: limiting layer", f"llama-server {real_layer}, twin {twin_layer}")
        if real_layer != twin_layer:
            failures.append(f"{name}: limiting layer llama-server {real_layer}, twin {twin_layer}")
    (real_dir / "twin-validation.md").write_text("\n".join(lines) + "\n")
    real_summary(
        "twin: steps within 15 %",
        f"{len(lines) - 2 - len(WHAT_IFS) - len(failures)} of {len(lines) - 2 - len(WHAT_IFS)} figures",
    )
    assert not failures, "\n".join(failures)


pytestmark = pytest.mark.exclusive
