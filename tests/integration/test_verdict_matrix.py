"""The scenario matrix (tests/verdict_matrix.py): every variant names its layer with its defining
evidence, the same scenario judged three times gives the same verdict, and a failed SLO is never
answered with headroom."""

from __future__ import annotations

from collections import defaultdict

import metric_scenarios as ms
import pytest
import verdict_matrix as vm

from loadline.analysis.data.load import load_run
from loadline.analysis.data.timescale import model_run
from loadline.analysis.stats.phases import phase_table
from loadline.analysis.verdict.bottleneck import judge
from loadline.analysis.verdict.context import build_context


def verdict_of(v: vm.Variant, tmp_path, slo_failures=None, builder=None) -> dict:
    sc = vm.scenario(v, builder)
    run = load_run(ms.write_scenario(sc, tmp_path / v.id, vm.server_table(v, sc), one_phase=v.shape == "fixed"))
    return judge(run, phase_table(run), slo_failures=slo_failures)


def test_the_matrix_covers_every_layer_three_ways():
    by_layer = defaultdict(list)
    for v in vm.VARIANTS:
        by_layer[v.layer].append(v)
    assert set(by_layer) == set(vm.BUILDERS)
    for layer, variants in by_layer.items():
        assert len(variants) >= 3, layer
        for axis in ("profile", "user_class", "shape", "param"):
            assert len({getattr(v, axis) for v in variants}) >= 2, (layer, axis)
    assert {v.profile for v in vm.VARIANTS} == set(vm.PROFILES)


@pytest.mark.parametrize("variant", vm.VARIANTS, ids=lambda v: v.id)
def test_each_variant_names_its_layer_with_its_defining_evidence(variant, tmp_path):
    verdict = verdict_of(variant, tmp_path)
    assert verdict["layer"] == variant.layer, verdict
    text = " ".join(verdict["evidence"])
    for words in vm.DEFINING[variant.layer]:
        assert words in text, (words, verdict["evidence"])
    assert verdict["confidence"] in ("medium", "high"), verdict
    assert verdict["sentence"] and verdict["actions"]
    if variant.layer != "headroom":
        assert verdict["limit"]["reached"] or variant.layer == "memory-leak", verdict
    if variant.shape == "fixed" and variant.layer in ("scheduler", "kv-cache"):
        assert verdict["window"]["kind"] == "slice"  # a one-phase run is judged on its own time windows


@pytest.mark.parametrize("variant", [v for v in vm.VARIANTS if v.shape == "fixed"][:3], ids=lambda v: v.id)
def test_the_same_scenario_three_times_gives_the_same_verdict(variant, tmp_path):
    seen = {
        (v["layer"], v["confidence"], v["window"]["label"])
        for v in (verdict_of(variant, tmp_path / str(i)) for i in range(3))
    }
    assert len(seen) == 1, seen


def test_a_failed_slo_is_never_headroom(tmp_path):
    """A healthy-looking engine with a failed SLO criterion: the verdict says no layer explains it."""
    variant = vm.VARIANTS[[v.layer for v in vm.VARIANTS].index("headroom")]
    failure = {"name": "TTFT P95", "measured": 900.0, "threshold": "< 800 ms", "where": "step-5 (8 users)"}
    verdict = verdict_of(variant, tmp_path, slo_failures=[failure])
    assert verdict["layer"] != "headroom"
    assert verdict["limit"]["reached"]
    assert any("SLO criterion failed: TTFT P95" in line for line in verdict["evidence"])
    assert "limit" in verdict["sentence"].lower() or verdict["layer"] == "unidentified"


def test_the_issue_stepped_chat_case_reads_the_clearest_window(tmp_path):
    """h100, chat users, low max_num_seqs: the verdict is read where the queue is, not averaged from the first step."""
    verdict = verdict_of(vm.Variant("scheduler", "h100-llama3-8b", "chat", "stepped", 0.5), tmp_path)
    assert verdict["layer"] == "scheduler" and verdict["confidence"] == "high", verdict
    assert verdict["window"]["label"].startswith("step-5"), verdict["window"]


