"""The twin's pure parts: the regressions recover known cost-model terms, the overlap counts, the stated
error widens outside the fitted range, the workload replays the run's load, and the written profile is
one the simulator accepts."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest

from loadline.analysis.twin import workload
from loadline.analysis.twin.model import ASSUMED, FITTED, MEASURED, FittedRange, Parameter, TwinProfile
from loadline.analysis.twin.overlap import in_flight_at, mean_overlap
from loadline.analysis.twin.regress import DecodeFit, fit_decode, fit_prefill, idle_slot_cells
from loadline.analysis.twin.uncertainty import BASE_ERROR, changes_outside, for_phase
from loadline.commands.main import main
from loadline.simulator import costmodel
from loadline.simulator.config import build_config

pytestmark = pytest.mark.unit


def test_decode_fit_recovers_the_step_terms() -> None:
    rng = np.random.default_rng(1)
    batch = rng.uniform(1, 8, 500)
    kv = batch * rng.uniform(50, 1500, 500)
    itl = 0.0187 + 50e-6 * batch + 3.3e-6 * kv + rng.normal(0, 2e-4, 500)
    fit = fit_decode(itl, batch, kv)
    assert fit.base_s == pytest.approx(0.0187, rel=0.03)
    assert fit.per_seq_s == pytest.approx(50e-6, rel=0.3)
    assert fit.per_kv_token_s == pytest.approx(3.3e-6, rel=0.03)
    assert fit.r2 > 0.9


def _slot_batches(rng, slots: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Time-averaged batches and KV of n requests on an engine with `slots` slots: short to medium contexts."""
    batch = rng.uniform(1, slots, n)
    return batch, batch * rng.uniform(60, 700, n)


@pytest.mark.parametrize("slots, per_cell", [(8, 177e-9), (16, 60e-9), (4, 300e-9)])
def test_decode_fit_finds_the_idle_slots_in_a_batchs_span(slots, per_cell) -> None:
    """An engine with a KV buffer per slot (llama.cpp) reads the idle slots' cells inside each batch's span:
    the fit recovers that term beside S and K, and so predicts a smaller slot count's step."""
    rng = np.random.default_rng(slots)
    batch, kv = _slot_batches(rng, slots, 1200)
    step = 0.25e-3 + 150e-6 * batch + 500e-9 * kv + per_cell * idle_slot_cells(batch, slots, kv)
    fit = fit_decode(step + rng.normal(0, 0.04 * step.mean(), len(step)), batch, kv, slots)
    assert fit.slots == slots
    assert fit.per_idle_cell_s == pytest.approx(per_cell, rel=0.25)
    assert fit.per_seq_s == pytest.approx(150e-6, rel=0.25)
    two = np.full(50, 2.0), np.full(50, 600.0)  # a batch of 2 with no idle slot beside it (2 slots)
    truth = 0.25e-3 + 150e-6 * 2 + 500e-9 * 600
    straight = fit_decode(step, batch, kv)  # the same requests fitted without the term
    at_two = float(replace(fit, slots=2).step_s(*two)[0])  # the what-if: the same engine with 2 slots
    assert abs(at_two - truth) < 0.05 * truth < abs(float(straight.step_s(*two)[0]) - truth)


@pytest.mark.parametrize("slots", [8, 32])
def test_decode_fit_adds_no_idle_slots_where_the_engine_has_one_kv_pool(slots) -> None:
    """Offered the idle slots' cells on an engine without them (llama.cpp's --kv-unified, vLLM), the fit
    keeps its three terms: the term must predict held-out requests better to stay."""
    rng = np.random.default_rng(slots + 1)
    batch, kv = _slot_batches(rng, slots, 1200)
    step = 0.25e-3 + 150e-6 * batch + 500e-9 * kv
    fit = fit_decode(step + rng.normal(0, 0.04 * step.mean(), len(step)), batch, kv, slots)
    assert fit.slots == 0 and fit.per_idle_cell_s == 0.0
    assert fit.per_kv_token_s == pytest.approx(500e-9, rel=0.1)


