"""The engine-side layers, each recognised by its defining signals in one window.

Every rule reads one window's Reading (analysis/verdict/reading.py) and returns a Finding made of
Checks, one per defining signal with its threshold and margin. The definitions exclude each other
by construction, so the order the rules run in never decides the verdict:

- scheduler:   running pinned at a cap, requests waiting, while the KV pool and per-token time are
               not limiting, and queue time dominates the time to first token;
- gpu-compute: per-token time rising with the batch, the GPU not idle (pinned at 95 % confirms), KV not limiting;
- kv-cache:    the KV pool pinned while the engine preempts (or, without a preemption counter,
               keeps requests waiting);
- host-cpu:    host CPU saturated while the GPU is not;
- outside-engine: the client waits far longer than the engine says it took.

The run-wide layers (load generator, memory leak, gateway) are in analysis/verdict/run_rules.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from loadline.analysis.verdict.context import Context, Window
from loadline.analysis.verdict.reading import Check, Reading, kv_level, queue_share
from loadline.core.records import Status


@dataclass
class Finding:
    layer: str
    checks: list[Check] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)  # context lines beside the checks
    actions: list[str] = field(default_factory=list)
    window: Window | None = None
    unjudged: str | None = None  # why the rule could not be evaluated
    any_of: bool = False  # one held check is enough (leak, gateway, generator: independent symptoms)
    engine_side: bool = False  # proven by the engine's (or host's) own metrics, not by client timings
    # proven by the engine's step times or its host's CPU: a saturated generator on that same host
    # (loopback target) inflates both, so there they are as suspect as the client's timings
    host_timed: bool = False
    also: str | None = None  # a second limit the same window shows, said in the on-call sentence
    # supporting signals seen, but short of confirming (GPU busy, not pinned): like an unmeasured
    # one, each caps the confidence at medium
    short: list[str] = field(default_factory=list)

    @property
    def fired(self) -> bool:
        if self.unjudged or not self.checks:
            return False
        if self.any_of:
            return any(c.held for c in self.checks)
        required_ok = all(c.held for c in self.checks if c.required)
        optional_ok = all(c.held for c in self.checks if not c.required and c.measured)
        return required_ok and optional_ok

    @property
    def score(self) -> float:
        """The share of measured checks that held: names the closest layer when none fired."""
        measured = [c for c in self.checks if c.measured]
        return sum(c.held for c in measured) / len(measured) if measured else 0.0

    @property
    def margin(self) -> float:
        """How clearly it fired: the weakest defining signal's margin (the strongest, for any-of rules)."""
        margins = [c.margin for c in self.checks if c.measured and (c.held or not self.any_of)]
        known = [m for m in margins if m is not None]
        if not known:
            return 0.0
        return max(known) if self.any_of else min(known)

    @property
    def unmeasured(self) -> list[str]:
        return [c.text for c in self.checks if not c.measured and not c.required]

    @property
    def weak(self) -> list[str]:
        """The supporting signals that cap the confidence: not measured, or short of confirming."""
        return [f"not measured - {text}" for text in self.unmeasured] + self.short

    def lines(self) -> list[str]:
        checks = [c for c in self.checks if c.measured or not self.any_of]
        return [c.line() for c in checks] + self.evidence

    def measured(self) -> list[dict]:
        """The defining signals measured, strongest margin first: {signal, measured, threshold}."""
        seen = sorted((c for c in self.checks if c.measured), key=lambda c: -(c.margin or 0.0))
        return [{"signal": c.text, "measured": c.measured_text, "threshold": c.threshold_text} for c in seen]

    def as_dict(self) -> dict:
        return {
            "layer": self.layer,
            "window": self.window.label if self.window else "the run",
            "margin": round(self.margin, 3),
            "evidence": self.lines(),
            "actions": self.actions,
        }


def _pct(x: float) -> str:
    return f"{x * 100:.0f} %"


def batch_cap(ctx: Context) -> tuple[float | None, bool]:
    """The cap a pinned `running` sits at, and whether the engine exported it.

    TensorRT-LLM exports its cap (`running_cap`); vLLM's max_num_seqs and llama.cpp's slot count
    are in no metric, so there the cap is the largest batch the engine ran during the run: a
    window pinned at it while requests wait is held by a cap.
    """
    exported = ctx.signals.gauge("running_cap", *ctx.span) if ctx.signals.has("running_cap") else None
    if exported is not None and exported.max > 0:
        return exported.max, True
    running = ctx.signals.gauge("running", *ctx.span)
    return (running.max if running is not None and running.max > 0 else None), False


