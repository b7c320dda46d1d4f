"""The bottleneck scenario matrix: every layer in variants that differ in profile, user class, shape
and parameter values, built as run folders from first principles (tests/metric_scenarios.py).

Each builder derives what the client and the engine would show from a small queueing model, not
from the verdict's thresholds: a closed loop of `users` (chat users spend part of their time
thinking, so only `busy` of them are in the engine), a service time of TTFT + 99 tokens x ITL,
throughput = running / service time, and queue time from Little's law (waiting / throughput).
Profile magnitudes are the simulator profiles' single-stream figures (configs/sim/*.toml).
"""

from __future__ import annotations

from dataclasses import dataclass

import metric_scenarios as ms


@dataclass(frozen=True)
class Profile:
    name: str
    ttft_ms: float  # one stream, a few hundred prompt tokens
    itl_ms: float  # one stream
    cap: int  # a low max_num_seqs for the scheduler variants


PROFILES = {
    "tiny": Profile("tiny", 50.0, 20.0, 8),
    "h100-llama3-8b": Profile("h100-llama3-8b", 65.0, 10.0, 16),
    "a100-llama70b-tp4": Profile("a100-llama70b-tp4", 120.0, 28.0, 32),
}
USER_CLASSES = {
    "single": (1.0, 1.0),
    "chat": (0.6, 0.75),
}  # (share of users in the engine, share of scrapes with a queue)


@dataclass(frozen=True)
class Variant:
    layer: str
    profile: str
    user_class: str  # single | chat
    shape: str  # stepped | fixed
    param: float  # the layer's own knob (cap factor, per-token rise, KV slots, leak kind...)
    dialect: str = "vllm"

    @property
    def id(self) -> str:
        return f"{self.layer}-{self.profile}-{self.user_class}-{self.shape}-{self.param:g}-{self.dialect}"