@pytest.mark.parametrize("slots", [2, 8, 64])
def test_the_fits_idle_slot_cells_are_the_simulators(slots) -> None:
    for batch in (1, 2, 3, slots):
        for kv in (batch * 40, batch * 300, batch * 1500):
            ours = float(idle_slot_cells(np.array([float(batch)]), slots, np.array([float(kv)]))[0])
            assert ours == pytest.approx(costmodel.idle_slot_cells(batch, slots, kv))


def test_decode_fit_never_returns_a_negative_term() -> None:
    batch = np.linspace(1, 8, 50)
    itl = 0.02 - 1e-4 * batch  # faster with more work: not an engine; the slope is dropped, not negated
    fit = fit_decode(itl, batch, np.zeros(50))
    assert fit.per_seq_s == 0.0 and fit.per_kv_token_s == 0.0 and fit.base_s > 0


def test_prefill_fit_recovers_the_compute_per_token_and_the_time_before_the_queue() -> None:
    rng = np.random.default_rng(2)
    decode = DecodeFit(base_s=0.0187, per_seq_s=0.0, per_kv_token_s=0.0, r2=1.0, n=10, rel_residual=0.0)
    tokens = rng.uniform(20, 1500, 400)
    batch, kv = np.zeros(400), np.zeros(400)
    m0, c, before = 0.0067, 100e-6, 0.023
    ttft = before + np.maximum(m0, c * tokens) + (decode.base_s - m0) + rng.normal(0, 3e-4, 400)
    fit = fit_prefill(ttft, tokens, batch, kv, decode)
    assert fit.per_token_s == pytest.approx(c, rel=0.1)
    assert fit.before_queue_s == pytest.approx(before, abs=0.003)
    assert fit.compute_bound_share > 0.5


def test_prefill_fit_counts_a_chunked_prompts_steps_when_the_time_before_the_queue_is_known() -> None:
    rng = np.random.default_rng(3)
    decode = DecodeFit(base_s=0.0187, per_seq_s=0.0, per_kv_token_s=0.0, r2=1.0, n=10, rel_residual=0.0)
    tokens = np.concatenate([rng.uniform(8, 48, 200), rng.uniform(200, 500, 100), rng.uniform(1000, 2000, 50)])
    m0, c, before, chunk = 0.0067, 100e-6, 0.023, 512
    chunks = np.ceil(tokens / chunk)
    ttft = before + chunks * (np.maximum(m0, c * tokens / chunks) + decode.base_s - m0)
    ttft += rng.normal(0, 3e-4, len(tokens))
    fit = fit_prefill(ttft, tokens, np.zeros(len(tokens)), np.zeros(len(tokens)), decode, before, chunk)
    assert fit.per_token_s == pytest.approx(c, rel=0.05)
    assert fit.weights_s == pytest.approx(m0, abs=0.0015)
    unchunked = fit_prefill(ttft, tokens, np.zeros(len(tokens)), np.zeros(len(tokens)), decode, before)
    assert unchunked.per_token_s > 1.1 * c  # one step per prompt: the chunks' fixed costs land on C


def _prompts_ttft(rng, tokens: np.ndarray, c: float, a: float, before: float, noise: float) -> np.ndarray:
    """TTFT of prompts prefilled alone by the simulator's cost model: M0 hidden, C per token, A per pair."""
    m0, base = 0.0005, 0.0008
    compute = c * tokens + a * tokens * (tokens + 1) / 2
    return (before + np.maximum(m0, compute) + base - m0) * rng.lognormal(0.0, noise, len(tokens))


