"""The run-wide layers: the load generator (validity), a memory leak, the gateway; and the GPU note.

These read the whole run rather than one window: a starved generator makes every reading suspect;
a leak shows as memory held at idle, an out-of-memory restart, or a floor that rises while the load
stays constant (never because more load brought more context); a gateway shows as failures
before the engine while the engine is calm.
"""

from __future__ import annotations

import pandas as pd

from loadline.analysis.verdict.context import Context
from loadline.analysis.verdict.generator import is_saturated
from loadline.analysis.verdict.reading import Check
from loadline.analysis.verdict.rules import Finding
from loadline.core.records import ErrorClass, Status


def _pct(x: float) -> str:
    return f"{x * 100:.0f} %"


def load_generator(ctx: Context) -> Finding:
    f = Finding("load-generator", any_of=True)
    gen = getattr(ctx.run, "generator", None)
    if gen is None or len(gen) == 0:
        f.unjudged = "load-generator (no generator_metrics.csv: worker CPU and event-loop lag were not sampled)"
        return f
    saturated, evidence = is_saturated(gen)
    # selfcheck.py's thresholds are applied inside is_saturated; held here means "past them"
    f.checks = [
        Check(
            "load generator saturated (worker CPU or event-loop lag past loadline.runtime.selfcheck's limits)",
            1.0 if saturated else 0.0,
            1.0,
            decisive=True,
        )
    ]
    f.evidence = evidence
    if saturated:
        f.evidence.append(
            "client-side TTFT/ITL/E2E include the generator's own delay: do not trust them as the server's"
        )
        f.actions = [
            "add load-generator processes (loadline run --workers N) or machines so each worker stays below ~70 % CPU",
            "re-run: the measured latency and throughput understate the server",
            "lower users per worker, or use a cheaper user class (no per-token client work)",
        ]
    return f


def not_the_gpu(ctx: Context, window) -> str | None:
    """DOMAIN rule 2, a note rather than a layer: an idle GPU where the limit was reached."""
    if window is None:
        return None
    gpu = ctx.signals.gauge("gpu_util", window.start, window.end)
    if gpu is not None and gpu.mean < ctx.th.gpu_not_busy:
        return f"GPU utilisation only {_pct(gpu.mean)} while the limit was reached: not the GPU; adding cards will not help"
    return None


# --- memory leak -------------------------------------------------------------------------------
def memory_leak(ctx: Context) -> Finding:
    f = Finding("memory-leak", any_of=True, engine_side=True)
    s = ctx.signals
    if not (s.has("kv_usage") or s.has("gpu_mem_used")):
        f.unjudged = "memory-leak (no KV-cache usage or GPU memory metric)"
        return f
    th = ctx.th
    residue = _idle_residue(ctx)
    restarts = _oom_like_restarts(ctx)
    span = s.time_span()
    oom = s.increase("engine_restarts", *span) if span else None
    rise, why = _floor_rise(ctx)
    f.checks = [
        Check("KV-cache usage while no request was running or waiting (should be ~0)", residue, th.idle_residue),
        Check(
            "engine restarts (counters reset) right after memory at the pinned level",
            float(len(restarts)),
            1.0,
            decisive=True,
        ),
        Check("out-of-memory restarts of the serving process", oom, 1.0, decisive=True),
        Check(f"memory floor rise at constant load ({why})", rise, th.leak_rise),
    ]
    for ts, level in restarts:
        f.evidence.append(f"engine restarted at t={ts - ctx.span[0]:+.0f} s with memory at {_pct(level)} just before")
    f.actions = [
        "find the leak before scaling: memory held after requests finish (aborted streams, prefix cache, "
        "adapters) - compare memory at idle before and after the run",
        "run a soak (2 h, or time-scaled) to confirm the slope and the time to OOM",
        "until fixed: restart replicas on a schedule shorter than the time to OOM",
    ]
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
    found: list[tuple[float, float]] = []
    for concept in ("gen_tokens", "prompt_tokens"):  # true counters on every engine
        for ts in s.resets(concept):
            if any(abs(ts - t) < 1e-6 for t, _ in found):
                continue
            before = memory[memory.index < ts].tail(3)
            if len(before) and before.max() >= ctx.th.kv_pinned:
                found.append((ts, float(before.max())))
    return found