def users_profile(peak: int, shape: str) -> list[int]:
    """Users over time: a stepped test doubles them; a fixed-user run ramps in, then holds."""
    if shape == "stepped":
        return [max(1, peak // 8), max(1, peak // 4), max(1, peak // 2), peak, peak * 2]
    return [max(1, peak // 4), max(1, peak // 2), peak, peak, peak, peak]


def _phase(p: Profile, u: int, running: float, waiting: float, itl: float, **kw) -> ms.Phase:
    service_s = (p.ttft_ms + itl * 99) / 1000
    rps = max(running, 0.5) / service_s
    queue_ms = waiting / rps * 1000 if waiting else 2.0
    ttft = kw.pop("ttft_ms", p.ttft_ms) + (queue_ms if waiting else 0)
    return ms.Phase(u, rps=rps, ttft_ms=ttft, tpot_ms=itl, running=running, waiting=waiting, queue_ms=queue_ms, **kw)


def scheduler(v: Variant) -> list[ms.Phase]:
    p = PROFILES[v.profile]
    cap = max(1, int(p.cap * v.param))
    busy, duty = USER_CLASSES[v.user_class]
    phases = []
    for u in users_profile(cap * 2 if v.shape == "stepped" else cap * 3, v.shape):
        inflight = u * busy
        running, waiting = min(inflight, cap), max(0.0, round(inflight - cap))
        itl = p.itl_ms * (1 + 0.1 * running / cap)  # per-token time barely moves: the batch is capped
        phases.append(
            _phase(
                p,
                u,
                running,
                waiting,
                itl,
                kv=0.04 + 0.3 * running / cap,
                gpu=0.5 + 0.49 * running / cap,
                waiting_duty=duty if waiting else 1.0,
            )
        )
    return phases


def capped_compute(v: Variant) -> list[ms.Phase]:
    """The cap pinned with requests waiting AND each token slower as the batch fills (llama.cpp's slots
    sharing one CPU thread; vLLM at max_num_seqs on a busy GPU): `param` = per-token rise at the cap."""
    p = PROFILES[v.profile]
    cap = p.cap
    busy, duty = USER_CLASSES[v.user_class]
    phases = []
    # a fixed-user run ramps in from a quarter of its users: at twice the cap, its lightest window
    # runs a small batch, so the rise with the batch is visible against it
    for u in users_profile(cap * 2, v.shape):
        inflight = u * busy
        running, waiting = min(inflight, cap), max(0.0, round(inflight - cap))
        itl = p.itl_ms * (1 + (v.param - 1) * running / cap)
        phases.append(
            _phase(
                p,
                u,
                running,
                waiting,
                itl,
                ttft_ms=p.ttft_ms * itl / p.itl_ms,
                kv=0.04 + 0.3 * running / cap,
                gpu=min(0.99, 0.5 + 0.49 * running / cap),
                waiting_duty=duty if waiting else 1.0,
            )
        )
    return phases


def gpu_compute(v: Variant) -> list[ms.Phase]:
    """No cap in reach, KV with room; each extra sequence costs the decode step; `param` = ITL rise at the top."""
    p = PROFILES[v.profile]
    busy, _ = USER_CLASSES[v.user_class]
    seq = users_profile(p.cap * 2, v.shape)
    top = max(seq) * busy
    phases = []
    for u in seq:
        running = u * busy
        itl = p.itl_ms * (1 + (v.param - 1) * (running - 1) / max(top - 1, 1))
        phases.append(
            _phase(
                p,
                u,
                running,
                0.0,
                itl,
                ttft_ms=p.ttft_ms * itl / p.itl_ms,
                kv=0.05 + 0.3 * running / top,
                gpu=min(0.99, 0.6 + 0.4 * running / top),
            )
        )
    return phases


def kv_cache(v: Variant) -> list[ms.Phase]:
    """The pool holds `param` long sequences (int part); preemptions per second = fractional part x 10."""
    p = PROFILES[v.profile]
    slots, preempt = int(v.param), round((v.param - int(v.param)) * 10, 3)
    busy, duty = USER_CLASSES[v.user_class]
    phases = []
    for u in users_profile(slots * 4, v.shape):
        inflight = u * busy
        running, waiting = min(inflight, slots), max(0.0, round(inflight - slots))
        full = inflight >= slots
        # queued long prompts fill the pool: the KV floor rises with load, running is held by the pool
        phases.append(
            _phase(
                p,
                u,
                running,
                waiting,
                p.itl_ms * 1.1,
                kv=min(0.99, 0.25 + 0.74 * inflight / slots),
                gpu=0.9,
                preempt_per_s=preempt if full else 0.0,
                waiting_duty=duty if waiting else 1.0,
            )
        )
    return phases


def memory_leak(v: Variant) -> list[ms.Phase]:
    """Constant load; param 1 = out-of-memory restart, 2 = floor rising without restart, 3 = residue at idle."""
    p = PROFILES[v.profile]
    busy, _ = USER_CLASSES[v.user_class]
    users = max(2, p.cap // 2)
    running = users * busy
    phases = []
    for w, u in enumerate(users_profile(users, "fixed") if v.shape == "fixed" else [users] * 6):
        lo = 0.2 + 0.12 * w
        phase = _phase(p, u, u * busy, 0.0, p.itl_ms, kv=lo, kv_end=lo + 0.1, gpu=0.8)
        phases.append(phase)
    if v.param == 1:
        phases[-2].kv_end, phases[-2].restart_at_end = 0.97, True
        phases[-1].kv, phases[-1].kv_end = 0.2, 0.25
    elif v.param == 3:
        for ph in phases:
            ph.kv, ph.kv_end = 0.1 * running / users, None
        phases.append(ms.Phase(users, rps=0.0, idle=True, kv=0.08, gpu=0.0))
    return phases


def healthy(v: Variant) -> list[ms.Phase]:
    p = PROFILES[v.profile]
    busy, _ = USER_CLASSES[v.user_class]
    phases = []
    for u in users_profile(max(2, int(p.cap * v.param)), v.shape):
        running = u * busy
        phases.append(
            _phase(
                p,
                u,
                running,
                0.0,
                p.itl_ms * (1 + 0.02 * running),
                kv=0.02 + 0.01 * running,
                gpu=min(0.9, 0.3 + 0.05 * running),
            )
        )
    return phases


BUILDERS = {
    "scheduler": scheduler,
    "gpu-compute": gpu_compute,
    "kv-cache": kv_cache,
    "memory-leak": memory_leak,
    "headroom": healthy,
}

# llama.cpp's names for the same gauges (analysis/data/metric_names.py): a slot cap reads as scheduler
LLAMACPP = {
    "vllm:num_requests_running": "llamacpp:requests_processing",
    "vllm:num_requests_waiting": "llamacpp:requests_deferred",
}

VARIANTS = [
    Variant("scheduler", "tiny", "single", "stepped", 1.0),
    Variant("scheduler", "h100-llama3-8b", "chat", "stepped", 1.0),
    Variant("scheduler", "a100-llama70b-tp4", "single", "fixed", 1.0),
    Variant("scheduler", "h100-llama3-8b", "chat", "fixed", 0.25),
    Variant("scheduler", "tiny", "single", "fixed", 0.5, dialect="llamacpp"),
    Variant("gpu-compute", "tiny", "single", "stepped", 3.0),
    Variant("gpu-compute", "h100-llama3-8b", "chat", "fixed", 3.5),
    Variant("gpu-compute", "a100-llama70b-tp4", "single", "stepped", 4.0),
    Variant("gpu-compute", "a100-llama70b-tp4", "chat", "stepped", 2.2),
    Variant("kv-cache", "tiny", "single", "stepped", 3.15),
    Variant("kv-cache", "h100-llama3-8b", "chat", "fixed", 6.05),
    Variant("kv-cache", "a100-llama70b-tp4", "single", "fixed", 1.0),  # running held at 1, no preemption
    Variant("kv-cache", "tiny", "chat", "stepped", 1.0),
    Variant("memory-leak", "tiny", "single", "fixed", 1),
    Variant("memory-leak", "h100-llama3-8b", "chat", "fixed", 2),
    Variant("memory-leak", "a100-llama70b-tp4", "single", "stepped", 3),
    Variant("headroom", "tiny", "single", "stepped", 0.5),
    Variant("headroom", "h100-llama3-8b", "chat", "fixed", 0.5),
    Variant("headroom", "a100-llama70b-tp4", "single", "fixed", 0.25),
    Variant("headroom", "a100-llama70b-tp4", "chat", "stepped", 0.25),
]

# Both limits at once: the cap is named (primary: what users hit, queue time dominates TTFT), with
# gpu-compute secondary and the advice that raising the cap alone will not help
COMBINED = [
    Variant("scheduler", "tiny", "single", "stepped", 3.0),
    Variant("scheduler", "h100-llama3-8b", "chat", "fixed", 5.0),
    Variant("scheduler", "a100-llama70b-tp4", "single", "stepped", 4.0),
    Variant("scheduler", "tiny", "single", "fixed", 8.0, dialect="llamacpp"),
]

# the defining evidence each layer must quote (the words of its rule's checks)
DEFINING = {
    "scheduler": ("running requests p50", "requests waiting in", "queue time share of time to first token"),
    "gpu-compute": ("per-token time rising",),
    "kv-cache": ("KV-cache usage p90",),
    "memory-leak": ("memory",),
    "headroom": ("no SLO criterion failed",),
}


def scenario(v: Variant, builder=None) -> ms.Scenario:
    return ms.Scenario(v.id, (builder or BUILDERS[v.layer])(v), kind="step" if v.shape == "stepped" else "fixed")


def server_table(v: Variant, sc: ms.Scenario):
    table = ms.server_rows(sc)
    if v.dialect == "llamacpp":
        # llama.cpp has no KV gauge in recent versions, no queue/prefill histograms: only the slot gauges
        table = ms.rename(table, LLAMACPP)
    return table