@pytest.mark.parametrize(
    ("c_us", "share", "mix", "noise", "per_class"),
    [
        (127.0, 7.4e-4, "short+medium", 0.05, 300),  # llama.cpp's tiny model on one CPU thread (docs/twin.md)
        (127.0, 7.4e-4, "short+medium", 0.10, 600),  # noisier: takes more prompts (300 a class missed 1 in 3)
        (40.0, 2e-4, "short+medium+long", 0.05, 300),
        (40.0, 3e-3, "short+medium", 0.03, 300),
    ],
)
def test_prefill_fit_reads_attention_where_the_cost_bends_with_the_prompt(c_us, share, mix, noise, per_class) -> None:
    """Fitted on the run's prompts, the twin predicts longer ones: the bend is what a longer-prompt what-if
    extrapolates, so a prompt twice the longest fitted is held to 10 %. Prompts of more than one length
    class: within one (200-500 tokens), the free time before the queue absorbs most of the bend (a line
    through them misses the bent truth by ~1 % of their TTFT), and the fit keeps the straight line."""
    rng = np.random.default_rng(int(share * 1e6))
    classes = {"short": (8, 48), "medium": (200, 500), "long": (1000, 2000)}
    tokens = np.concatenate([rng.uniform(*classes[name], per_class) for name in mix.split("+")]).round()
    c, a, before = c_us * 1e-6, c_us * 1e-6 * share, 0.002
    decode = DecodeFit(base_s=0.0008, per_seq_s=0.0, per_kv_token_s=0.0, r2=1.0, n=10, rel_residual=0.0)
    zeros = np.zeros(len(tokens))
    fit = fit_prefill(_prompts_ttft(rng, tokens, c, a, before, noise), tokens, zeros, zeros, decode)
    assert fit.per_cell_s == pytest.approx(a, rel=0.5)
    longer = np.array([2.0 * tokens.max()])
    truth = _prompts_ttft(rng, longer, c, a, before, 0.0)
    predicted = _prompts_ttft(rng, longer, fit.per_token_s, fit.per_cell_s, fit.before_queue_s, 0.0)
    assert predicted == pytest.approx(truth, rel=0.10)


@pytest.mark.parametrize("mix", ["short+medium", "medium", "short+medium+long"])
def test_prefill_fit_adds_no_attention_an_engine_does_not_show(mix) -> None:
    """A straight cost line (the simulator's shipped profiles) keeps the twin straight: a bend fitted to noise
    would make every longer-prompt what-if slower than the engine."""
    rng = np.random.default_rng(len(mix))
    classes = {"short": (8, 48), "medium": (200, 500), "long": (1000, 2000)}
    tokens = np.concatenate([rng.uniform(*classes[name], 300) for name in mix.split("+")]).round()
    c, before = 100e-6, 0.02
    decode = DecodeFit(base_s=0.0008, per_seq_s=0.0, per_kv_token_s=0.0, r2=1.0, n=10, rel_residual=0.0)
    zeros = np.zeros(len(tokens))
    fit = fit_prefill(_prompts_ttft(rng, tokens, c, 0.0, before, 0.05), tokens, zeros, zeros, decode)
    longer = np.array([2.0 * tokens.max()])
    truth = _prompts_ttft(rng, longer, c, 0.0, before, 0.0)
    predicted = _prompts_ttft(rng, longer, fit.per_token_s, fit.per_cell_s, fit.before_queue_s, 0.0)
    assert predicted == pytest.approx(truth, rel=0.05)


def test_overlap_is_the_time_averaged_count_of_windows() -> None:
    start, end = np.array([0.0, 0.5, 2.0]), np.array([1.0, 1.5, 3.0])
    batch = mean_overlap(start, end, start, end, np.ones(3))
    assert batch == pytest.approx([1.5, 1.5, 1.0])  # each window holds itself; the first two share half
    assert list(in_flight_at(np.array([0.75, 1.75, 2.5]), start, end)) == [2, 0, 1]