def test_a_kv_pool_filled_by_queued_long_prompts_is_not_a_leak(tmp_path):
    """A stepped run whose KV floor rises with the steps because more long contexts queue; no leak."""
    verdict = verdict_of(vm.Variant("kv-cache", "tiny", "single", "stepped", 1.0), tmp_path)
    assert verdict["layer"] == "kv-cache"
    assert "memory-leak" not in [s["layer"] for s in verdict["secondary"]]


def test_a_web_ui_run_whose_users_changed_mid_phase_is_judged_on_time_windows(tmp_path):
    """One phase whose user count was raised by hand from 2 to 32 (users_start != users_end): the
    verdict reads the time window where the queue is, not the phase's average."""
    import pandas as pd

    from loadline.core import runfolder

    variant = vm.Variant("scheduler", "tiny", "single", "stepped", 1.0)
    sc = vm.scenario(variant)
    run_dir = ms.write_scenario(sc, tmp_path / "webui", vm.server_table(variant, sc), one_phase=True)
    phases = pd.read_csv(run_dir / runfolder.PHASES)
    phases.loc[0, ["users_start", "users_end", "kind", "label"]] = [2, 32, "webui", "web UI"]
    phases.to_csv(run_dir / runfolder.PHASES, index=False)
    run = load_run(run_dir)
    verdict = judge(run, phase_table(run))
    assert verdict["layer"] == "scheduler", verdict
    assert verdict["window"]["kind"] == "slice"


def test_confidence_follows_the_margin_of_the_weakest_signal(tmp_path):
    """The same scheduler limit with the queue seen in 6 of 10 scrapes instead of all: just past the
    50 % threshold, so the verdict holds with less confidence and a smaller margin."""
    clear = vm.Variant("scheduler", "tiny", "single", "stepped", 1.0)
    sc = vm.scenario(clear)
    for phase in sc.phases:
        if phase.waiting:
            phase.waiting_duty = 0.6
    run = load_run(ms.write_scenario(sc, tmp_path / "borderline", vm.server_table(clear, sc)))
    borderline = judge(run, phase_table(run))
    sure = verdict_of(clear, tmp_path)
    assert borderline["layer"] == sure["layer"] == "scheduler"
    assert borderline["margin"] < sure["margin"]
    # 60 % of scrapes against 50 %: the room left (40 %) is 25 % inside the threshold's (50 %): medium
    assert (borderline["confidence"], sure["confidence"]) == ("medium", "high"), (
        borderline["evidence"],
        sure["evidence"],
    )


def test_a_slow_moment_at_fixed_load_is_not_a_limit(tmp_path):
    """A no-shape run (its phase records no user count): one time slice 3x slower at the same load is
    a transient, not a capacity limit; the users come from the generator's samples."""
    import pandas as pd

    from loadline.core import runfolder

    variant = vm.Variant("headroom", "h100-llama3-8b", "single", "fixed", 0.5)
    sc = vm.scenario(variant)
    sc.phases = [sc.phases[-1]] * 6  # the same users throughout, no ramp
    run_dir = ms.write_scenario(sc, tmp_path / "noshape", vm.server_table(variant, sc), one_phase=True)
    phases = pd.read_csv(run_dir / runfolder.PHASES)
    phases.loc[0, ["target_users", "users_start", "users_end"]] = [float("nan")] * 3
    phases.to_csv(run_dir / runfolder.PHASES, index=False)
    requests = pd.read_csv(run_dir / runfolder.REQUESTS)
    hiccup = (requests["start_wall"] >= ms.T0 + 30) & (requests["start_wall"] < ms.T0 + 40)
    requests.loc[hiccup, "ttft_ms"] *= 3
    requests.to_csv(run_dir / runfolder.REQUESTS, index=False)
    run = load_run(run_dir)
    verdict = judge(run, phase_table(run))
    assert verdict["layer"] == "headroom", verdict


