"""summary.md (fits a CI job summary or a PR comment) and the seeds' one-sentence verdict."""

from __future__ import annotations

from loadline.analysis.report import card, open_loop, sections, trace_section
from loadline.analysis.report import formatting as f
from loadline.analysis.report.recovery_table import RECOVERY_HEADER, RECOVERY_NOTE, recovery_rows
from loadline.analysis.verdict import validity


def _phases_span(phases: list[dict]) -> float:
    starts = [p["start_wall"] for p in phases if not f.missing(p.get("start_wall"))]
    ends = [p["end_wall"] for p in phases if not f.missing(p.get("end_wall"))]
    return (max(ends) - min(starts)) if starts and ends else float("nan")


def _clause(c: dict) -> str:
    name, threshold, measured, where = c["name"], c["threshold"], c.get("measured"), c.get("where") or "the run"
    if name == "error rate":
        if not measured:
            return "no failures"
        return (
            f"error rate {f.pct(measured)} stayed within {threshold[3:]}"
            if c["passed"]
            else f"error rate reached {f.pct(measured)} in {where}"
        )
    if name == validity.COMPLETION:
        return c.get("why") or "the run did not end on its own"
    if name == "OOM restarts":
        return "no OOM restarts" if not measured else f"{f.num(measured)} OOM restart(s) (limit {threshold})"
    if c.get("unit") == "fraction":
        floor = threshold.startswith(">=")  # a share that must stay high (arrival rate offered), not low
        if c["passed"]:
            return f"{name} stayed {threshold} ({'lowest' if floor else 'peak'} {f.pct(measured)})"
        return f"{name} {'fell to' if floor else 'reached'} {f.pct(measured)} on {where} (limit {threshold})"
    value = f"{f.num(measured)} {c.get('unit', 'ms')}"
    if c.get("unit") == "req/s":
        return (
            f"throughput within SLO held {threshold} ({value})"
            if c["passed"]
            else f"throughput within SLO reached only {value} ({threshold} needed)"
        )
    if c["passed"]:
        return f"{name} stayed at or under {threshold.removeprefix('<= ')} (worst {value})"
    return f"{name} reached {value} in {where} (limit {threshold})"


def verdict_sentence(verdict: dict) -> str:
    validity = verdict.get("validity") or {}
    if validity.get("usable") is False:  # no capacity sentence from a run that never reached the engine
        return f"UNUSABLE RUN: {validity.get('reason')}."
    phases = verdict.get("phases") or []
    requests = sum(int(p[key]) for p in phases for key in ("requests", "after_window") if not f.missing(p.get(key)))
    head = sections.headline(verdict)  # PASS, FAIL, INCOMPLETE, STOPPED BY USER or INTERRUPTED (by SIGTERM/SIGINT)
    criteria = verdict["slo"]["criteria"]
    clauses = [_clause(c) for c in criteria if c.get("passed") is not None]
    unmeasured = [c["name"] for c in criteria if c.get("passed") is None]
    tail = f" (not measured: {', '.join(unmeasured)})" if unmeasured else ""
    if head == "INCOMPLETE":
        tail += (
            f"; {', '.join(verdict['slo']['unjudged'])} applies to this run but had no data, so it cannot "
            f'pass (an SLO file setting it to "none" gates without it)'
        )
    span = _phases_span(phases)  # the phase table is model time, like every other number
    return (
        f"{head}: in a {f.duration(span)} test ({len(phases)} phase{'s' * (len(phases) != 1)}, "
        f"{requests:,} requests), " + ", ".join(clauses) + tail + "."
    )


def _table(rows: list[list[str]], header: list[str]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in rows]
    return lines


def _validity(verdict: dict) -> list[str]:
    lines = ["", "### Is this run valid?", "", sections.validity_status(verdict)]
    setup = sections.setup_rows(verdict)
    if setup:
        lines += [""] + _table(setup, sections.SETUP_HEADER)
    floor = sections.floor_rows(verdict)
    if floor:
        lines += [""] + _table(floor, sections.FLOOR_HEADER)
    note = sections.floor_note(verdict)
    return lines + (["", note] if note else [])