def _profile(**range_overrides) -> TwinProfile:
    rng = dict(max_users=8.0, max_rps=4.0, max_running=7.5, prompt_tokens=(20, 1500), output_tokens=(9, 49), cap=8)
    rng.update(range_overrides)
    params = [
        Parameter("weights_gib", 6.0, FITTED, "x"),
        Parameter("step_overhead_ms", 12.0, FITTED, "x"),
        Parameter("per_seq_overhead_us", 50.0, FITTED, "x"),
        Parameter("kv_bytes_per_token", 3300000, FITTED, "x"),
        Parameter("params_b", 50.0, FITTED, "x"),
        Parameter("request_overhead_ms", 20.0, FITTED, "x"),
        Parameter("max_num_seqs", 8, MEASURED, "x"),
        Parameter("num_gpu_blocks", 256, MEASURED, "x"),
        Parameter("block_size", 16, MEASURED, "x"),
        Parameter("max_model_len", 4096, ASSUMED, "x"),
        Parameter("replicas", 1, MEASURED, "x"),
        Parameter("hbm_bandwidth_gbs", 1000.0, ASSUMED, "x"),
        Parameter("memory_efficiency", 1.0, ASSUMED, "x"),
        Parameter("peak_tflops", 1000.0, ASSUMED, "x"),
        Parameter("compute_efficiency", 1.0, ASSUMED, "x"),
        Parameter("gpu_memory_gib", 40.0, ASSUMED, "x"),
        Parameter("model_name", "loadline/twin", ASSUMED, "x"),
        Parameter("enable_prefix_caching", True, MEASURED, "x"),
    ]
    return TwinProfile("runs/x", "vllm", 1, params, FittedRange(**rng), {"scenario": "single"})


def test_a_phase_inside_the_fitted_range_keeps_the_base_error() -> None:
    u = for_phase(_profile(), BASE_ERROR, 1.0, [], users=4, rps=2.0, replicas=1, prompt_p95=1400)
    assert u.inside and u.error == BASE_ERROR


def test_more_load_than_the_run_reached_widens_the_error_and_says_so() -> None:
    u = for_phase(_profile(), BASE_ERROR, 1.0, [], users=32, rps=16.0, replicas=1, prompt_p95=1400)
    assert not u.inside and u.error > 2 * BASE_ERROR
    assert "4x the most the run carried" in u.outside[0]
    # the same load over 4 replicas is what one replica carried: inside again
    assert for_phase(_profile(), BASE_ERROR, 1.0, [], users=32, rps=16.0, replicas=4, prompt_p95=1400).inside


def test_a_cap_far_from_the_fitted_one_and_an_unidentified_key_are_named() -> None:
    factor, reasons = changes_outside(_profile(), {"max_num_seqs": 64, "max_model_len": 2048})
    assert factor > 2
    assert any("max_num_seqs 8 -> 64" in r for r in reasons)
    assert any("max_model_len was not identified" in r for r in reasons)
    assert changes_outside(_profile(), {"replicas": 3}) == (1.0, [])


def test_the_written_profile_is_one_the_simulator_accepts(tmp_path: Path) -> None:
    profile = _profile()
    toml, _ = profile.write(tmp_path)
    config = build_config(str(toml), {})
    assert (config.max_num_seqs, config.num_gpu_blocks, config.step_overhead_ms) == (8, 256, 12.0)
    assert TwinProfile.from_dict(asdict(profile)) == profile


def test_the_workload_replays_the_runs_load_options() -> None:
    manifest = {
        "time_scale": 5.0,
        "options": {
            "locustfile": "/x/locustfiles/single_shot.py,/x/locustfiles/shape.py",
            "shape": "stepped",
            "step_start_users": 2,
            "step_stop_on_slo": True,
            "event_interval": 1.0,
            "ignore_eos": True,
            "host": "http://127.0.0.1:1",
            "prompt_tokens": None,
            "seed": 11,
        },
    }
    load = workload.of_manifest(manifest)
    unseeded = workload.of_manifest({"options": {**manifest["options"], "seed": 0}})["locust_args"]
    assert (load["scenario"], load["shape"], load["time_scale"]) == ("single", "stepped", 5.0)
    args = load["locust_args"]
    assert "--ignore-eos" in args and "--host" not in args and "--prompt-tokens" not in args
    assert args[args.index("--step-start-users") + 1] == "2" and "--step-stop-on-slo" not in args
    assert args[args.index("--seed") + 1] == "11" and "--seed" not in unseeded  # 0 is random: not replayed


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["twin", "fit", str(tmp_path / "missing")]) == 2
    assert main(["twin", "predict", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("loadline twin: error:") for line in err)


def test_plan_with_a_folder_that_holds_no_twin_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["plan", "--target-qps", "10", "--twin", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no twin at" in err[0]
