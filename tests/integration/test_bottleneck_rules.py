"""The verdict rules on constructed runs: each bottleneck names its layer, a healthy run has headroom.

Scenarios (tests/layer_scenarios.py, built with tests/metric_scenarios.py) are written as real run folders and read back with
analysis.data.load, so the rules see exactly what a report would give them.
"""

from __future__ import annotations

import dataclasses

import layer_scenarios as layers
import metric_scenarios as ms
import pandas as pd
import pytest

from loadline.analysis.data.load import load_run
from loadline.analysis.data.timescale import model_run
from loadline.analysis.stats.phases import phase_table
from loadline.analysis.verdict.bottleneck import LAYERS, judge

CASES = {
    "healthy": "headroom",
    "gpu_compute": "gpu-compute",
    "kv_cache": "kv-cache",
    "scheduler": "scheduler",
    "gateway": "gateway",
    "outside_engine": "outside-engine",
    "host_cpu": "host-cpu",
    "load_generator": "load-generator",
    "starved_generator": "load-generator",
    "memory_leak": "memory-leak",
}


def verdict_of(scenario: ms.Scenario, tmp_path, server: pd.DataFrame | None = None) -> dict:
    run = model_run(load_run(ms.write_scenario(scenario, tmp_path / scenario.name, server)))  # as the report reads it
    return judge(run, phase_table(run))


@pytest.mark.parametrize("name,layer", CASES.items())
def test_each_constructed_bottleneck_names_its_layer(name, layer, tmp_path):
    verdict = verdict_of(getattr(layers, name)(), tmp_path)
    assert verdict["layer"] == layer, verdict
    assert verdict["confidence"] == "high"
    assert verdict["evidence"] and verdict["actions"]
    assert verdict["layer"] in LAYERS


@pytest.mark.parametrize("factor", [0.4, 3.0])
@pytest.mark.parametrize("name,layer", CASES.items())
def test_other_magnitudes_give_the_same_verdict(name, layer, factor, tmp_path):
    """Rates and latencies scaled up or down: the rules compare shapes, not the test's numbers."""
    verdict = verdict_of(ms.vary(getattr(layers, name)(), factor), tmp_path)
    assert verdict["layer"] == layer, verdict


def test_evidence_carries_the_numbers(tmp_path):
    verdict = verdict_of(layers.kv_cache(), tmp_path)
    text = " ".join(verdict["evidence"])
    assert "KV-cache usage p90 99 %" in text
    assert "preemptions" in text
    assert verdict["limit"]["reached"] and verdict["limit"]["phase"] == "step-4 (8 users)"


def test_missing_signals_are_listed_not_guessed(tmp_path):
    """Without GPU, node or engine metrics the verdict says which layers it could not judge."""
    sc = layers.scheduler()
    server = ms.server_rows(sc)
    server = server[server["source"] != "dcgm"]
    verdict = verdict_of(sc, tmp_path, server)
    assert verdict["layer"] == "scheduler"
    joined = " ".join(verdict["not_judged"])
    assert "host-cpu" in joined  # gpu-compute is judged from per-token time; the GPU gauge only supports it
    empty = server.iloc[0:0]
    verdict = verdict_of(layers.healthy(), tmp_path, empty)
    assert verdict["layer"] == "headroom"
    assert {"kv-cache", "scheduler", "memory-leak"} <= {line.split()[0] for line in verdict["not_judged"]}


def test_limit_without_any_server_signal_is_low_confidence(tmp_path):
    sc = layers.gpu_compute()
    verdict = verdict_of(sc, tmp_path, ms.server_rows(sc).iloc[0:0])
    assert verdict["limit"]["reached"]
    assert verdict["confidence"] == "low"
    assert verdict["layer"] != "headroom"


def test_secondary_findings_are_kept(tmp_path):
    """A starved generator cannot fake what the engine's own metrics prove (a full, preempting pool):
    that layer stands, the generator is kept as secondary; a layer seen only in client timings does not."""
    sc = layers.kv_cache()
    for phase in sc.phases[3:]:
        phase.gen_cpu = 99.0
    verdict = verdict_of(sc, tmp_path)
    assert verdict["layer"] == "kv-cache"
    assert "load-generator" in [s["layer"] for s in verdict["secondary"]]
    assert any("load generator was saturated" in line for line in verdict["evidence"])
    sc = layers.outside_engine()
    for phase in sc.phases[3:]:
        phase.gen_cpu = 99.0
    verdict = verdict_of(sc, tmp_path / "client-side")
    assert verdict["layer"] == "load-generator"
    assert "outside-engine" in [s["layer"] for s in verdict["secondary"]]