def _time_split(verdict: dict) -> list[str]:
    lines = ["", "### Where the time goes", ""]
    rows = sections.split_rows(verdict)
    if rows:
        lines += _table(rows, sections.SPLIT_HEADER) + [""]
    return lines + [sections.split_note(verdict)]


def _answer(verdict: dict) -> list[str]:
    """The first screen: the capacity card, the limiting layer's evidence, what to do next."""
    lines = ["", "### The answer", ""] + _table([[label, value] for label, value in card.rows(verdict)], ["", ""])
    evidence = card.evidence(verdict)
    if evidence:
        lines += ["", "Evidence, strongest first:"] + [f"- {e}" for e in evidence]
    steps = card.next_steps(verdict)
    if steps:
        lines += ["", "What to do next:"] + [f"- {s}" for s in steps]
    return lines


def render_markdown(verdict: dict) -> str:
    slo = verdict["slo"]
    lines = [
        f"## Loadline report: {sections.headline(verdict)} - {verdict.get('name', '')}",
        "",
        f"> {verdict['sentence']}",
    ]
    lines += _answer(verdict)
    lines += _validity(verdict) + ["", "### SLO gate", ""]
    rows = [
        [
            c["name"],
            c["threshold"],
            f.measured(c),
            c.get("where") or "-",
            {True: "pass", False: "**FAIL**", None: "not measured"}[c["passed"]],
            c.get("why") or "-",
        ]
        for c in slo["criteria"]
    ]
    lines += _table(rows, ["criterion", "threshold", "measured", "where", "result", "why it applies"]) + [""]
    lines += [f"- Not applied: {n['name']} ({n['why']})" for n in slo.get("not_applied") or []]
    lines += _time_split(verdict)
    if open_loop.rows(verdict):
        lines += ["", "### Open loop (arrival rate)", ""] + _table(open_loop.rows(verdict), open_loop.HEADER)
        lines += ["", open_loop.NOTE]
    if trace_section.summary_rows(verdict):
        lines += ["", "### Trace replay", ""] + _table(
            trace_section.summary_rows(verdict), trace_section.SUMMARY_HEADER
        )
        lines += [""] + _table(trace_section.rate_rows(verdict), trace_section.RATE_HEADER)
        lines += ["", trace_section.NOTE]
    lines += ["", "### Phases", ""]
    columns = f.phase_columns(verdict.get("phases", []))
    rows = [[fmt(p.get(key)) for _, key, fmt in columns] for p in verdict.get("phases", [])]
    lines += _table(rows, [title for title, _, _ in columns])
    source = verdict.get("percentile_source", "raw samples")
    lines += [
        "",
        f"Latencies in ms; percentiles from {source}"
        + (" of ok requests (linear interpolation)." if source == "raw samples" else "."),
    ]
    errors = verdict.get("error_classes") or []
    classes = sorted({k for r in errors for k in r if k not in ("phase_index", "label")})
    if classes:
        lines += ["", "### Errors by class", ""]
        lines += _table(
            [[str(r["label"])] + [f.num(r.get(c, 0)) for c in classes] for r in errors], ["phase"] + classes
        )
    if sections.length_rows(verdict):
        lines += ["", "### Lengths in tokens", ""] + _table(sections.length_rows(verdict), sections.LENGTH_HEADER)
        lines += ["", sections.LENGTH_NOTE]
    entries = verdict.get("recovery") or []
    if entries:
        lines += ["", "### Recovery", ""] + _table(recovery_rows(entries), RECOVERY_HEADER)
        lines += ["", RECOVERY_NOTE.format(window=f.num(entries[0]["window_s"]), hold=f.num(entries[0]["hold_s"]))]
    for note in verdict.get("notes") or []:
        lines += ["", f"Note: {note}."]
    if verdict.get("workers"):  # lost workers, worker errors, clock offsets (analysis/report/workers.py)
        lines += ["", "### Workers", ""] + [f"- {line}" for line in verdict["workers"]]
    if verdict.get("missing"):
        lines += ["", "Missing inputs: " + "; ".join(verdict["missing"])]
    return "\n".join(lines) + "\n"
