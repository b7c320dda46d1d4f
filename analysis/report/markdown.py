"""summary.md (fits a CI job summary or a PR comment) and the seeds' one-sentence verdict."""

from __future__ import annotations

from analysis.report import formatting as f
from analysis.stats.recovery import RECOVERY_HEADER, RECOVERY_NOTE, recovery_rows


def _phases_span(phases: list[dict]) -> float:
    starts = [p["start_wall"] for p in phases if not f.missing(p.get("start_wall"))]
    ends = [p["end_wall"] for p in phases if not f.missing(p.get("end_wall"))]
    return (max(ends) - min(starts)) if starts and ends else float("nan")


def _clause(c: dict) -> str:
    name, threshold, measured, where = c["name"], c["threshold"], c.get("measured"), c.get("where") or "the run"
    if name == "error rate":
        if not measured:
            return "no failures"
        return f"error rate {f.pct(measured)} stayed within {threshold[3:]}" if c["passed"] else f"error rate reached {f.pct(measured)} in {where}"
    if name == "OOM restarts":
        return "no OOM restarts" if not measured else f"{f.num(measured)} OOM restart(s) (limit {threshold})"
    if c.get("unit") == "fraction":
        return f"{name} stayed {threshold} (peak {f.pct(measured)})" if c["passed"] else f"{name} reached {f.pct(measured)} on {where} (limit {threshold})"
    value = f"{f.num(measured)} {c.get('unit', 'ms')}"
    if c.get("unit") == "req/s":
        return f"throughput within SLO held {threshold} ({value})" if c["passed"] else f"throughput within SLO reached only {value} ({threshold} needed)"
    if c["passed"]:
        return f"{name} stayed under {threshold[2:]} (worst {value})"
    return f"{name} reached {value} in {where} (limit {threshold})"


def verdict_sentence(verdict: dict) -> str:
    phases = verdict.get("phases") or []
    requests = sum(int(p["requests"]) for p in phases if not f.missing(p.get("requests")))
    head = "PASS" if verdict["slo"]["passed"] else "FAIL"
    criteria = verdict["slo"]["criteria"]
    clauses = [_clause(c) for c in criteria if c.get("passed") is not None]
    unmeasured = [c["name"] for c in criteria if c.get("passed") is None]
    tail = f" (not measured: {', '.join(unmeasured)})" if unmeasured else ""
    span = _phases_span(phases) * verdict.get("time_scale", 1.0)  # model time, like every other number
    return (f"{head}: in a {f.duration(span)} test ({len(phases)} phase{'s' * (len(phases) != 1)}, "
            f"{requests:,} requests), " + ", ".join(clauses) + tail + ".")


def _table(rows: list[list[str]], header: list[str]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in rows]
    return lines


def render_markdown(verdict: dict) -> str:
    slo = verdict["slo"]
    lines = [f"## Loadline report: {'PASS' if slo['passed'] else 'FAIL'} - {verdict.get('name', '')}", "",
             f"> {verdict['sentence']}", ""]
    rows = [[c["name"], c["threshold"], f.measured(c), c.get("where") or "-",
             {True: "pass", False: "**FAIL**", None: "not measured"}[c["passed"]]] for c in slo["criteria"]]
    lines += _table(rows, ["criterion", "threshold", "measured", "where", "result"]) + [""]
    lines += [f"- {f.point(verdict['knee'], 'Knee')}",
              f"- {f.point(verdict['break_point'], 'Break point')}",
              f"- {f.point(verdict['max_slo_throughput'], 'Max SLO-compliant throughput')}"]
    safe = verdict["safe_operating_point"]
    if safe.get("found"):
        lines.append(f"- Safe operating point: {f.span(safe['rps'], 'req/s')}"
                     + (f", about {f.span(safe['users'], 'users')}" if safe.get("users") else "") + f" ({safe['reason']})")
    bottleneck = verdict.get("bottleneck") or {}
    if bottleneck.get("layer"):
        evidence = (bottleneck.get("evidence") or [""])[0]
        lines.append(f"- Bottleneck: **{bottleneck['layer']}**" + (f" - {evidence}" if evidence else ""))
    elif bottleneck.get("error"):
        lines.append(f"- Bottleneck: not judged ({bottleneck['error']})")
    lines += ["", "### Phases", ""]
    rows = [[fmt(p.get(key)) for _, key, fmt in f.PHASE_COLUMNS] for p in verdict.get("phases", [])]
    lines += _table(rows, [title for title, _, _ in f.PHASE_COLUMNS])
    source = verdict.get("percentile_source", "raw samples")
    lines += ["", f"Latencies in ms; percentiles from {source}"
              + (" of ok requests (linear interpolation)." if source == "raw samples" else ".")]
    errors = verdict.get("error_classes") or []
    classes = sorted({k for r in errors for k in r if k not in ("phase_index", "label")})
    if classes:
        lines += ["", "### Errors by class", ""]
        lines += _table([[str(r["label"])] + [f.num(r.get(c, 0)) for c in classes] for r in errors], ["phase"] + classes)
    entries = verdict.get("recovery") or []
    if entries:
        lines += ["", "### Recovery", ""] + _table(recovery_rows(entries), RECOVERY_HEADER)
        lines += ["", RECOVERY_NOTE.format(window=f.num(entries[0]["window_s"]), hold=f.num(entries[0]["hold_s"]))]
    for note in verdict.get("notes") or []:
        lines += ["", f"Note: {note}."]
    if verdict.get("missing"):
        lines += ["", "Missing inputs: " + "; ".join(verdict["missing"])]
    return "\n".join(lines) + "\n"
