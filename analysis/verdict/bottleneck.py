"""The bottleneck verdict: which layer limits this service, where it shows, and how sure we are.

`judge(run, phase_table, slo_failures=...)`:
1. cuts the run into windows (phases; time slices too for one/two-phase runs) and finds where a
   limit shows: a failed SLO criterion, errors, a latency rise or flat throughput (client side),
   a waiting queue persistently non-empty or a KV pool pinned with preemptions (engine side);
2. runs every layer's rule on every such window; each rule checks its *defining* signals against
   thresholds (analysis/verdict/rules.py, run_rules.py) and the definitions exclude each other,
   so rule order does not decide. Two causal precedences remain, both said in the evidence: a
   saturated load generator invalidates every reading, and a proven leak explains a full pool;
3. names the layer whose weakest defining signal is furthest past its threshold, in the window
   where it is clearest; confidence comes from that margin (Thresholds.margin_*), is capped at
   medium when a supporting signal was not scraped, and drops a step when the client's
   measurement floor is a material share of the latency it judged;
4. `headroom` only when no SLO criterion failed and no limit or saturation shows; a limit that no
   layer explains is `unidentified`, said as such, never headroom.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from loadline.analysis.verdict.context import Context, Thresholds, Window, build_context
from loadline.analysis.verdict.reading import Reading, read
from loadline.analysis.verdict.rules import WINDOW_RULES, Finding
from loadline.analysis.verdict.run_rules import gateway, load_generator, memory_leak, not_the_gpu
from loadline.analysis.verdict.timesplit import phase_split
from loadline.core.judge import format_value
from loadline.core.records import ErrorClass, Status

LAYERS = (
    "gpu-compute",
    "kv-cache",
    "memory-leak",
    "scheduler",
    "host-cpu",
    "gateway",
    "outside-engine",
    "load-generator",
    "unidentified",
    "headroom",
)
CONFIDENCE = ("low", "medium", "high")
MAX_REASONS = 4  # limit reasons quoted; the windows that showed one are all listed in limit.windows


def _slo_reason(c: dict) -> str:
    measured = c.get("measured")
    value = format_value(measured, c.get("unit", "ms")) if isinstance(measured, (int, float)) else str(measured)
    return (
        f"SLO criterion failed: {c.get('name')} {value} (limit {c.get('threshold')}) in {c.get('where') or 'the run'}"
    )


def judge(
    run: Any,
    phase_table: pd.DataFrame | None,
    thresholds: Thresholds | None = None,
    slo_failures: list[dict] | None = None,
    measurement_floor_ms: float | None = None,
) -> dict:
    """Verdict dict: layer, confidence, margin, sentence, evidence, actions, secondary, not_judged, limit, window."""
    ctx = build_context(run, phase_table, thresholds, slo_failures, measurement_floor_ms)
    readings = {id(w): read(ctx, w) for w in ctx.windows}
    limited = [w for w in ctx.windows if w.limits or readings[id(w)].saturation]
    judged = limited or _slo_windows(ctx)
    base = readings[id(ctx.baseline)] if ctx.baseline is not None else None
    window_findings = [rule(ctx, readings[id(w)], base) for w in judged for rule in WINDOW_RULES] if base else []
    run_findings = [load_generator(ctx), memory_leak(ctx), gateway(ctx)]
    findings = run_findings + window_findings
    probe = (
        findings
        if judged or not ctx.windows or base is None
        else findings + [rule(ctx, readings[id(w)], base) for w in ctx.windows[-1:] for rule in WINDOW_RULES]
    )  # what could not be judged
    not_judged = list(dict.fromkeys(f.unjudged for f in probe if f.unjudged))
    reasons = [_slo_reason(c) for c in ctx.slo_failures]
    seen = [line for w in limited for line in w.limits + readings[id(w)].saturation]
    reasons += seen[:MAX_REASONS] + ([f"... and {len(seen) - MAX_REASONS} more"] if len(seen) > MAX_REASONS else [])
    fired = [f for f in findings if f.fired]
    primary = _primary(fired, readings, ctx.th, ctx.engine_shares_host)
    if primary is not None:
        confidence, notes = _confidence(ctx, primary, fired)
    elif reasons:
        candidates = [] if _failures_only(ctx, limited, readings) else window_findings
        primary, confidence, notes = _unexplained(ctx, candidates, reasons), "low", []
    else:
        primary, confidence, notes = _headroom(ctx), ("high" if ctx.windows else "low"), []
    secondary = _secondary(fired, primary)
    note = not_the_gpu(ctx, primary.window) if reasons else None
    lines = primary.lines()
    if primary.layer in ("headroom", "unidentified") and primary.evidence:  # the headline already says it
        lines = [line for line in lines if line != primary.evidence[0]]
    evidence = [_headline(primary), *lines, *notes]
    if reasons:
        evidence.append("limit reached: " + "; ".join(dict.fromkeys(reasons)))
    if note:
        evidence.append(note)
    window = primary.window
    first = limited[0] if limited else None
    return {
        "layer": primary.layer,
        "confidence": confidence,
        "margin": round(primary.margin, 3) if primary.layer not in ("headroom", "unidentified") else None,
        "sentence": on_call_sentence(primary.layer, primary),
        "evidence": evidence,
        "measured": primary.measured(),
        # no device utilisation scraped: a compute limit may be a CPU engine's (llama.cpp exports none)
        "gpu_seen": ctx.signals.has("gpu_util"),
        "actions": list(primary.actions),
        "secondary": secondary,
        "not_judged": not_judged,
        "limit": {
            "reached": bool(reasons),
            "phase": first.label if first else None,
            "reasons": list(dict.fromkeys(reasons)),
            "windows": [w.label for w in limited],
        },
        "window": {
            "label": window.label if window else "the run",
            "kind": window.kind if window else "run",
            "start_wall": window.start if window else ctx.span[0],
            "end_wall": window.end if window else ctx.span[1],
            "phases": window.label if window else _describe(ctx.windows),
        },
    }


def _slo_windows(ctx: Context) -> list[Window]:
    """With no limit seen in any window but a failed SLO: the windows the gate named, else the heaviest."""
    if not ctx.slo_failures or not ctx.windows:
        return []
    named = {str(c.get("where")) for c in ctx.slo_failures}
    hit = [w for w in ctx.windows if w.label in named]
    return hit or [max(ctx.windows, key=lambda w: (w.users, w.start))]


def _load(f: Finding, readings: dict[int, Reading]) -> tuple[float, float]:
    if f.window is None:
        return (0.0, 0.0)
    r = readings.get(id(f.window))
    return (f.window.users, r.in_engine() if r else 0.0)


def _primary(
    fired: list[Finding], readings: dict[int, Reading], th: Thresholds, shared_host: bool = False
) -> Finding | None:
    by_layer = {f.layer: f for f in fired}
    if "load-generator" in by_layer:
        # a starved generator makes the client's timings suspect, so it outranks every layer proven
        # by them; what the engine's own metrics prove (a queue, a full pool) it cannot fake: a
        # late client only offers less load. Those stand, with the generator as secondary. On the
        # engine's own host the starved generator is a starved host: the engine's step times and
        # the host's CPU are then the generator's doing too, and only the counts stand.
        stretched = [f for f in fired if shared_host and f.engine_side and f.host_timed]
        fired = [f for f in fired if f.engine_side and f not in stretched]
        if not fired:
            generator = by_layer["load-generator"]
            if stretched:
                layers = ", ".join(dict.fromkeys(f.layer for f in stretched))
                generator.evidence.append(
                    f"not counted against it: {layers} (the engine ran on this host, whose cores the "
                    "generator saturated: its step times and the host's CPU are stretched by the generator too)"
                )
            return generator
    # a proven leak (idle residue, OOM restart, floor rising at constant load) explains a full pool
    if "memory-leak" in by_layer and by_layer["memory-leak"] in fired:
        return by_layer["memory-leak"]
    if not fired:
        return None
    # a pinned cap with a dominant queue and per-token time rising too (scheduler.also): both limits
    # are real; the cap is what users hit first (queue time dominates TTFT, proven by the engine's
    # gauges), so it leads and gpu-compute follows as secondary, whatever their margins
    if any(f.layer == "scheduler" and f.also for f in fired):
        fired = [f for f in fired if f.layer != "gpu-compute"] or fired
    return max(fired, key=lambda f: (_level(f, th), round(f.margin, 6), _load(f, readings)))


def _secondary(fired: list[Finding], primary: Finding) -> list[dict]:
    best: dict[str, Finding] = {}
    for f in fired:
        if f.layer != primary.layer and (f.layer not in best or f.margin > best[f.layer].margin):
            best[f.layer] = f
    return [f.as_dict() for f in best.values()]


def _band(margin: float, th: Thresholds) -> int:
    return 2 if margin >= th.margin_high else 1 if margin >= th.margin_medium else 0


def _level(f: Finding, th: Thresholds) -> int:
    """The margin's band, capped at medium when a supporting signal was not measured (or fell short
    of confirming), one step lower for each further one (a window with no lighter window to compare
    with cannot show per-token time, for instance: a clearer window is preferred)."""
    level = _band(f.margin, th)
    if f.weak:
        level = max(0, min(level, 1) - (len(f.weak) - 1))
    return level


def _confidence(ctx: Context, f: Finding, fired: list[Finding]) -> tuple[str, list[str]]:
    """The band of the weakest defining signal's margin, capped when supporting signals were not scraped.

    The client's measurement floor lowers it in the report (analysis/verdict/validity.py qualify());
    here the floor only widens the latency noise floor (context.mark_client_limits)."""
    if f.layer == "load-generator":
        return "high", []
    level, notes = _level(f, ctx.th), []
    if f.weak:
        notes.append(f"confidence at most {CONFIDENCE[level]}: " + "; ".join(f.weak))
    if f.layer != "load-generator" and any(x.layer == "load-generator" for x in fired):
        notes.append(
            "the load generator was saturated too: client timings are suspect, but this layer is proven "
            "by the engine's own metrics"
        )
    return CONFIDENCE[level], notes


def _headline(f: Finding) -> str:
    where = f.window.label if f.window else "the run"
    held = [c.text for c in f.checks if c.held and c.required] or [c.text for c in f.checks if c.held]
    if f.layer in ("headroom", "unidentified") or not held:
        return f"{f.layer}: " + (f.evidence[0] if f.evidence else where)
    return f"{f.layer} in {where}: " + "; ".join(held)


def _headroom(ctx: Context) -> Finding:
    f = Finding("headroom")
    heaviest = max(ctx.windows, key=lambda w: (w.users, w.start)) if ctx.windows else None
    if heaviest is not None:
        rps = heaviest.stat("rps")
        f.window = heaviest
        f.evidence.append(
            f"no SLO criterion failed and no limit showed up to {heaviest.label}: no engine queue or KV saturation, "
            f"latency within {ctx.th.latency_rise:g}x of the baseline"
            + (f" ({ctx.baseline.label})" if ctx.baseline else "")
            + ", "
            f"errors below {ctx.th.error_rate:.0%}" + (f", {rps:.2f} req/s" if rps else "")
        )
    else:
        f.evidence.append("no phase with traffic: nothing was loaded, so no limit was seen")
    f.actions = ["raise the load (more users or a higher step) until a limit shows, to find the real capacity"]
    return f


# What a failure class (loadline/core/records.py ErrorClass says what each means) points at, when no
# layer's metrics explain the limit.
FAILURE_HINTS: dict[str, tuple[str, str]] = {
    ErrorClass.TRUNCATED: (
        "streams ended in order but without a finish_reason: the server or a proxy stopped them "
        "(llama-cpp-python's server does this to the stream in flight when a new request arrives, "
        "interrupt_requests=true)",
        "check the server's concurrency and request-interruption settings and the proxy's stream timeouts",
    ),
    ErrorClass.NOT_EVENT_STREAM: (
        "2xx replies that were not event streams (a login page, a proxy's page)",
        "check the URL, auth and what answers in front of the engine",
    ),
    ErrorClass.MALFORMED: ("event streams whose events were not OpenAI chunks", "check what answers on the route"),
    ErrorClass.STREAM_ERROR: (
        "error objects inside the stream (the engine aborted generation)",
        "read the server's log for the aborted requests",
    ),
    ErrorClass.TIMEOUT: ("client timeouts", "compare the client's timeouts with the longest replies"),
    ErrorClass.INVALID_REQUEST: (
        "requests the server refused as invalid (over its context, a bad parameter): the "
        "load tool's own, not the service's failures",
        "see 'Is this run valid?': size prompts in the server's tokens within its context",
    ),
}


def _failure_mix(ctx: Context) -> tuple[str, list[str]]:
    """The failed requests by class, and the actions their leading class suggests."""
    rows = ctx.requests_in(*ctx.span)
    failed = rows[rows["status"] == Status.ERROR] if not rows.empty else rows
    if failed.empty:
        return "", []
    counts = failed["error_class"].astype(str).replace("", "unknown").value_counts()
    mix = ", ".join(f"{n} {cls}" for cls, n in counts.items())
    lead = str(counts.index[0])
    meaning, action = FAILURE_HINTS.get(lead, ("", ""))
    line = f"the failures: {mix} of {len(rows)} requests" + (f"; {lead}: {meaning}" if meaning else "")
    return line, [action] if action else []


# A near miss held at least half of its layer's defining signals: one of four is no match (a queue
# time above the noise floor alone, which every engine under load has, named 'scheduler' for an a100
# 70B pulse whose cap was never reached and whose queue never held requests).
CLOSE_SHARE = 0.5


def _closeness(f: Finding) -> tuple[float, float]:
    """How near a rule that did not fire came: (share of its defining signals that held, share of all).

    A measured supporting signal that failed refutes the layer (an idle GPU is "not the GPU", DOMAIN.md
    rule 2; a pinned KV pool is the KV cache's, not the scheduler's): such a rule is no match, nor is
    one whose defining signals all failed (per-token time flat is not compute-bound, however busy
    the GPU). Among the rest the defining signals rank first: a queue that dominates TTFT at a cap
    not quite pinned is nearer the scheduler than a busy GPU with flat per-token time is to compute."""
    if any(c.measured and not c.held for c in f.checks if not c.required):
        return (0.0, f.score)
    defining = [c for c in f.checks if c.required and c.measured]
    return (sum(c.held for c in defining) / len(defining) if defining else 0.0, f.score)


ERROR_CRITERIA = ("error rate",)  # SLO criteria that failed requests fail (loadline/core/judge.py's names)


def _failures_only(ctx: Context, limited: list[Window], readings: dict[int, Reading]) -> bool:
    """The limit reached is failed requests alone: no latency or throughput criterion failed, no
    window's latency rose nor its throughput went flat, and the engine showed no saturation. The
    window rules' signals (queueing, per-token time, a pinned pool) explain latency; a near miss of
    theirs then explains none of the failures (an engine that aborts 5 % of its streams at 4 users,
    with its queue empty, named 'scheduler' from its closest match). Rules that explain failures
    (gateway, leak, restarts) fire on their own."""
    if any(str(c.get("name", "")).strip().lower() not in ERROR_CRITERIA for c in ctx.slo_failures):
        return False
    if any(readings[id(w)].saturation or len(w.limits) > int(w.failing) for w in limited):
        return False
    return bool(ctx.slo_failures) or any(w.failing for w in limited)


def _unexplained(ctx: Context, window_findings: list[Finding], reasons: list[str]) -> Finding:
    judged = [f for f in window_findings if not f.unjudged and f.score >= 0.5 and _closeness(f)[0] >= CLOSE_SHARE]
    best = max(judged, key=_closeness, default=None)
    if best is not None:
        held = sum(c.held for c in best.checks if c.measured)
        total = sum(c.measured for c in best.checks)
        best.evidence.insert(
            0, f"no layer's defining signals all held; closest match ({held} of {total} signals), low confidence"
        )
        return best
    f = Finding("unidentified")
    f.evidence = [
        "a limit was reached (" + reasons[0] + ") but no measured layer explains it: the engine's, GPU's and "
        "host's metrics show no saturation, or were not scraped"
    ]
    mix, actions = _failure_mix(ctx)
    if mix:
        f.evidence.append(mix)
    light, light_actions = _lightest_load(ctx)
    if light:
        f.evidence.append(light)
    missing = [name for concept, name in SCRAPES if not ctx.signals.has(concept)]
    scrape = [f"scrape {', '.join(missing)} during the run (`loadline run -- --scrape-url URL`)"] if missing else []
    f.actions = [*actions, *light_actions, *scrape, "time each hop between the client and the engine"]
    return f


# What to scrape when a layer could not be judged: one concept stands for each exporter
SCRAPES = (
    ("running", "the engine's /metrics"),
    ("gpu_util", "the DCGM exporter"),
    ("host_cpu_seconds", "node_exporter"),
)


def _lightest_load(ctx: Context) -> tuple[str, list[str]]:
    """An SLO criterion failed already in the least-loaded window: nothing contends there, so no
    capacity layer explains it; it is each request's own latency (a long prefill on a large model,
    a slow hop), which the engine's own histograms split."""
    named = {str(c.get("where")) for c in ctx.slo_failures if c.get("unit", "ms") == "ms"}  # latencies, not errors
    levels = {w.users for w in ctx.windows}
    if len(levels) < 2 or not min(levels):  # one load level: nothing lighter to compare it with
        return "", []
    base = next((w for w in ctx.windows if w.label in named and w.users == min(levels)), None)
    if base is None:
        return "", []
    line = (
        f"the SLO failed already at the lightest load ({base.label}, {base.users:g} user"
        f"{'' if base.users == 1 else 's'}): with nothing to "
        f"contend with, that is each request's own latency, not a capacity limit"
    )
    split = phase_split(ctx.requests_in(*ctx.span), ctx.signals, base.start, base.end)["ttft"]
    if split:
        parts = [
            f"{name} {split[key]:,.0f} ms"
            for name, key in (
                ("outside the engine", "outside_ms"),
                ("queue", "queue_ms"),
                ("prefill", "prefill_ms"),
                ("engine other", "engine_other_ms"),
            )
            if split.get(key) is not None
        ]
        line += f"; client TTFT mean {split['client_ms']:,.0f} ms there (model time) = " + " + ".join(parts)
    return line, [
        "compare one request's latency with the SLO: a long prefill (shorter prompts, prefix caching, "
        "a faster GPU, more tensor parallelism, a smaller or quantised model) or a slow hop in front "
        "of the engine; or set an SLO this model can meet, then step the load again"
    ]


def _describe(windows: list[Window]) -> str:
    names = [w.label for w in windows if w.kind == "phase"]
    if not names:
        return "the run"
    return names[0] if len(names) == 1 else f"{names[0]} .. {names[-1]}"


def on_call_sentence(layer: str, f: Finding) -> str:
    """One sentence a person on call can act on: the layer, where, the deciding numbers, the first action."""
    where = f.window.label if f.window else "the run"
    action = f.actions[0] if f.actions else ""
    if layer == "headroom":
        return f"No limit reached up to {where}: the service has headroom; {action}."
    if layer == "unidentified":
        return f"A limit was reached but no measured layer explains it; {action}."
    held = [c.text for c in f.checks if c.held and c.required][:2]
    why = ("; ".join(held)) if held else "see the evidence"
    # no confidence in the sentence: the report may still lower it (validity.qualify); it is shown beside it
    also = f"; {f.also}" if f.also else ""
    return f"Capacity is limited by {layer} in {where} ({why}){also}; first action: {action}."
