"""What the report says about validity, the time split and the bottleneck line, as plain text and rows.

Both renderers (markdown.py, html.py) draw these; keeping the words here means summary.md and
report.html never disagree, and the one rule that matters most lives in one place: `headroom` is
never printed beside a failed SLO criterion without the reason (`bottleneck_line`).
"""

from __future__ import annotations

from loadline.analysis.report import formatting as f
from loadline.analysis.verdict import validity
from loadline.analysis.verdict.answer import layer_name
from loadline.core.answer import Answer, Status

SETUP_HEADER = ["HTTP status", "content type", "attempts", "body sample (redacted)"]
FLOOR_HEADER = ["phase", "measured from", "samples", "P50 (wall ms)", "P95 (wall ms)", "floor (model ms)"]
SPLIT_HEADER = [
    "phase",
    "requests",
    "client TTFT",
    "outside",
    "queue",
    "prefill",
    "engine other",
    "client E2E",
    "outside",
    "queue",
    "prefill",
    "decode",
    "engine other",
    "outside share",
]


def validity_status(verdict: dict) -> str:
    """One line: usable or not, trustworthy or not."""
    v = verdict.get("validity") or {}
    if not v:
        return "Validity: not assessed."
    if v.get("usable") is False:
        return f"UNUSABLE RUN: {v.get('reason')}. No capacity statement can be made from it."
    if v.get("error"):
        return f"Validity: not assessed ({v['error']})."
    findings = v.get("findings") or []
    doubts = [x["message"] for x in findings if x.get("severity") == "untrustworthy"]
    # notes do not lower trust (a lag whose cost the truth log measured, a rested first-bytes watch),
    # but a reader of the status line must not be told the generator kept up when it did not
    notes = [x for x in findings if x.get("severity") == "note"]
    noted = (" Noted: " + "; ".join(x["message"] for x in notes) + ".") if notes else ""
    if doubts:
        return "Valid; trust: doubtful: " + "; ".join(doubts) + "." + noted
    floor = (v.get("floor") or {}).get("floor_model_ms")
    tail = f" (client measurement floor {f.num(floor)} ms in model time)" if floor is not None else ""
    kept = "" if any(x.get("kind") == "generator-behind" for x in notes) else ", the generator kept up"
    return "Valid: requests reached the engine" + kept + tail + "." + noted


def setup_rows(verdict: dict) -> list[list[str]]:
    setup = (verdict.get("validity") or {}).get("setup_failure")
    if not setup:
        return []
    rows = [[status, "", f.num(n), ""] for status, n in (setup.get("statuses") or {}).items()]
    for row in rows:  # the example the reason quotes carries the content type and the body
        if row[0] == str(setup.get("http_status")):
            row[1], row[3] = str(setup.get("content_type") or ""), str(setup.get("body_sample") or "")
    return rows


def floor_rows(verdict: dict) -> list[list[str]]:
    floor = (verdict.get("validity") or {}).get("floor") or {}
    return [
        [
            str(r["phase"]),
            str(r.get("measure", "")),
            f.num(r.get("samples")),
            f.num(r.get("p50_ms")),
            f.num(r.get("p95_ms")),
            f.num(r.get("floor_model_ms")),
        ]
        for r in floor.get("phases") or []
    ]


def floor_note(verdict: dict) -> str:
    floor = (verdict.get("validity") or {}).get("floor") or {}
    if not floor.get("method"):
        return str(floor.get("why") or "")
    ttfb = floor.get("ttfb_min_model_ms")
    return (
        f"Measurement floor: {floor['why']}. Floor = P95 per phase, x{f.num(floor.get('time_scale', 1))} in model time"
        + (f"; fastest TTFB {f.num(ttfb)} ms (model time)" if ttfb is not None else "")
        + "."
    )


def _part(split: dict | None, key: str) -> str:
    return "-" if not split else f.num(split.get(key))


def split_rows(verdict: dict) -> list[list[str]]:
    ts = verdict.get("time_split") or {}
    entries = [(p["phase"], p) for p in ts.get("phases") or []]
    if ts.get("run") and len(entries) != 1:  # one phase: its row is the whole run
        entries.append(("whole run", ts["run"]))
    rows = []
    for label, entry in entries:
        ttft, e2e = entry.get("ttft"), entry.get("e2e")
        share = (ttft or e2e or {}).get("outside_share")
        rows.append(
            [
                str(label),
                f.num(entry.get("client_requests")),
                _part(ttft, "client_ms"),
                _part(ttft, "outside_ms"),
                _part(ttft, "queue_ms"),
                _part(ttft, "prefill_ms"),
                _part(ttft, "engine_other_ms"),
                _part(e2e, "client_ms"),
                _part(e2e, "outside_ms"),
                _part(e2e, "queue_ms"),
                _part(e2e, "prefill_ms"),
                _part(e2e, "decode_ms"),
                _part(e2e, "engine_other_ms"),
                f.pct(share),
            ]
        )
    return rows


def split_note(verdict: dict) -> str:
    ts = verdict.get("time_split") or {}
    if not ts.get("available"):
        return "Not available: " + str(ts.get("why") or ts.get("error") or "no engine histograms")
    caveat = f" Note: {ts['caveat']}." if ts.get("caveat") else ""
    return (
        f"Means in model ms ({ts.get('method', '')}); outside = client - engine (network, gateway, proxy, "
        "auth, the client itself); engine other = the engine's time outside queue, prefill and decode." + caveat
    )