def _floor_rise(ctx: Context, slices: int = 5) -> tuple[float | None, str]:
    """Rise of the lowest KV usage per time slice while the load stayed constant.

    Constant load: the users did not change and the requests in the engine (running + waiting)
    stayed within `steady_load` of each other across slices; a higher floor under more load is
    explained by more context in flight (a KV-bound run, not a leak).
    """
    s = ctx.signals
    kv, running = s.gauge_series("kv_usage"), s.gauge_series("running")
    if kv.empty or running.empty or len(kv) < 2 * slices or running.median() <= 0:
        return None, "not enough samples"
    load = running.add(s.gauge_series("waiting").reindex(running.index).fillna(0), fill_value=0)
    steady = load[load >= 0.8 * load.median()]
    kv = kv[(kv.index >= steady.index.min()) & (kv.index <= steady.index.max())]
    if len(kv) < 2 * slices:
        return None, "not enough samples under load"
    parts = [kv.iloc[i * len(kv) // slices : (i + 1) * len(kv) // slices] for i in range(slices)]
    in_engine = [load.reindex(p.index).median() for p in parts]
    if min(in_engine) <= 0 or max(in_engine) / min(in_engine) > ctx.th.steady_load:
        return None, "the load in the engine changed"
    if _users_changed(ctx, float(parts[0].index.min()), float(parts[-1].index.max())):
        return None, "the user count changed"
    return float(parts[-1].min() - parts[0].min()), f"lowest KV usage per fifth of the loaded span, {len(kv)} scrapes"


def _users_changed(ctx: Context, start: float, end: float) -> bool:
    inside = [w.users for w in ctx.windows if w.kind == "phase" and w.end > start and w.start < end]
    return bool(inside) and max(inside) > min(inside) * 1.1


# --- gateway -----------------------------------------------------------------------------------
def _error_counts(rows: pd.DataFrame) -> dict[str, int]:
    if rows.empty:
        return {}
    failed = rows[rows["status"] == Status.ERROR]
    status = pd.to_numeric(failed["http_status"], errors="coerce").fillna(0)
    cls = failed["error_class"].astype(str)
    return {
        ErrorClass.CONNECT: int((cls == ErrorClass.CONNECT).sum()),
        ErrorClass.RESET: int((cls == ErrorClass.RESET).sum()),
        "timeout before any response": int(((cls == ErrorClass.TIMEOUT) & (status == 0)).sum()),
        "HTTP 502/503/504": int(status.isin([502, 503, 504]).sum()),
    }


def gateway(ctx: Context) -> Finding:
    f = Finding("gateway", any_of=True)
    s = ctx.signals
    start, end = ctx.span
    rows = ctx.requests_in(start, end)
    counts = _error_counts(rows)
    total = len(rows)
    gateway_errors = sum(counts.values())
    share = gateway_errors / total if total else 0.0
    increases = {
        c: s.increase(c, start, end)
        for c in ("gateway_5xx", "gateway_connect_fail", "gateway_pending_overflow", "gateway_timeouts")
    }
    metric_hits = {c: v for c, v in increases.items() if v}
    waiting = s.gauge("waiting", start, end)
    kv = s.gauge("kv_usage", start, end)
    engine_calm = (waiting is None or waiting.p90 < 1) and (kv is None or kv.p90 < ctx.th.kv_pinned)
    restarted = bool(s.increase("engine_restarts", start, end)) or any(
        start <= t <= end for c in ("gen_tokens", "prompt_tokens") for t in s.resets(c)
    )
    # while the engine restarts, refused requests are the engine's outage, not the gateway's doing
    client_side = share if engine_calm and not restarted else 0.0
    detail = ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "none"
    f.checks = [
        Check(
            f"{gateway_errors} of {total} requests failed before or outside the engine ({detail}), "
            f"with the engine's queue empty and no restart",
            client_side,
            ctx.th.error_rate,
        ),
        Check(
            "gateway error counters rose: " + (", ".join(f"{c} +{v:.0f}" for c, v in metric_hits.items()) or "none"),
            float(sum(metric_hits.values())),
            1.0,
            decisive=True,
        ),
    ]
    if restarted and gateway_errors:
        f.evidence.append("the engine restarted during the run: these failures may be its outage, not the gateway")
    if waiting is not None:
        f.evidence.append(
            f"meanwhile the engine's queue: waiting p90 {waiting.p90:.0f}"
            + (f", KV usage p90 {_pct(kv.p90)}" if kv is not None else "")
            + (": the engine was not overloaded" if engine_calm else "")
        )
    elif share >= ctx.th.error_rate:
        f.evidence.append("no engine metrics: cannot rule out the engine's own admission control (503 on a full queue)")
    f.actions = [
        "raise the gateway / load balancer's connection limit and upstream pool (max connections, pending requests)",
        "enable keep-alive to the upstream and check idle timeouts against long streams",
        "check gateway timeouts: streaming responses last as long as the longest generation",
        "check auth and downstream services on the request path",
    ]
    return f
