"""The named constructed runs, one per bottleneck layer (and a healthy one), for the verdict tests.

Each is a stepped run of metric_scenarios.Phase phases (1..16 users) whose client table and server
metrics show one layer's defining signals and nothing else's; metric_scenarios.write_scenario
writes it as a run folder, metric_scenarios.vary moves it to other magnitudes.
"""

from __future__ import annotations

import dataclasses

from metric_scenarios import Phase, Scenario

USERS = (1, 2, 4, 8, 16)


def healthy() -> Scenario:
    return Scenario("healthy", [Phase(u, rps=2.0 * u, gpu=min(0.2 + 0.05 * u, 0.99), kv=0.02 * u) for u in USERS])


def gpu_compute() -> Scenario:
    # decode slows with the batch (TPOT x4), TTFT follows, throughput flattens; no queue, KV has room
    tp = {1: 10, 2: 12, 4: 18, 8: 30, 16: 55}
    return Scenario(
        "gpu-compute",
        [
            Phase(
                u,
                rps=min(2.0 * u, 9.0),
                ttft_ms=50 * tp[u] / 10,
                tpot_ms=tp[u],
                gpu=0.6 if u == 1 else 0.99,
                kv=0.03 * u,
            )
            for u in USERS
        ],
    )


def kv_cache() -> Scenario:
    kv = {1: 0.1, 2: 0.2, 4: 0.45, 8: 0.95, 16: 0.99}
    return Scenario(
        "kv-cache",
        [
            Phase(
                u,
                rps=min(2.0 * u, 9.0),
                ttft_ms=50 if u < 8 else 400 * u / 8,
                tpot_ms=10 if u < 8 else 14,
                running=min(u, 6),
                waiting=max(0, u - 6),
                queue_ms=2 if u < 8 else 300 * u / 8,
                kv=kv[u],
                gpu=0.99,
                preempt_per_s=0 if u < 8 else 1.5,
            )
            for u in USERS
        ],
    )


def scheduler() -> Scenario:
    cap = 4
    return Scenario(
        "scheduler",
        [
            Phase(
                u,
                rps=2.0 * min(u, cap),
                ttft_ms=50 if u <= cap else 50 + 500 * (u / cap - 1),
                running=min(u, cap),
                waiting=max(0, u - cap),
                queue_ms=2 if u <= cap else 500 * (u / cap - 1),
                prefill_ms=45,
                kv=0.05 * min(u, cap),
                gpu=0.99,
            )
            for u in USERS
        ],
    )


def gateway() -> Scenario:
    # 503s from a connection cap in front of the engine: errors while the engine stays calm
    return Scenario(
        "gateway",
        [
            Phase(
                u,
                rps=2.0 * min(u, 4),
                fail_503=0.0 if u <= 4 else 1 - 4 / u,
                running=min(u, 4),
                kv=0.02 * min(u, 4),
                gpu=0.6,
            )
            for u in USERS
        ],
    )


def outside_engine() -> Scenario:
    # the client waits far longer than the server says it took: time lost in front of the engine
    return Scenario(
        "outside-engine",
        [
            Phase(
                u, rps=min(2.0 * u, 10.0), ttft_ms=50 if u < 8 else 600 * u / 8, server_ttft_ms=45, gpu=0.7, kv=0.02 * u
            )
            for u in USERS
        ],
    )


def host_cpu() -> Scenario:
    return Scenario(
        "host-cpu",
        [
            Phase(
                u,
                rps=min(2.0 * u, 9.0),
                ttft_ms=50 if u < 8 else 300 * u / 8,
                tpot_ms=10 if u < 8 else 25,
                gpu=0.45,
                kv=0.02 * u,
                host_busy=0.3 if u < 8 else 0.97,
            )
            for u in USERS
        ],
    )


def load_generator() -> Scenario:
    sc = healthy()
    for p in sc.phases[3:]:
        p.gen_cpu, p.gen_lag_ms, p.ttft_ms = 99.0, 45.0, 200.0
    return dataclasses.replace(sc, name="load-generator")


def starved_generator() -> Scenario:
    """The generator on a shared machine: it gets ~60 % of a core and waits for it the rest of the time,
    its loop lag moderate (below the lag limit); the latencies it measures rise, the engine is calm."""
    sc = healthy()
    for p in sc.phases[3:]:
        p.gen_cpu, p.gen_wait, p.gen_lag_ms, p.ttft_ms = 62.0, 34.0, 9.0, 200.0
    return dataclasses.replace(sc, name="starved-generator")


def memory_leak() -> Scenario:
    # constant load; the KV floor climbs every window until the engine restarts out of memory
    phases = []
    for w in range(6):
        lo = 0.2 + 0.14 * (w % 4)
        phases.append(
            Phase(
                8,
                rps=12.0,
                ttft_ms=50 if w % 4 < 3 else 300,
                kv=lo,
                kv_end=lo + 0.14,
                running=8,
                gpu=0.9,
                restart_at_end=(w % 4 == 3),
            )
        )
    phases[3].kv_end = 0.97
    return Scenario("memory-leak", phases, kind="soak-window")
