"""The verdict rules, one function per layer, in DOMAIN.md's order.

Each rule reads the Context (baseline, loaded window, server signals) and returns a Finding:
whether all its conditions hold (`fired`), the numbers it saw (`evidence`), what to do about it
(`actions`) and `score`, the share of its conditions that held (used only to name the closest
layer when a limit was reached and no rule fired). A rule whose signals are missing returns
`unjudged` with the reason instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from analysis.verdict.context import Context
from analysis.verdict.generator import is_saturated
from loadline.core.records import ErrorClass


@dataclass
class Finding:
    layer: str
    fired: bool = False
    evidence: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    score: float = 0.0
    unjudged: str | None = None  # why the rule could not be evaluated

    def as_dict(self) -> dict:
        return {"layer": self.layer, "evidence": self.evidence, "actions": self.actions}


def _score(conditions: list[bool]) -> float:
    return sum(conditions) / len(conditions) if conditions else 0.0


def _pct(x: float) -> str:
    return f"{x * 100:.0f} %"


def _ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:.0f} ms"


def _where(ctx: Context) -> str:
    return f"in {ctx.describe_window()}"


def _latency_lines(ctx: Context) -> list[str]:
    lines = []
    for metric in ("ttft", "tpot"):
        col = f"{metric}_p50_ms"
        ratio = ctx.ratio(col)
        if ratio is not None:
            scale = ctx.time_scale  # the phase table is in wall time; quote model time like the report
            base_label = "" if ctx.baseline["label"] == "baseline" else f" ({ctx.baseline['label']})"
            lines.append(f"client {metric.upper()} p50 {float(ctx.peak[col]) * scale:.0f} ms in {ctx.peak['label']} "
                         f"vs {float(ctx.baseline[col]) * scale:.0f} ms at baseline{base_label} ({ratio:.1f}x)")
    return lines


def _kv_bound(ctx: Context) -> tuple[bool, list[str]]:
    """Is the KV pool full and evicting? Shared by the compute and KV rules."""
    kv = ctx.signals.gauge("kv_usage", *ctx.window)
    pre = ctx.signals.increase("preemptions", *ctx.window)
    lines = []
    if kv is not None:
        lines.append(f"KV-cache usage p90 {_pct(kv.p90)}, max {_pct(kv.max)} {_where(ctx)}")
    if pre is not None:
        lines.append(f"{pre:.0f} preemptions {_where(ctx)}")
    evicting = bool(pre) or pre is None  # without a preemption metric, a pinned pool is taken as evicting
    return _kv_full(kv, pre, ctx.th) and evicting, lines


def _kv_full(kv, pre: float | None, th) -> bool:
    """Pinned near full most of the time, or exhausted: engines preempt only when the pool is, so
    preemptions with the pool seen at the pinned level count even if usage mostly sat just below it
    (it drops each time sequences leave)."""
    if kv is None:
        return False
    return kv.p90 >= th.kv_pinned or (bool(pre) and kv.max >= th.kv_pinned)


def load_generator(ctx: Context) -> Finding:
    f = Finding("load-generator")
    gen = getattr(ctx.run, "generator", None)
    if gen is None or len(gen) == 0:
        f.unjudged = "load-generator (no generator_metrics.csv: worker CPU and event-loop lag were not sampled)"
        return f
    saturated, evidence = is_saturated(gen)
    f.fired, f.score, f.evidence = saturated, float(saturated), evidence
    if saturated:
        f.evidence.append("client-side TTFT/ITL/E2E include the generator's own delay: do not trust them as the server's")
        f.actions = ["add worker processes (--processes) or machines so each worker stays below ~70 % CPU",
                     "re-run: the measured latency and throughput understate the server",
                     "lower users per worker, or use a cheaper user class (no per-token client work)"]
    return f


def gpu_compute(ctx: Context) -> Finding:
    f = Finding("gpu-compute")
    gpu = ctx.signals.gauge("gpu_util", *ctx.window)
    if gpu is None:
        f.unjudged = "gpu-compute (no GPU utilisation metric, e.g. DCGM_FI_DEV_GPU_UTIL: scrape the DCGM exporter)"
        return f
    th = ctx.th
    kv_bound, kv_lines = _kv_bound(ctx)
    conditions = [gpu.p50 >= th.gpu_busy, ctx.limit.reached,
                  ctx.risen("ttft_p50_ms", th.latency_rise), ctx.risen("tpot_p50_ms", th.tpot_rise), not kv_bound]
    f.score, f.fired = _score(conditions), all(conditions)
    f.evidence = [f"GPU utilisation p50 {_pct(gpu.p50)} (mean {_pct(gpu.mean)}) {_where(ctx)}; rule: p50 >= {_pct(th.gpu_busy)}",
                  *_latency_lines(ctx), *kv_lines]
    if kv_bound:
        f.evidence.append("the KV pool is full and evicting: the batch is limited by memory, not compute")
    f.actions = ["optimise inference: FP8/INT8 weights, speculative decoding, CUDA graphs, a faster attention kernel",
                 "add replicas (see the capacity plan) or use a larger tensor-parallel group",
                 "operate below the knee: cap concurrency at the last step whose latency met the SLO"]
    return f


def not_the_gpu(ctx: Context) -> str | None:
    """DOMAIN rule 2, a note rather than a layer: an idle GPU under a flat throughput."""
    gpu = ctx.signals.gauge("gpu_util", *ctx.window)
    if gpu is not None and ctx.limit.reached and gpu.mean < ctx.th.gpu_not_busy:
        return (f"GPU utilisation only {_pct(gpu.mean)} while the limit was reached: not the GPU; "
                f"adding cards will not help")
    return None


def memory_leak(ctx: Context) -> Finding:
    f = Finding("memory-leak")
    s = ctx.signals
    if not (s.has("kv_usage") or s.has("gpu_mem_used")):
        f.unjudged = "memory-leak (no KV-cache usage or GPU memory metric)"
        return f
    th = ctx.th
    lines: list[str] = []
    residue = _idle_residue(ctx)
    if residue is not None:
        lines.append(f"KV-cache usage {_pct(residue)} while no request was running or waiting "
                     f"(should be ~0; threshold {_pct(th.idle_residue)})")
    restarts = _oom_like_restarts(ctx)
    span = ctx.signals.time_span()
    oom = ctx.signals.increase("engine_restarts", *span) if span else None
    if oom:
        lines.append(f"{oom:.0f} out-of-memory restart(s) of the serving process during the run")
    for ts, level in restarts:
        lines.append(f"engine restarted at t={ts - ctx.window[0]:+.0f} s (counters reset) with memory at {_pct(level)} just before")
    rise = _floor_rise(ctx)
    if rise is not None:
        lines.append(f"memory floor (lowest KV usage per time slice, under steady load) rose {_pct(rise)} of the pool "
                     f"over the run; threshold {_pct(th.leak_rise)}")
    signals = [residue is not None and residue >= th.idle_residue, bool(restarts), bool(oom),
               rise is not None and rise >= th.leak_rise]
    f.fired = any(signals)
    f.score = 1.0 if f.fired else 0.0
    f.evidence = lines
    f.actions = ["find the leak before scaling: memory held after requests finish (aborted streams, prefix cache, "
                 "adapters) - compare memory at idle before and after the run",
                 "run a soak (2 h, or time-scaled) to confirm the slope and the time to OOM",
                 "until fixed: restart replicas on a schedule shorter than the time to OOM"]
    return f


def _idle_residue(ctx: Context) -> float | None:
    """The highest KV usage at scrapes where the engine had nothing running or waiting."""
    s = ctx.signals
    kv, running = s.gauge_series("kv_usage"), s.gauge_series("running")
    if kv.empty or running.empty:
        return None
    waiting = s.gauge_series("waiting").reindex(running.index).fillna(0)
    idle_ts = running.index[(running.to_numpy() == 0) & (waiting.to_numpy() == 0)]
    busy_before = running[running > 0]
    if busy_before.empty:
        return None
    idle_ts = [t for t in idle_ts if t > busy_before.index.min()]  # after traffic started
    values = kv.reindex(idle_ts).dropna()
    return float(values.max()) if len(values) else None


def _oom_like_restarts(ctx: Context) -> list[tuple[float, float]]:
    """Counter resets preceded by memory at or above the pinned level: out-of-memory restarts."""
    s = ctx.signals
    memory = s.gauge_series("kv_usage")
    if memory.empty:
        return []
    found = []
    seen: set[float] = set()
    for concept in ("gen_tokens", "prompt_tokens"):  # true counters on every engine
        for ts in s.resets(concept):
            if any(abs(ts - t) < 1e-6 for t in seen):
                continue
            before = memory[memory.index < ts].tail(3)
            if len(before) and before.max() >= ctx.th.kv_pinned:
                found.append((ts, float(before.max())))
                seen.add(ts)
    return found


def _floor_rise(ctx: Context, slices: int = 5) -> float | None:
    """Rise of the lowest KV usage per time slice, over the part of the run with steady load."""
    s = ctx.signals
    kv, running = s.gauge_series("kv_usage"), s.gauge_series("running")
    if kv.empty or running.empty or len(kv) < 2 * slices:
        return None
    steady = running[running >= 0.8 * running.median()]
    if steady.empty or running.median() <= 0:
        return None
    kv = kv[(kv.index >= steady.index.min()) & (kv.index <= steady.index.max())]
    if len(kv) < 2 * slices:
        return None
    parts = [kv.iloc[i * len(kv) // slices:(i + 1) * len(kv) // slices] for i in range(slices)]
    load = [running.reindex(p.index).median() for p in parts]
    if min(load) <= 0 or max(load) / min(load) > 1.25:
        return None  # load changed: a higher floor is explained by more work in flight
    return float(parts[-1].min() - parts[0].min())


def kv_cache(ctx: Context) -> Finding:
    f = Finding("kv-cache")
    s = ctx.signals
    if not s.has("kv_usage"):
        f.unjudged = "kv-cache (no KV-cache usage metric, e.g. vllm:kv_cache_usage_perc / sglang:token_usage)"
        return f
    th = ctx.th
    kv = s.gauge("kv_usage", *ctx.window)
    pre = s.increase("preemptions", *ctx.window)
    waiting = s.gauge("waiting", *ctx.window)
    pressure = bool(pre) or (waiting is not None and waiting.mean >= 1)
    conditions = [_kv_full(kv, pre, th), pressure, ctx.limit.reached]
    f.score, f.fired = _score(conditions), all(conditions)
    f.evidence = _kv_bound(ctx)[1] + _latency_lines(ctx)
    if waiting is not None:
        f.evidence.append(f"waiting requests mean {waiting.mean:.1f}, max {waiting.max:.0f} {_where(ctx)}")
    f.actions = ["lower max-model-len or cap prompt + output length per request",
                 "quantise the KV cache (fp8) or the weights to free memory for KV",
                 "enable prefix caching for shared system prompts",
                 "more KV memory per replica: tensor parallelism, a larger GPU, higher gpu_memory_utilization",
                 "cap concurrency below the point where KV usage reaches ~90 %"]
    return f


def host_cpu(ctx: Context) -> Finding:
    f = Finding("host-cpu")
    busy = ctx.signals.host_cpu_busy(*ctx.window)
    if busy is None:
        f.unjudged = "host-cpu (no host CPU metric: scrape node_exporter's node_cpu_seconds_total)"
        return f
    gpu = ctx.signals.gauge("gpu_util", *ctx.window)
    gpu_idle = gpu is None or gpu.mean < ctx.th.gpu_busy
    conditions = [busy >= ctx.th.host_cpu_busy, gpu_idle, ctx.limit.reached]
    f.score, f.fired = _score(conditions), all(conditions)
    f.evidence = [f"host CPU busy {_pct(busy)} {_where(ctx)}; rule: >= {_pct(ctx.th.host_cpu_busy)}"]
    if gpu is not None:
        f.evidence.append(f"GPU utilisation mean {_pct(gpu.mean)}")
    f.actions = ["move tokenisation / detokenisation off the request path or to more API-server processes",
                 "check the sampling settings (penalties, logprobs) and structured-output guides that run on CPU",
                 "give the serving process more cores or pin it away from noisy neighbours"]
    return f


def scheduler(ctx: Context) -> Finding:
    f = Finding("scheduler")
    s = ctx.signals
    if not (s.has("running") and s.has("waiting")):
        f.unjudged = "scheduler (no running/waiting request gauges from the engine)"
        return f
    th = ctx.th
    waiting = s.gauge_series("waiting")
    waiting = waiting[(waiting.index >= ctx.window[0]) & (waiting.index <= ctx.window[1])]
    running = s.gauge("running", *ctx.window)
    kv = s.gauge("kv_usage", *ctx.window)
    queue = s.histogram("queue_time", *ctx.window)
    prefill = s.histogram("prefill_time", *ctx.window)
    share = float((waiting > 0).mean()) if len(waiting) else 0.0
    plateau = running is not None and running.max > 0 and running.p50 >= th.running_plateau * running.max
    # queueing dominates the time to first token: longer in the queue than in prefill, and long enough to matter
    queue_dominates = queue is not None and queue.mean is not None and queue.mean * 1000 >= ctx.floor_ms and (
        prefill is None or prefill.mean is None or queue.mean >= prefill.mean)
    ttft_high = ctx.risen("ttft_p50_ms", th.latency_rise) or queue_dominates
    conditions = [share >= th.waiting_share, plateau, kv is None or kv.p90 < th.kv_pinned, ttft_high, ctx.limit.reached]
    f.score, f.fired = _score(conditions), all(conditions)
    if running is not None:
        f.evidence.append(f"running requests p50 {running.p50:.0f}, max {running.max:.0f} {_where(ctx)}: "
                          f"{'pinned at a cap' if plateau else 'not pinned'}")
    f.evidence.append(f"requests waiting in {_pct(share)} of scrapes (max {waiting.max() if len(waiting) else 0:.0f})")
    if kv is not None:
        f.evidence.append(f"KV-cache usage p90 {_pct(kv.p90)}: {'room left' if kv.p90 < th.kv_pinned else 'full'}")
    if queue is not None and queue.mean is not None:
        scale = ctx.time_scale  # server histograms are in wall seconds: quote model time like the report
        f.evidence.append(f"server queue time mean {_ms(queue.mean * scale)} vs prefill "
                          f"{_ms(prefill.mean * scale if prefill and prefill.mean is not None else None)}")
    f.evidence += _latency_lines(ctx)
    f.actions = ["raise max_num_seqs (and max_num_batched_tokens) while KV usage and GPU have room",
                 "check that continuous batching is on and the batching window is not too wide",
                 "add replicas only after the batch cap is raised and the GPU is the limit"]
    return f


def _error_counts(rows: pd.DataFrame) -> dict[str, int]:
    if rows.empty:
        return {}
    failed = rows[rows["status"].astype(str) == "error"]
    status = pd.to_numeric(failed["http_status"], errors="coerce").fillna(0)
    cls = failed["error_class"].astype(str)
    return {"connect": int((cls == ErrorClass.CONNECT).sum()), "reset": int((cls == ErrorClass.RESET).sum()),
            "timeout before any response": int(((cls == ErrorClass.TIMEOUT) & (status == 0)).sum()),
            "HTTP 502/503/504": int(status.isin([502, 503, 504]).sum())}


def gateway(ctx: Context) -> Finding:
    f = Finding("gateway")
    s = ctx.signals
    start, end = ctx.phases["start_wall"].min(), ctx.phases["end_wall"].max()
    rows = ctx.requests_in(float(start), float(end)) if len(ctx.phases) else ctx.requests_in(*ctx.window)
    counts = _error_counts(rows)
    total = len(rows)
    gateway_errors = sum(counts.values())
    share = gateway_errors / total if total else 0.0
    metric_hits = {c: s.increase(c, start, end) for c in
                   ("gateway_5xx", "gateway_connect_fail", "gateway_pending_overflow", "gateway_timeouts")}
    metric_hits = {c: v for c, v in metric_hits.items() if v}
    waiting = s.gauge("waiting", *ctx.window)
    kv = s.gauge("kv_usage", *ctx.window)
    engine_calm = (waiting is None or waiting.p90 < 1) and (kv is None or kv.p90 < ctx.th.kv_pinned)
    restarted = bool(s.increase("engine_restarts", start, end)) or any(
        start <= t <= end for c in ("gen_tokens", "prompt_tokens") for t in s.resets(c))
    # while the engine restarts, refused requests are the engine's outage, not the gateway's doing
    client_side = share >= ctx.th.error_rate and engine_calm and not restarted
    f.fired = bool(metric_hits) or client_side
    f.score = 1.0 if f.fired else 0.5 * (share >= ctx.th.error_rate)
    if gateway_errors:
        detail = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
        f.evidence.append(f"{gateway_errors} of {total} requests ({share:.1%}) failed before or outside the engine: {detail}")
    for concept, value in metric_hits.items():
        f.evidence.append(f"gateway metric {concept} rose by {value:.0f}")
    if restarted and gateway_errors:
        f.evidence.append("the engine restarted during the run: these failures may be its outage, not the gateway")
    if waiting is not None:
        f.evidence.append(f"meanwhile the engine's queue: waiting p90 {waiting.p90:.0f}"
                          + (f", KV usage p90 {_pct(kv.p90)}" if kv is not None else "")
                          + (": the engine was not overloaded" if engine_calm else ""))
    elif client_side:
        f.evidence.append("no engine metrics: cannot rule out the engine's own admission control (503 on a full queue)")
    f.actions = ["raise the gateway / load balancer's connection limit and upstream pool (max connections, pending requests)",
                 "enable keep-alive to the upstream and check idle timeouts against long streams",
                 "check gateway timeouts: streaming responses last as long as the longest generation",
                 "check auth and downstream services on the request path"]
    return f


def outside_engine(ctx: Context) -> Finding:
    f = Finding("outside-engine")
    s = ctx.signals
    concept = "ttft" if s.has("ttft") else "e2e" if s.has("e2e") else None
    if concept is None:
        f.unjudged = "outside-engine (no server-side TTFT or E2E histogram to compare the client's time with)"
        return f
    server = s.histogram(concept, *ctx.window)
    rows = ctx.requests_in(*ctx.window)
    ok = rows[rows["status"].astype(str) == "ok"] if len(rows) else rows
    client = pd.to_numeric(ok.get(f"{concept}_ms", pd.Series(dtype=float)), errors="coerce").dropna()
    if server is None or server.mean is None or client.empty:
        f.unjudged = f"outside-engine (no {concept} observations {_where(ctx)} on one side)"
        return f
    client_s, server_s = float(client.mean()) / 1000.0, server.mean
    gap_ms = (client_s - server_s) * 1000.0
    # a constant gap (network, TLS) is a latency cost, not a capacity limit: it must come with a limit
    conditions = [client_s >= ctx.th.outside_ratio * server_s, gap_ms >= ctx.floor_ms, ctx.limit.reached]
    f.score, f.fired = _score(conditions), all(conditions)
    scale = ctx.time_scale  # quoted in model time, like the report
    f.evidence = [f"client {concept.upper()} mean {_ms(client_s * scale)} vs the server's own {_ms(server_s * scale)} "
                  f"{_where(ctx)}: {gap_ms * scale:.0f} ms spent outside the engine (network, gateway, auth, client)"]
    f.actions = ["trace one slow request through the chain (gateway, auth, service mesh) and time each hop",
                 "check connection set-up: TLS handshakes and keep-alive reuse between client, gateway and engine",
                 "test the engine directly (bypass the gateway) to confirm the split"]
    return f


# DOMAIN.md's order, with the generator first: a starved generator invalidates every other reading.
RULES = (load_generator, gpu_compute, memory_leak, kv_cache, host_cpu, scheduler, gateway, outside_engine)
