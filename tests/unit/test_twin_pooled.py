"""A twin fitted on several runs of one engine setup: pooled evidence, not one run's.

The runs are synthetic closed loops on a toy engine whose decode step grows with the batch; no engine
metrics, so the cap is a bound. A run given with a copy of itself (made an hour later) fits to the same
numbers as the run alone; a slower run pulls the pooled step between the two; runs that disagree on
the engine's setup are refused in one line."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from loadline.analysis.data.load import RunData
from loadline.analysis.twin.fit import fit
from loadline.analysis.twin.overlap import mean_overlap
from loadline.commands.twin import render_fit
from loadline.core.errors import UsageError
from loadline.core.records import Status

pytestmark = pytest.mark.unit

T0 = 1_800_000_000.0
OUTPUT = 32


def _engine_metrics(cap: int, start: float) -> pd.DataFrame:
    """vLLM gauges for ten scrapes: `cap` running while two waited (the engine's cap in force)."""
    rows = []
    for k in range(10):
        rows.append((start + k, "engine", "vllm:num_requests_running", "{}", float(cap if k % 2 else cap - 1)))
        rows.append((start + k, "engine", "vllm:num_requests_waiting", "{}", 2.0 if k % 2 else 0.0))
    return pd.DataFrame(rows, columns=["ts", "source", "metric", "labels", "value"])


def _run(
    name: str,
    step_ms: float,
    per_seq_ms: float,
    users: int = 6,
    seed: int = 3,
    shift: float = 0.0,
    cap: int | None = None,
    late: float = 0.0,
) -> RunData:
    """`users` users sending back to back with a short think time for 60 s; each request's gap is the
    toy step at the batch its decode shared (three passes: the batch depends on the gaps)."""
    rng = np.random.default_rng(seed)
    n_per_user = 40
    prompt = rng.integers(50, 400, size=users * n_per_user).astype(float)
    think = rng.uniform(0.05, 0.4, size=users * n_per_user)
    ttft = (3.0 + 0.1 * prompt) / 1e3
    itl = np.full(len(prompt), step_ms / 1e3)
    for _ in range(3):
        t0 = np.zeros(len(prompt))
        for u in range(users):
            t = T0 + shift + u * 0.05
            for k in range(n_per_user):
                i = u * n_per_user + k
                t0[i] = t
                t += ttft[i] + itl[i] * (OUTPUT - 1) + think[i]
        tf, te = t0 + ttft, t0 + ttft + itl * (OUTPUT - 1)
        batch = mean_overlap(tf, te, tf, te, np.ones(len(t0)))
        itl = (step_ms + per_seq_ms * batch) / 1e3
    requests = pd.DataFrame(
        {
            "request_id": [f"{name}-{i}" for i in range(len(t0))],
            "status": Status.OK,
            "start_wall": t0,
            "ttft_ms": ttft * 1e3,
            "e2e_ms": (te - t0) * 1e3,
            # a time-scaled simulator's steps (late > 0): six late by `late`, the seventh catching up,
            # and one stall (another request's prefill) of 4 steps; the mean of the rest is the step
            "itl_p50_ms": itl * 1e3 * (1 + late),
            "itl_us": [_gaps(step, late) for step in itl] if late else "",
            "prompt_tokens": prompt,
            "output_tokens": OUTPUT,
            "finish_reason": "length",
        }
    )
    phases = pd.DataFrame(
        {
            "label": ["whole"],
            "kind": ["step"],
            "start_wall": [t0.min()],
            "end_wall": [te.max()],
            "target_users": [users],
        }
    )
    metrics = (
        pd.DataFrame(columns=["ts", "source", "metric", "labels", "value"])
        if cap is None
        else _engine_metrics(cap, float(t0.min()))
    )
    return RunData(Path(name), {}, requests, phases, metrics, pd.DataFrame(), None)


def _gaps(step_s: float, late: float) -> str:
    us = step_s * 1e6
    pattern = [us * (1 + late)] * 6 + [us * (1 - 6 * late)]
    gaps = (pattern * OUTPUT)[: OUTPUT - 2] + [4 * us]
    return " ".join(str(round(g)) for g in gaps)


def _costs(profile) -> dict[str, float]:
    keep = ("per_seq_overhead_us", "kv_bytes_per_token", "params_b", "request_overhead_ms", "max_num_seqs")
    return {p.name: p.value for p in profile.parameters if p.name in keep}


@pytest.mark.parametrize(("step_ms", "per_seq_ms"), [(4.0, 1.0), (10.0, 0.3)])
def test_a_run_pooled_with_its_copy_fits_what_the_run_alone_fits(step_ms: float, per_seq_ms: float) -> None:
    alone = fit(_run("a", step_ms, per_seq_ms))
    # the copy on the same clock: overlaps taken across the two runs would double every batch
    twice = fit([_run("a", step_ms, per_seq_ms), _run("b", step_ms, per_seq_ms)])
    assert _costs(twice) == pytest.approx(_costs(alone), rel=1e-6)
    decode, prefill = alone.regressions["decode"], alone.regressions["prefill"]
    assert twice.regressions["decode"]["base_ms"] == pytest.approx(decode["base_ms"], rel=1e-6)
    # How much of the empty step a compute-bound prefill hides is not identified by these prompts (every
    # share fits them alike, ties broken by rounding): held is how well the prefill line fits.
    assert twice.regressions["prefill"]["mean_rel_residual"] == pytest.approx(prefill["mean_rel_residual"], rel=1e-6)
    assert twice.regressions["decode"]["n"] == 2 * alone.regressions["decode"]["n"]
    # the same loads and lengths; the 99th percentile of the batch interpolates between other neighbours
    assert replace(twice.fitted_range, max_running=0) == replace(alone.fitted_range, max_running=0)
    assert twice.fitted_range.max_running == pytest.approx(alone.fitted_range.max_running, rel=0.05)
    assert twice.run == "a, b" and any("2 runs pooled" in note for note in twice.notes)
    assert "note: fitted on 2 runs pooled: a, b" in render_fit(twice).splitlines()  # what the command prints


@pytest.mark.parametrize("slower", [1.3, 2.0])
def test_a_slower_run_pulls_the_pooled_step_between_the_two(slower: float) -> None:
    fast, slow = _run("fast", 4.0, 1.0), _run("slow", 4.0 * slower, 1.0 * slower, seed=5, shift=3600.0)
    base = {name: fit(run).regressions["decode"] for name, run in (("fast", fast), ("slow", slow))}
    pooled = fit([fast, slow]).regressions["decode"]

    def step(d: dict) -> float:  # the step at 4 sequences: the terms may trade, the step may not
        return d["base_ms"] + 4 * d["per_seq_us"] / 1e3

    assert step(base["fast"]) < step(pooled) < step(base["slow"])
    assert step(base["slow"]) / step(base["fast"]) == pytest.approx(slower, rel=0.1)  # the toy engine is read


def test_runs_of_different_setups_are_refused_in_one_line() -> None:
    one, two = _run("one", 4.0, 1.0), _run("two", 4.0, 1.0, shift=3600.0)
    two.manifest["replicas"] = 2
    with pytest.raises(UsageError, match=r"^the runs differ in replicas \(one: 1, two: 2\)") as refused:
        fit([one, two])
    assert "\n" not in str(refused.value)
    with pytest.raises(UsageError, match="no run to fit"):
        fit([])


def test_measured_caps_a_scrape_apart_give_the_largest_and_far_apart_are_refused() -> None:
    eight, seven = _run("eight", 4.0, 1.0, cap=8), _run("seven", 4.0, 1.0, shift=3600.0, cap=7)
    unseen = _run("unseen", 4.0, 1.0, shift=7200.0)  # no engine metrics: only a bound
    cap = {p.name: p for p in fit([seven, unseen, eight]).parameters}["max_num_seqs"]
    assert (cap.value, cap.grade) == (8, "measured") and "the largest of [7, 8]" in cap.evidence
    four = _run("four", 4.0, 1.0, shift=7200.0, cap=4)
    with pytest.raises(UsageError, match=r"different batch caps \(eight: 8, four: 4\)") as refused:
        fit([eight, unseen, four])  # each cap named beside its own run, the bound left out
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(("step_ms", "late"), [(2.0, 0.05), (10.0, 0.08)])
def test_the_decode_step_is_the_mean_gap_of_steps_that_alternate_late_and_catching_up(
    step_ms: float, late: float
) -> None:
    """A time-scaled simulator sleeps in whole milliseconds and catches up on the next step: the
    median gap reads the late steps; the mean of the gaps, less the stalls, reads the step."""

    def step(run: RunData) -> float:  # the step at 4 sequences
        d = fit(run).regressions["decode"]
        return d["base_ms"] + 4 * d["per_seq_us"] / 1e3

    truth = step(_run("exact", step_ms, 0.2))
    with_gaps = _run("gaps", step_ms, 0.2, late=late)
    # a refused request first: the gaps of the successful ones must stay with their rows
    refused = with_gaps.requests.iloc[:1].assign(status=Status.ERROR, itl_us="999999 1")
    with_gaps.requests = pd.concat([refused, with_gaps.requests], ignore_index=True)
    assert step(with_gaps) == pytest.approx(truth, rel=0.01)
    without = _run("median only", step_ms, 0.2, late=late)
    without.requests["itl_us"] = ""  # a table without the gaps: the median is all there is
    assert step(without) == pytest.approx(truth * (1 + late), rel=0.01)


def test_a_late_read_of_several_tokens_is_not_a_stall() -> None:
    """A long gap and the zeros after it (tokens read together) spread to the step: kept; a stall
    (a prefill in the step) and any tokens read with it: left out."""
    from loadline.analysis.twin.decode_steps import mean_step as _mean_step

    late_read = np.array([10.0] * 31 + [60.0] + [0.0] * 5 + [10.0] * 10)
    assert _mean_step(late_read) == pytest.approx(10.0, rel=0.01)
    stall = np.array([10.0] * 31 + [60.0, 0.0] + [10.0] * 10)
    assert _mean_step(stall) == pytest.approx(10.0, rel=0.01)