@pytest.mark.parametrize("wait, named", [(34.0, True), (20.0, False)])
def test_a_generator_starved_by_a_neighbour_is_named_only_when_it_waited_for_its_core(wait, named, tmp_path):
    """Its CPU stays at its share of the core (62 %): the wait for the core decides (saturation.py)."""
    sc = layers.starved_generator()
    for phase in sc.phases[3:]:
        phase.gen_wait = wait
    verdict = verdict_of(sc, tmp_path)
    assert (verdict["layer"] == "load-generator") == named, verdict
    if named:
        assert any("waiting for a core a neighbour held" in line for line in verdict["evidence"])
    sc = layers.kv_cache()  # what the engine's own metrics prove stands, starved generator or not
    for phase in sc.phases[3:]:
        phase.gen_cpu, phase.gen_wait = 62.0, wait
    verdict = verdict_of(sc, tmp_path / "kv")
    assert verdict["layer"] == "kv-cache" and ("load-generator" in [s["layer"] for s in verdict["secondary"]]) == named


# Where the engine ran: a remote host, or the generator's own (loopback targets only reach that one)
REMOTE = ["http://10.0.0.5:8000", "https://inference.example.com/v1", None]
LOCAL = ["http://127.0.0.1:8000", "http://localhost:8080/v1", "http://[::1]:9000"]


@pytest.mark.parametrize("target", REMOTE + LOCAL)
@pytest.mark.parametrize("name", ["gpu_compute", "host_cpu"])
def test_a_saturated_generator_on_the_engines_host_outranks_what_the_hosts_time_proves(name, target, tmp_path):
    """Per-token time (gpu-compute) and host CPU (host-cpu) are the engine's own metrics: a starved
    generator on another host cannot fake them. On the engine's host a starved generator is a
    starved host, which stretches the engine's steps and fills the host's CPU: the generator leads."""
    sc = getattr(layers, name)()
    for phase in sc.phases[2:]:
        phase.gen_cpu = 99.0
    if target:
        sc.manifest["target"] = target
    verdict = verdict_of(sc, tmp_path)
    layer = name.replace("_", "-")
    if target in LOCAL:
        assert verdict["layer"] == "load-generator", verdict
        assert layer in [s["layer"] for s in verdict["secondary"]]
        assert any(line.startswith(f"not counted against it: {layer}") for line in verdict["evidence"]), verdict
    else:
        assert verdict["layer"] == layer, verdict
        assert "load-generator" in [s["layer"] for s in verdict["secondary"]]


@pytest.mark.parametrize("on_this_host,leads", [(True, "load-generator"), (False, None), (None, None)])
@pytest.mark.parametrize("name", ["gpu_compute", "host_cpu"])
def test_a_target_the_run_found_on_its_own_machine_counts_as_the_engines_host(name, on_this_host, leads, tmp_path):
    """A server bound to all interfaces, reached by the machine's own address: the run recorded
    that it was local (target_on_this_host), so its starved generator leads as on a loopback target."""
    sc = getattr(layers, name)()
    for phase in sc.phases[2:]:
        phase.gen_cpu = 99.0
    sc.manifest.update(target="http://192.168.7.20:8080/v1", target_on_this_host=on_this_host)
    verdict = verdict_of(sc, tmp_path)
    assert verdict["layer"] == (leads or name.replace("_", "-")), verdict


@pytest.mark.parametrize("target", LOCAL[:2])
@pytest.mark.parametrize("name", ["kv_cache", "scheduler"])
def test_counts_stand_over_a_saturated_generator_on_the_engines_host(name, target, tmp_path):
    """A full pool or a pinned batch cap with a queue are counts, not times: a busy host cannot fake them."""
    sc = getattr(layers, name)()
    for phase in sc.phases[2:]:
        phase.gen_cpu = 99.0
    sc.manifest["target"] = target
    verdict = verdict_of(sc, tmp_path)
    assert verdict["layer"] == name.replace("_", "-"), verdict
    assert "load-generator" in [s["layer"] for s in verdict["secondary"]]


