"""A limit no layer explains: the closest match, or `unidentified` with what would explain it.

When a limit was reached (a failed SLO criterion, errors, a latency rise) but no layer's defining
signals all held, the bottleneck verdict (analysis/verdict/bottleneck.py) names the rule that came
nearest, at low confidence, or says `unidentified` with the evidence it does have: the failed
requests by class and what that class points at, an SLO already failed at the lightest load (each
request's own latency, split by the engine's histograms), and which exporters were not scraped.
"""

from __future__ import annotations

from loadline.analysis.verdict.context import Context, Window
from loadline.analysis.verdict.reading import Reading
from loadline.analysis.verdict.rules import Finding
from loadline.analysis.verdict.timesplit import phase_split
from loadline.core.records import ErrorClass, Status

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


def failures_only(ctx: Context, limited: list[Window], readings: dict[int, Reading]) -> bool:
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


def unexplained(ctx: Context, window_findings: list[Finding], reasons: list[str]) -> Finding:
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