def _kv_room(r: Reading, ctx: Context, required: bool = False) -> Check:
    level = kv_level(r)
    text = "KV-cache pool not limiting: " + (
        "n/a"
        if level is None or r.kv is None
        else f"p90 {_pct(r.kv.p90)}, max {_pct(r.kv.max)}, {r.preemptions or 0:.0f} preemptions{r.kv_full_why}"
    )
    return Check(text, level, r.kv_full, above=False, bounded=True, required=required)


def _per_token_ratio(ctx: Context, r: Reading, base: Reading) -> tuple[float | None, str]:
    """Per-token time in this window over the baseline's, same source on both sides; a rise below
    the per-token noise floor counts as none."""
    if r.per_token_ms is None or base.per_token_ms is None or base.per_token_ms <= 0:
        return None, "per-token time: n/a"
    if r.per_token_source != base.per_token_source:
        now, then = r.window.stat("tpot_p50_ms"), base.window.stat("tpot_p50_ms")
        if not now or not then:
            return None, "per-token time: n/a"
        source = "client TPOT p50"
    else:
        now, then, source = r.per_token_ms, base.per_token_ms, r.per_token_source
    text = (
        f"per-token time ({source}) {now:.1f} ms in {r.window.label} vs {then:.1f} ms in "
        f"{base.window.label} ({now / then:.2f}x)"
    )
    if now - then < ctx.th.token_noise_floor_ms:
        return min(now / then, 1.0), text + f", a rise under the {ctx.th.token_noise_floor_ms:g} ms noise floor"
    return now / then, text


def scheduler(ctx: Context, r: Reading, base: Reading) -> Finding:
    f = Finding("scheduler", window=r.window, engine_side=True)
    if r.running is None or r.waiting is None:
        f.unjudged = "scheduler (no running/waiting request gauges from the engine)"
        return f
    th, (cap, exported) = ctx.th, batch_cap(ctx)
    pinned = r.running.p50 / cap if cap else None
    share, queue_ms, how = queue_share(r)
    ratio, token_text = _per_token_ratio(ctx, r, base) if r.window is not base.window else (None, "per-token time: n/a")
    f.checks = [
        Check(
            f"running requests p50 {r.running.p50:.0f}{_named(ctx, 'running')} vs "
            + (f"the engine's cap {cap:.0f}" if exported else f"the largest batch {cap or 0:.0f} seen in the run"),
            pinned,
            th.running_plateau,
            bounded=True,
        ),
        Check(
            f"requests waiting in {r.waiting_share or 0:.0%} of scrapes{_named(ctx, 'waiting')} (mean {r.waiting.mean:.1f})",
            r.waiting_share,
            th.waiting_share,
            bounded=True,
        ),
        Check(f"queue time share of time to first token: {how}", share, th.queue_share, bounded=True),
        # a queue shorter than the latency noise floor is not what limits anyone
        Check(
            f"queue time {queue_ms if queue_ms is not None else 0:.0f} ms (model time) against the noise floor",
            queue_ms,
            th.noise_floor_ms,
        ),
        _kv_room(r, ctx),
    ]
    if ratio is not None and ratio >= th.tpot_rise:
        # The cap is pinned, requests wait and their queue time dominates TTFT: that is the limit
        # users hit (DOMAIN.md rule 5, "TTFT high: requests queue in the scheduler"). But each
        # token also got slower as the batch filled (rule 1's "TTFT and TPOT both high"): a larger
        # cap would move the queue into the batch and slow every stream, not add throughput.
        # The cap stays the finding (what the engine's own gauges prove), compute the next limit.
        f.evidence.append(
            f"per-token time also rises with the batch: {token_text} (threshold >= {th.tpot_rise:g}): "
            f"the compute behind the batch is the next limit"
        )
        f.also = f"per-token time also rose {ratio:.1f}x with the batch, so raising the cap alone will not help"
        f.actions = [
            "do not raise the cap alone (max_num_seqs; llama.cpp: --parallel slots): per-token time already "
            "rises with the batch, so a larger batch slows every stream; add compute first (replicas, "
            "quantised weights, faster kernels; llama.cpp: more threads -t or a GPU)",
            "cap concurrency at the batch cap (admission control) so queue time stays inside the TTFT SLO",
            "then raise the cap while per-token time stays within the SLO",
        ]
        return f
    f.checks.append(
        Check(
            "per-token time not limiting: " + token_text, ratio, th.tpot_rise, above=False, required=False, origin=1.0
        )
    )
    f.actions = [
        "raise max_num_seqs (llama.cpp: --parallel slots) and max_num_batched_tokens while KV usage and GPU have room",
        "check that continuous batching is on and the batching window is not too wide",
        "add replicas only after the batch cap is raised and the GPU is the limit",
    ]
    return f


