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
   layer explains is `unidentified`, said as such, never headroom (analysis/verdict/unexplained.py).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from loadline.analysis.verdict.context import Context, Window, build_context
from loadline.analysis.verdict.reading import Reading, read
from loadline.analysis.verdict.rules import WINDOW_RULES, Finding
from loadline.analysis.verdict.run_rules import gateway, load_generator, memory_leak, not_the_gpu
from loadline.analysis.verdict.thresholds import Thresholds
from loadline.analysis.verdict.unexplained import failures_only, unexplained
from loadline.core.judge import format_value

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
        candidates = [] if failures_only(ctx, limited, readings) else window_findings
        primary, confidence, notes = unexplained(ctx, candidates, reasons), "low", []
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