def test_idle_gpu_under_a_flat_throughput_is_called_out(tmp_path):
    sc = layers.host_cpu()
    verdict = verdict_of(sc, tmp_path)
    assert any("not the GPU" in line for line in verdict["evidence"])


def test_kv_pinned_without_pressure_is_not_a_kv_verdict(tmp_path):
    """A full cache that evicts nothing and queues nothing, with flat latency, is not a bottleneck."""
    sc = layers.healthy()
    sc.phases[-1] = dataclasses.replace(sc.phases[-1], kv=0.95)
    assert verdict_of(sc, tmp_path)["layer"] == "headroom"


def test_scaled_simulator_runs_shrink_the_noise_floor(tmp_path):
    """With --time-scale 50 every latency is 50x smaller; the verdict must not change."""
    sc = layers.scheduler()
    sc.phases = [
        dataclasses.replace(p, ttft_ms=p.ttft_ms / 50, queue_ms=p.queue_ms / 50, prefill_ms=p.prefill_ms / 50)
        for p in sc.phases
    ]
    sc.manifest = {"time_scale": 50}
    assert verdict_of(sc, tmp_path)["layer"] == "scheduler"
    sc.manifest = {}
    # unscaled, a 10-30 ms queue is below the noise floor: the engine queues, but no layer is proven
    verdict = verdict_of(sc, tmp_path)
    assert verdict["confidence"] == "low" and verdict["layer"] != "headroom", verdict


def test_a_pool_that_preempts_at_its_peak_is_kv_bound_even_below_the_pinned_p90(tmp_path):
    # usage climbs from 70 % to 92 % in each loaded phase (p90 just under 90 %), with preemptions
    sc = layers.kv_cache()
    sc.phases[-2:] = [dataclasses.replace(p, kv=0.70, kv_end=0.92) for p in sc.phases[-2:]]
    verdict = verdict_of(sc, tmp_path)
    assert verdict["layer"] == "kv-cache", verdict
    assert "max 92 %" in " ".join(verdict["evidence"])


def _compute_bound_with_a_queue(gpu: float) -> ms.Scenario:
    """Per-token time rising 5x with the batch, a queue half the time with queue time dominating TTFT,
    but no cap pinned (running p50 14 of the 16 seen): the GPU gauge at `gpu` in the loaded phases."""
    sc = layers.gpu_compute()
    sc.phases[-2:] = [
        dataclasses.replace(p, gpu=gpu, waiting=2, waiting_duty=0.5, queue_ms=0.75 * p.ttft_ms) for p in sc.phases[-2:]
    ]
    return sc


@pytest.mark.parametrize("gpu", [0.70, 0.88, 0.93])
@pytest.mark.parametrize("factor", [1.0, 0.4, 3.0])
def test_a_busy_gpu_short_of_pinned_still_names_compute_at_medium_confidence(gpu, factor, tmp_path):
    """DOMAIN.md rule 1 confirms compute saturation at >= 95 % GPU utilisation, rule 2 rules the GPU
    out at 40-50 %. Between them the per-token rise decides, capped at medium. CI once read a
    saturated simulator at 88-94 % (a busy host) and named the scheduler, whose cap was not pinned."""
    verdict = verdict_of(ms.vary(_compute_bound_with_a_queue(gpu), factor), tmp_path)
    assert verdict["layer"] == "gpu-compute" and verdict["confidence"] == "medium", verdict
    assert any(
        f"GPU utilisation p50 {gpu * 100:.0f} %: busy, but short of the 95 %" in line for line in verdict["evidence"]
    ), verdict["evidence"]


@pytest.mark.parametrize("gpu", [0.30, 0.50])
def test_an_idle_gpu_rules_compute_out_whatever_per_token_time_does(gpu, tmp_path):
    verdict = verdict_of(_compute_bound_with_a_queue(gpu), tmp_path)
    assert verdict["layer"] != "gpu-compute", verdict
    assert any("not the GPU" in line for line in verdict["evidence"]), verdict["evidence"]


def _slo_failed_in(sc: ms.Scenario, position: int, tmp_path, server: pd.DataFrame | None = None) -> dict:
    run = load_run(ms.write_scenario(sc, tmp_path / sc.name, server))
    where = f"{sc.kind}-{position + 1} ({sc.phases[position].users} users)"
    failure = {"name": "TTFT P95", "measured": 1047.0, "threshold": "<= 800 ms", "unit": "ms", "where": where}
    return judge(run, phase_table(run), slo_failures=[failure])


