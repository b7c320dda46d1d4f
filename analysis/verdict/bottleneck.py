"""The bottleneck verdict: which layer limits this service, with the numbers that say so.

`judge(run, phase_table)` runs the rules of analysis/verdict/rules.py in DOMAIN.md's order
(load generator first: a starved generator makes every other reading suspect; then GPU compute,
memory leak, KV cache, host CPU, scheduler, gateway, outside the engine). The first rule whose
conditions all hold names the layer; later ones that also hold are `secondary`. When no rule
holds and no limit was reached in the tested range, the layer is `headroom`. When a limit was
reached but no rule's conditions all hold, the closest rule is named with `confidence: low`.
Rules whose signals are missing are listed in `not_judged`.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from analysis.verdict.context import Context, Thresholds, build_context
from analysis.verdict.rules import RULES, Finding, not_the_gpu

LAYERS = ("gpu-compute", "kv-cache", "memory-leak", "scheduler", "host-cpu", "gateway", "outside-engine",
          "load-generator", "headroom")


def judge(run: Any, phase_table: pd.DataFrame | None, thresholds: Thresholds | None = None) -> dict:
    """Verdict dict: layer, confidence, evidence, actions, secondary, not_judged, limit, window."""
    ctx = build_context(run, phase_table, thresholds)
    findings = [rule(ctx) for rule in RULES]
    fired = [f for f in findings if f.fired]
    not_judged = [f.unjudged for f in findings if f.unjudged]
    note = not_the_gpu(ctx)
    if fired:
        primary, confidence = fired[0], "high"
        secondary = [f.as_dict() for f in fired[1:]]
    elif not ctx.limit.reached:
        # with no phase carrying traffic, "no limit seen" says nothing about the service
        primary, confidence, secondary = _headroom(ctx), ("high" if len(ctx.phases) else "low"), []
    else:
        primary, confidence = _closest(findings, ctx), "low"
        secondary = []
    evidence = list(primary.evidence)
    if ctx.limit.reached:
        evidence.append("limit reached: " + "; ".join(ctx.limit.reasons))
    if note:
        evidence.append(note)
    return {
        "layer": primary.layer,
        "confidence": confidence,
        "evidence": evidence,
        "actions": list(primary.actions),
        "secondary": secondary,
        "not_judged": not_judged,
        "limit": {"reached": ctx.limit.reached, "phase": ctx.limit.phase, "reasons": ctx.limit.reasons},
        "window": {"start_wall": ctx.window[0], "end_wall": ctx.window[1], "phases": ctx.describe_window()},
    }


def _headroom(ctx: Context) -> Finding:
    f = Finding("headroom")
    peak = ctx.peak
    if len(peak):
        rps = peak.get("rps")
        f.evidence.append(
            f"no limit reached up to {peak.get('label')}: latency within {ctx.th.latency_rise:g}x of the baseline, "
            f"error rate below {ctx.th.error_rate:.0%}" + (f", {float(rps) / ctx.time_scale:.2f} req/s" if pd.notna(rps) else ""))
    else:
        f.evidence.append("no phase with traffic: nothing was loaded, so no limit was seen")
    f.actions = ["raise the load (more users or a higher step) until a limit shows, to find the real capacity"]
    return f


def _closest(findings: list[Finding], ctx: Context) -> Finding:
    judged = [f for f in findings if not f.unjudged]
    best = max(judged, key=lambda f: f.score, default=None)
    if best is None or best.score <= 0:
        f = Finding("outside-engine")
        f.evidence = ["a limit was reached but no measured layer explains it "
                      "(the engine's, GPU's and host's metrics show no saturation, or were not scraped)"]
        f.actions = ["scrape the engine's /metrics, the DCGM exporter and node_exporter during the run (--scrape-url)",
                     "time each hop between the client and the engine"]
        return f
    return Finding(best.layer, evidence=["no rule's conditions all held; closest match, low confidence:", *best.evidence],
                   actions=best.actions, score=best.score)