def _named(ctx: Context, concept: str) -> str:
    """The vendor metric a gauge was read from, e.g. " (llamacpp:requests_processing)": evidence a
    person can look up on the engine's own dashboard."""
    source = ctx.signals.source(concept)
    return f" ({source.name})" if source is not None else ""


def gpu_compute(ctx: Context, r: Reading, base: Reading) -> Finding:
    f = Finding("gpu-compute", window=r.window, host_timed=True)
    if r.window is base.window:
        f.unjudged = "gpu-compute (no lighter window to compare per-token time with)"
        return f
    th = ctx.th
    ratio, token_text = _per_token_ratio(ctx, r, base)
    if ratio is None:
        f.unjudged = "gpu-compute (no per-token time: engine ITL histogram or client TPOT)"
        return f
    f.engine_side = r.per_token_source.startswith("engine") and base.per_token_source == r.per_token_source
    grew = None
    if r.running is not None and base.running is not None:
        grew = r.running.mean / base.running.mean if base.running.mean > 0 else float("inf")
    f.checks = [
        Check("per-token time rising: " + token_text, ratio, th.tpot_rise, origin=1.0),
        Check(
            f"running batch mean {r.running.mean if r.running else 0:.1f} vs {base.running.mean if base.running else 0:.1f} "
            f"in {base.window.label}",
            grew,
            th.batch_growth,
            required=False,
            origin=1.0,
        ),
        # DOMAIN.md rule 2 rules the GPU out when it idles (40-50 %); rule 1's >= 95 % confirms it.
        # In between the GPU is busy but not pinned (bursty arrivals, waves of equal replies leave
        # it idle between them; a busy host stretched the simulator's steps so): per-token time
        # rising with the batch still decides, at medium confidence at most.
        Check(
            f"GPU utilisation p50 {_pct(r.gpu.p50) if r.gpu else 'n/a'}: not idle",
            r.gpu.p50 if r.gpu else None,
            th.gpu_not_busy,
            bounded=True,
            required=False,
        ),
        _kv_room(r, ctx),
    ]
    if r.gpu is None:
        f.evidence.append(
            "GPU utilisation not scraped (DCGM exporter): compute saturation inferred from per-token time only"
        )
    elif th.gpu_not_busy <= r.gpu.p50 < th.gpu_busy:
        f.short.append(
            f"GPU utilisation p50 {_pct(r.gpu.p50)}: busy, but short of the {_pct(th.gpu_busy)} that "
            f"confirms compute saturation (DOMAIN.md rule 1)"
        )
    f.actions = [
        "optimise inference: FP8/INT8 weights, speculative decoding, CUDA graphs, a faster attention kernel",
        "add replicas (see the capacity plan) or use a larger tensor-parallel group",
        "operate below the knee: cap concurrency at the last step whose latency met the SLO",
    ]
    return f