def _failed(verdict: dict) -> list[dict]:
    return [c for c in (verdict.get("slo") or {}).get("criteria") or [] if c.get("passed") is False]


def _headroom_reason(verdict: dict, failed: list[dict]) -> str:
    """Why the SLO failed although no capacity limit was seen, from what the run measured."""
    bottleneck = verdict.get("bottleneck") or {}
    for key in ("slo_reason", "headroom_reason"):  # the verdict's own words, when it gives them
        if bottleneck.get(key):
            return str(bottleneck[key])
    validity = verdict.get("validity") or {}
    split = verdict.get("time_split") or {}
    names = ", ".join(
        f"{c['name']} {f.measured(c)} {c.get('unit', '')} (limit {c['threshold']}) in {c.get('where') or 'the run'}"
        for c in failed
    )
    if split.get("dominant") == "outside-engine":
        why = split["sentence"]
    elif any(x.get("kind") == "measurement-floor" for x in validity.get("findings") or []):
        why = "the client's own measurement floor is a material part of it (see Validity)"
    elif split.get("sentence"):
        why = (
            "no saturation signal: this is the latency each request pays at this load, not a capacity limit; "
            + split["sentence"]
        )
    else:
        why = "no saturation signal: this is the latency each request pays at this load, not a capacity limit"
    return f"the SLO failed on {names}: {why}"


def bottleneck_line(verdict: dict) -> str:
    """'layer (confidence) - first evidence', with the reason whenever headroom sits beside a failed SLO."""
    bottleneck = verdict.get("bottleneck") or {}
    layer = layer_name(bottleneck)  # as this engine has it: compute on a CPU engine is not gpu-compute
    if not layer:
        reason = "; ".join(bottleneck.get("not_judged") or []) or bottleneck.get("error") or "no verdict"
        return f"not judged ({reason})"
    confidence = f" (confidence {bottleneck['confidence']})" if bottleneck.get("confidence") else ""
    evidence = (bottleneck.get("evidence") or [""])[0]
    line = f"{layer}{confidence}" + (f" - {evidence}" if evidence else "")
    if bottleneck.get("sentence"):  # the verdict's own on-call sentence: layer, where, deciding numbers, first action
        line = f"{layer}{confidence} - {bottleneck['sentence']}"
    if layer != bottleneck.get("layer"):  # renamed for the engine: the verdict's own words follow
        line = line.replace(str(bottleneck["layer"]), layer)
    failed = _failed(verdict)
    split = verdict.get("time_split") or {}
    if layer == "headroom" and failed:
        line = f"headroom (no capacity limit reached){confidence}, but {_headroom_reason(verdict, failed)}"
    elif layer == "headroom" and split.get("dominant") == "outside-engine":
        # the engine had room, yet most of the user's wait was spent before it: said on the same line
        line = f"headroom in the engine{confidence}, but most of the wait is outside it - {split['sentence']}"
    return line


def time_line(verdict: dict) -> str:
    """'Where the time goes' in one line (outside-engine is named even when no limit was reached)."""
    ts = verdict.get("time_split") or {}
    return str(ts.get("sentence") or "")


def interruption(verdict: dict) -> dict | None:
    """The failed "run completed" criterion of a run that did not end on its own (validity.completion), or None."""
    return next(
        (
            c
            for c in (verdict.get("slo") or {}).get("criteria") or []
            if c.get("name") == validity.COMPLETION and c.get("passed") is False
        ),
        None,
    )


def headline(verdict: dict) -> str:
    """The answer's headline (loadline/core/answer.py): PASS, FAIL, INCOMPLETE, INTERRUPTED (by the
    signal, when known), STOPPED BY USER or UNUSABLE, with ", NOT TRUSTED" when the rig decided it."""
    answer = Answer.from_dict(verdict["answer"])
    by = (verdict.get("manifest") or {}).get("interrupted_by")
    if answer.status is Status.INTERRUPTED and by:
        return answer.headline.replace(Status.INTERRUPTED.headline, f"INTERRUPTED by {by}", 1)
    return answer.headline


LENGTH_HEADER = [
    "phase",
    "ok requests",
    "counted by",
    "prompt asked p50",
    "prompt got p50",
    "prompt exact",
    "reply asked p50",
    "reply got p50",
    "reply exact",
]
LENGTH_NOTE = (
    "Tokens as the server counted them (usage) beside what Loadline asked for: prompts built to a length "
    "in the target's tokens (counted by hf: `loadline run -- --tokenizer`, server: its /tokenize, "
    "calibrated: from usage), replies asked as max_tokens (exact with `loadline run -- --ignore-eos`)."
)


def length_rows(verdict: dict) -> list[list[str]]:
    """The requested-vs-achieved lengths per phase (analysis/stats/lengths.py), or none (older folders)."""
    return [
        [
            str(r["label"]),
            f.num(r.get("requests")),
            str(r.get("counter") or "-"),
            f.num(r.get("prompt_asked_p50")),
            f.num(r.get("prompt_got_p50")),
            f.pct(r.get("prompt_exact_share")),
            f.num(r.get("reply_asked_p50")),
            f.num(r.get("reply_got_p50")),
            f.pct(r.get("reply_exact_share")),
        ]
        for r in verdict.get("lengths") or []
        if r.get("requests")
    ]