@pytest.mark.parametrize("factor", [1.0, 0.4, 3.0])
def test_an_slo_failed_at_the_lightest_load_is_each_requests_own_latency(factor, tmp_path):
    """A TTFT SLO that fails at 1 user (a large model's prefill against an 800 ms SLO): nothing contends,
    so no capacity layer explains it. The verdict says so with the engine's own split of that window,
    and does not ask to scrape what was scraped (it once did, on the a100 profile at x20)."""
    verdict = _slo_failed_in(ms.vary(layers.healthy(), factor), 0, tmp_path)
    assert verdict["layer"] == "unidentified", verdict
    line = next(e for e in verdict["evidence"] if e.startswith("the SLO failed already at the lightest load"))
    assert "(step-1 (1 users), 1 user)" in line and "= outside the engine" in line and "prefill" in line, line
    assert verdict["actions"][0].startswith("compare one request's latency with the SLO")
    assert (
        "scrape node_exporter during the run (`loadline run -- --scrape-url URL`)" in verdict["actions"]
    )  # the one exporter missing


def test_an_slo_failed_under_load_is_not_called_the_lightest_load(tmp_path):
    verdict = _slo_failed_in(layers.healthy(), 4, tmp_path)
    assert not any("lightest load" in e for e in verdict["evidence"]), verdict["evidence"]


def test_without_engine_metrics_the_lightest_load_is_said_and_the_missing_scrapes_named(tmp_path):
    sc = layers.healthy()
    server = ms.server_rows(sc)
    verdict = _slo_failed_in(sc, 0, tmp_path, server[server["source"] == "dcgm"])
    line = next(e for e in verdict["evidence"] if "lightest load" in e)
    assert "client TTFT mean" not in line  # no engine histograms: no split
    assert (
        "scrape the engine's /metrics, node_exporter during the run (`loadline run -- --scrape-url URL`)"
        in verdict["actions"]
    )


@pytest.mark.parametrize("duty", [0.2, 0.3])
@pytest.mark.parametrize("factor", [1.0, 0.4, 3.0])
def test_no_rule_fired_the_closest_is_the_one_whose_defining_signals_held_most(duty, factor, tmp_path):
    """A batch cap of 4 that the traffic hits only part of the time (completion users at 10): queue time
    dominates TTFT, but running p50 is 3 of 4 and requests wait in under half the scrapes, so the
    scheduler rule does not fire. gpu-compute held more of its signals (a busy GPU, the batch grew,
    KV has room) but not its defining one: per-token time stayed flat. It was named, low, on a new
    user's `--scenario completion --sim-option max_num_seqs=4` run; the scheduler is the closest."""
    sc = layers.scheduler()
    sc.phases[-2:] = [dataclasses.replace(p, waiting_duty=duty) for p in sc.phases[-2:]]
    verdict = verdict_of(ms.vary(sc, factor), tmp_path)
    assert verdict["layer"] == "scheduler" and verdict["confidence"] == "low", verdict
    assert any("closest match" in line for line in verdict["evidence"]), verdict["evidence"]


def _aborting_engine(share: float, queue_ms: float) -> ms.Scenario:
    """An engine that aborts `share` of its streams at every load, calm otherwise, its queue time above
    the noise floor but far from dominating TTFT: the scheduler rule's near miss of a real run (a100
    profile, error_rate=0.05, 4 users) that named 'scheduler'."""
    sc = layers.healthy()
    for p in sc.phases:
        p.fail_stream, p.queue_ms, p.ttft_ms = share, queue_ms, 50 + queue_ms
    return sc


def _error_rate_failed(sc: ms.Scenario, tmp_path, extra: tuple[dict, ...] = ()) -> dict:
    run = load_run(ms.write_scenario(sc, tmp_path / sc.name))
    where = f"{sc.kind}-2 ({sc.phases[1].users} users)"
    failure = {
        "name": "error rate",
        "measured": 0.05,
        "limit": 0.0,
        "threshold": "<= 0.00%",
        "unit": "fraction",
        "where": where,
    }
    return judge(run, phase_table(run), slo_failures=[failure, *extra])