def kv_cache(ctx: Context, r: Reading, base: Reading) -> Finding:
    del base  # the pool's state in the window decides; no comparison needed
    f = Finding("kv-cache", window=r.window, engine_side=True)
    if r.kv is None:
        f.unjudged = "kv-cache (no KV-cache usage metric, e.g. vllm:kv_cache_usage_perc / sglang:token_usage)"
        return f
    th = ctx.th
    level = kv_level(r)
    f.checks = [
        Check(
            f"KV-cache usage p90 {_pct(r.kv.p90)}, max {_pct(r.kv.max)} in {r.window.label}{r.kv_full_why}",
            level,
            r.kv_full,
            bounded=True,
        )
    ]
    if r.preemptions:
        f.checks.append(
            Check(f"{r.preemptions:.0f} preemptions in {r.window.label}", r.preemptions, 1.0, decisive=True)
        )
    else:
        # vLLM admits a request only when its blocks fit: a full pool also shows as a queue, without evictions
        f.checks.append(
            Check(
                f"no preemptions; requests waiting in {r.waiting_share or 0:.0%} of scrapes",
                r.waiting_share,
                th.waiting_share,
                bounded=True,
            )
        )
    cap, exported = batch_cap(ctx)
    if r.running is not None and exported and cap:
        f.checks.append(
            Check(
                f"running requests p50 {r.running.p50:.0f} below the engine's cap {cap:.0f}",
                r.running.p50 / cap,
                th.running_plateau,
                above=False,
                bounded=True,
            )
        )
    elif r.running is not None:
        f.evidence.append(
            f"running requests p50 {r.running.p50:.0f}, max {r.running.max:.0f}: with the pool full, "
            f"the pool rather than a count cap holds the batch"
        )
    f.actions = [
        "lower max-model-len or cap prompt + output length per request",
        "quantise the KV cache (fp8) or the weights to free memory for KV",
        "enable prefix caching for shared system prompts",
        "more KV memory per replica: tensor parallelism, a larger GPU, higher gpu_memory_utilization",
        "cap concurrency below the point where KV usage reaches ~90 %",
    ]
    return f


def host_cpu(ctx: Context, r: Reading, base: Reading) -> Finding:
    del base
    f = Finding("host-cpu", window=r.window, engine_side=True, host_timed=True)
    busy = ctx.signals.host_cpu_busy(r.window.start, r.window.end)
    if busy is None:
        f.unjudged = "host-cpu (no host CPU metric: scrape node_exporter's node_cpu_seconds_total)"
        return f
    f.checks = [
        Check(f"host CPU busy {_pct(busy)} in {r.window.label}", busy, ctx.th.host_cpu_busy, bounded=True),
        Check(
            f"GPU utilisation mean {_pct(r.gpu.mean) if r.gpu else 'n/a'}: not the limit",
            r.gpu.mean if r.gpu else None,
            ctx.th.gpu_busy,
            above=False,
            bounded=True,
            required=False,
        ),
    ]
    f.actions = [
        "move tokenisation / detokenisation off the request path or to more API-server processes",
        "check the sampling settings (penalties, logprobs) and structured-output guides that run on CPU",
        "give the serving process more cores or pin it away from noisy neighbours",
    ]
    return f


def outside_engine(ctx: Context, r: Reading, base: Reading) -> Finding:
    del base
    f = Finding("outside-engine", window=r.window)
    s = ctx.signals
    concept = "ttft" if s.has("ttft") else "e2e" if s.has("e2e") else None
    if concept is None:
        f.unjudged = "outside-engine (no server-side TTFT or E2E histogram to compare the client's time with)"
        return f
    server = s.histogram(concept, r.window.start, r.window.end)
    rows = ctx.requests_in(r.window.start, r.window.end)
    ok = rows[rows["status"] == Status.OK] if len(rows) else rows
    client = ok.get(f"{concept}_ms")
    client = client.astype(float).dropna() if client is not None else None
    if server is None or server.mean is None or client is None or client.empty:
        f.unjudged = f"outside-engine (no {concept} observations in {r.window.label} on one side)"
        return f
    client_s, server_s = float(client.mean()) / 1000.0, server.mean
    gap_ms = (client_s - server_s) * 1000.0
    f.checks = [
        Check(
            f"client {concept.upper()} mean {client_s * 1000:.0f} ms vs the server's own "
            f"{server_s * 1000:.0f} ms: ratio",
            client_s / server_s if server_s > 0 else None,
            ctx.th.outside_ratio,
            origin=1.0,
        ),
        # the client's own measurement floor (validity check) would show up here as "outside" time
        Check(
            f"{gap_ms:.0f} ms spent outside the engine (network, gateway, auth, client), against the "
            f"noise floor or the client's measurement floor (model ms)",
            gap_ms,
            max(ctx.th.noise_floor_ms, ctx.measurement_floor_ms or 0.0),
        ),
    ]
    f.actions = [
        "trace one slow request through the chain (gateway, auth, service mesh) and time each hop",
        "check connection set-up: TLS handshakes and keep-alive reuse between client, gateway and engine",
        "test the engine directly (bypass the gateway) to confirm the split",
    ]
    return f


WINDOW_RULES = (scheduler, gpu_compute, kv_cache, host_cpu, outside_engine)