@pytest.mark.parametrize("variant", vm.COMBINED, ids=lambda v: v.id)
def test_a_pinned_cap_with_rising_per_token_time_names_the_cap_then_compute(variant, tmp_path):
    """Slots/max_num_seqs pinned, requests waiting, queue time dominating TTFT, and per-token time
    rising with the batch: the cap leads (with the engine's own gauge names), gpu-compute is
    secondary, and neither the sentence nor the first action tells the on-call person to raise the cap."""
    verdict = verdict_of(variant, tmp_path, builder=vm.capped_compute)
    assert verdict["layer"] == "scheduler", verdict["evidence"]
    assert "gpu-compute" in [s["layer"] for s in verdict["secondary"]], verdict["secondary"]
    text = " ".join(verdict["evidence"])
    for words in (*vm.DEFINING["scheduler"], "per-token time also rises with the batch"):
        assert words in text, (words, verdict["evidence"])
    running, waiting = (
        ("llamacpp:requests_processing", "llamacpp:requests_deferred")
        if variant.dialect == "llamacpp"
        else ("vllm:num_requests_running", "vllm:num_requests_waiting")
    )
    assert running in verdict["sentence"] and waiting in verdict["sentence"], verdict["sentence"]
    assert "raising the cap alone will not help" in verdict["sentence"], verdict["sentence"]
    assert verdict["actions"][0].startswith("do not raise the cap alone"), verdict["actions"]


def test_jittery_small_slices_of_a_healthy_run_are_headroom(tmp_path):
    """1 then 2 users pausing between requests (~10 requests per time slice), one slice slow for most
    of its requests (a busy machine): its median is 3.5x the quietest slice's, but from so few
    values that is sampling noise, not a limit (real llama-server run, E2E p50 265 vs 74 ms)."""
    import pandas as pd

    from loadline.core import runfolder

    sc = ms.Scenario(
        "paced",
        [
            ms.Phase(1, rps=1.5, ttft_ms=40.0, tpot_ms=0.6, running=0.1, gpu=0.1, kv=0.01),
            ms.Phase(2, rps=3.0, ttft_ms=40.0, tpot_ms=0.6, running=0.2, gpu=0.1, kv=0.01),
        ],
    )
    run_dir = ms.write_scenario(sc, tmp_path / "paced")
    requests = pd.read_csv(run_dir / runfolder.REQUESTS)
    last = requests.index[requests["start_wall"] >= ms.T0 + 16.7]  # the last slice: 10 requests at 2 users
    slow = [i for n, i in enumerate(last) if n % 3 != 2]  # two in three of them
    for column in ("ttft_ms", "e2e_ms"):
        requests.loc[slow, column] *= 3.5
    requests.to_csv(run_dir / runfolder.REQUESTS, index=False)
    run = load_run(run_dir)
    verdict = judge(run, phase_table(run))
    assert verdict["layer"] == "headroom", (verdict["evidence"], verdict["limit"])


@pytest.mark.parametrize("scale", [5.0, 20.0])
def test_a_time_slice_is_named_in_model_time_as_the_charts_draw_it(tmp_path, scale):
    """A demo at x5 said "kv-cache in t+130..157 s" while its charts put that load at 650-785 s."""
    variant = next(v for v in vm.VARIANTS if v.shape == "fixed" and v.layer == "scheduler")
    sc = vm.scenario(variant)
    run = load_run(ms.write_scenario(sc, tmp_path / "run", vm.server_table(variant, sc), one_phase=True))
    labels = {}
    for s in (1.0, scale):
        run.manifest = {
            **(run.manifest or {}),
            "options": {**((run.manifest or {}).get("options") or {}), "time_scale": s},
        }
        model = model_run(run)  # as the report reads it
        labels[s] = [w.label for w in build_context(model, phase_table(model)).windows if w.kind == "slice"]
    assert len(labels[1.0]) >= 2 and len(labels[scale]) == len(labels[1.0]), labels
    for wall, model in zip(labels[1.0], labels[scale]):
        (a, b), (c, d) = (tuple(int(x) for x in label[2:-2].split("..")) for label in (wall, model))
        assert abs(c - a * scale) <= scale and abs(d - b * scale) <= scale, (wall, model)