@pytest.mark.parametrize("share, queue_ms", [(0.05, 80.0), (0.2, 120.0), (0.1, 300.0)])
@pytest.mark.parametrize("factor", [1.0, 0.4, 3.0])
def test_failures_alone_with_a_calm_engine_name_no_layer_from_a_near_miss(share, queue_ms, factor, tmp_path):
    verdict = _error_rate_failed(ms.vary(_aborting_engine(share, queue_ms), factor), tmp_path)
    assert verdict["layer"] == "unidentified" and verdict["confidence"] == "low", verdict
    assert not any("closest match" in line for line in verdict["evidence"]), verdict["evidence"]
    mix = next(line for line in verdict["evidence"] if line.startswith("the failures:"))
    assert "stream_error" in mix and "the engine aborted generation" in mix
    assert "read the server's log for the aborted requests" in verdict["actions"]


@pytest.mark.parametrize("factor", [1.0, 0.4, 3.0])
def test_failures_beside_a_latency_failure_keep_the_closest_latency_layer(factor, tmp_path):
    """The same near miss once a latency criterion failed too: the latency is what the window rules
    explain, so the closest one is still said (low, as a near miss)."""
    sc = layers.scheduler()
    sc.phases[-2:] = [dataclasses.replace(p, waiting_duty=0.2, fail_stream=0.05) for p in sc.phases[-2:]]
    ttft = {
        "name": "TTFT P95",
        "measured": 1047.0,
        "threshold": "<= 800 ms",
        "unit": "ms",
        "where": f"step-5 ({sc.phases[-1].users} users)",
    }
    verdict = _error_rate_failed(ms.vary(sc, factor), tmp_path, (ttft,))
    assert verdict["layer"] == "scheduler" and verdict["confidence"] == "low", verdict
    assert any("closest match" in line for line in verdict["evidence"]), verdict["evidence"]


def test_failures_with_requests_waiting_at_the_engine_are_judged_by_the_rules(tmp_path):
    """Failures while the engine's queue is full (a capped queue answering errors) come with the
    engine's own saturation: the window rules judge them as before."""
    sc = layers.scheduler()
    for p in sc.phases[-2:]:
        p.fail_stream = 0.05
    verdict = _error_rate_failed(sc, tmp_path)
    assert verdict["layer"] == "scheduler", verdict


@pytest.mark.parametrize("queue_ms", [80.0, 150.0])
@pytest.mark.parametrize("factor", [1.0, 0.4, 3.0])
def test_a_near_miss_needs_half_its_defining_signals(queue_ms, factor, tmp_path):
    """A latency SLO failed at the top step while the engine's cap was never reached and nothing
    waited: queue time above the noise floor is the only scheduler signal that held (one of four), as
    on an a100 70B pulse that was named 'scheduler' from it. No layer is named from that."""
    sc = layers.healthy()
    for p in sc.phases:
        p.queue_ms, p.ttft_ms = queue_ms, 400.0 + queue_ms
    sc.phases[-2].running, sc.phases[-1].running = 12, 6  # the failing step ran half the largest batch seen
    verdict = _slo_failed_in(ms.vary(sc, factor), len(sc.phases) - 1, tmp_path)
    assert verdict["layer"] == "unidentified", verdict
    assert not any("closest match" in line for line in verdict["evidence"]), verdict["evidence"]


# A pool is full for its requests once the room left cannot hold one more of them (median prompt +
# reply): long chats in a small pool preempt with usage sampled well below 90 % (seen: 1,000-2,000-token
# prompts in 160 blocks of 16, preempting at a sampled p90 84 %, max 86 %).
# (blocks, block size, prompt tokens, usage from, usage to): full above 1 - (prompt + 100) / pool
POOLS_FULL_FOR_THEIR_REQUESTS = [
    (160, 16, 1500, 0.70, 0.86),  # 1 - 1600 / 2560 = 38 %: full above half
    (500, 16, 2400, 0.55, 0.75),  # full above 69 %
    (256, 32, 4000, 0.45, 0.60),  # full above 50 %
]


@pytest.mark.parametrize("blocks,size,prompt,kv,kv_end", POOLS_FULL_FOR_THEIR_REQUESTS)
@pytest.mark.parametrize("base", ["kv_cache", "scheduler"])
def test_a_pool_too_small_for_its_requests_is_kv_bound_below_the_fixed_level(
    base, blocks, size, prompt, kv, kv_end, tmp_path
):
    """Preemptions with the pool full for these requests: the pool, whatever queue the batch shows."""
    sc = getattr(layers, base)()
    sc.kv_pool = (blocks, size)
    sc.phases = [dataclasses.replace(p, prompt_tokens=prompt) for p in sc.phases]
    sc.phases[-2:] = [dataclasses.replace(p, kv=kv, kv_end=kv_end, preempt_per_s=1.5) for p in sc.phases[-2:]]
    verdict = verdict_of(sc, tmp_path)
    assert verdict["layer"] == "kv-cache", verdict
    full = round(max(1 - (prompt + 100) / (blocks * size), 0.5) * 100)  # never below half
    assert f"full above {full} %" in " ".join(verdict["evidence"]), verdict["evidence"]


@pytest.mark.parametrize("other_first", [False, True])
def test_with_replicas_the_smallest_pool_decides(other_first, tmp_path):
    """Two replicas' cache_config_info, in either order: the smaller pool is the one that fills."""
    sc = layers.kv_cache()
    small, large = (160, 16), (5000, 16)
    sc.kv_pool, sc.kv_pool_other = (large, small) if other_first else (small, large)
    sc.phases = [dataclasses.replace(p, prompt_tokens=1500) for p in sc.phases]
    sc.phases[-2:] = [dataclasses.replace(p, kv=0.70, kv_end=0.86) for p in sc.phases[-2:]]
    verdict = verdict_of(sc, tmp_path)
    assert verdict["layer"] == "kv-cache", verdict
    assert "2,560-token pool" in " ".join(verdict["evidence"])


def test_a_pool_with_no_request_waiting_or_evicted_keeps_the_fixed_level(tmp_path):
    """Long requests in a small pool, but nothing waits and nothing is preempted: room for one more is
    not what limits, and the compute verdict stands."""
    sc = layers.gpu_compute()
    sc.kv_pool = (500, 16)
    sc.phases = [dataclasses.replace(p, prompt_tokens=2400, kv=min(p.kv, 0.75)) for p in sc.phases]
    verdict = verdict_of(sc, tmp_path)
    assert verdict["layer"] == "gpu-compute", verdict
    assert "full above" not in " ".join(verdict["evidence"])


@pytest.mark.parametrize("blocks,size,prompt,kv,kv_end", POOLS_FULL_FOR_THEIR_REQUESTS)
def test_the_same_usage_with_room_for_the_requests_is_not_a_full_pool(blocks, size, prompt, kv, kv_end, tmp_path):
    """The same usage and preemptions, but requests small beside the pool: 90 % stands, and the batch
    cap the scheduler scenario pins stays the verdict."""
    del prompt  # the scenario's own 100-token prompts
    sc = layers.scheduler()
    sc.kv_pool = (blocks, size)
    sc.phases[-2:] = [dataclasses.replace(p, kv=kv, kv_end=kv_end, preempt_per_s=1.5) for p in sc.phases[-2:]]
    verdict = verdict_of(sc, tmp_path)
    assert verdict["layer"] == "scheduler", verdict
    assert "full above" not in " ".join(verdict["evidence"])


@pytest.mark.parametrize("blocks,size,prompt,kv,kv_end", POOLS_FULL_FOR_THEIR_REQUESTS)
def test_a_prefix_the_cache_already_held_takes_no_room(blocks, size, prompt, kv, kv_end, tmp_path):
    """Long prompts that share a cached prefix (a system prompt) need blocks only for the rest."""
    sc = layers.scheduler()
    sc.kv_pool = (blocks, size)
    sc.phases = [dataclasses.replace(p, prompt_tokens=prompt, cached_tokens=prompt - 50) for p in sc.phases]
    sc.phases[-2:] = [dataclasses.replace(p, kv=kv, kv_end=kv_end, preempt_per_s=1.5) for p in sc.phases[-2:]]
    verdict = verdict_of(sc, tmp_path)
    assert verdict["layer"] == "scheduler", verdict
    assert "full above" not in " ".join(verdict["evidence"])


def test_without_the_pool_size_the_fixed_level_stands(tmp_path):
    """No cache_config_info (SGLang, TGI, a Prometheus export): long requests alone prove nothing."""
    sc = layers.scheduler()
    sc.phases = [dataclasses.replace(p, prompt_tokens=1500) for p in sc.phases]
    sc.phases[-2:] = [dataclasses.replace(p, kv=0.70, kv_end=0.86, preempt_per_s=1.5) for p in sc.phases[-2:]]
    assert verdict_of(sc, tmp_path)["layer"] == "scheduler"
