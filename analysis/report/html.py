"""report.html from its template (templates/report.html, Jinja2 with autoescape): one self-contained
page, inline CSS, charts as base64 PNG, no external resource.

This module only gathers what the template shows: the answer's card (card.py) first, then charts,
then the details. Every value is text; the template escapes it.
"""

from __future__ import annotations

import base64
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from loadline.analysis.report import card, open_loop, sections, trace_section
from loadline.analysis.report import formatting as f
from loadline.analysis.report.recovery_table import RECOVERY_HEADER, RECOVERY_NOTE, recovery_rows
from loadline.core.answer import Status, Trust

_TEMPLATES = Environment(
    loader=PackageLoader("loadline.analysis.report", "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
_FAIL = Markup('<span class="bad">FAIL</span>')


def _criteria(verdict: dict) -> list[list[object]]:
    return [
        [
            c["name"],
            c["threshold"],
            f.measured(c),
            c.get("where") or "-",
            {True: "pass", False: _FAIL, None: "not measured"}[c["passed"]],
            c.get("why") or "-",
        ]
        for c in verdict["slo"]["criteria"]
    ]


_TESTED = (
    ("run", "run_id"),
    ("target", "target"),
    ("shape", "shape"),
    ("users", "user_classes"),
    ("runner", "runner"),
    ("workers", "workers"),
    ("started", "started_at_iso"),
    ("status", "status"),
    ("ended by", "ended_by"),
    ("stop reason", "stop_reason"),
    ("git revision", "git_revision"),
)


def _tested(verdict: dict) -> list[list[str]]:
    manifest = verdict.get("manifest") or {}
    rows = []
    for title, key in _TESTED:
        value = manifest.get(key)
        if value not in (None, "", [], {}):
            text = ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
            if key == "stop_reason":  # read live: the same window as the report's, minus replies not ended then
                text += (
                    " (the live stop rule's reading when the step ended, on the window the report judges; "
                    "replies still running then are in the report's figures only)"
                )
            rows.append([title, text])
    options = manifest.get("options") or {}
    for key in ("locustfile", "prompt_mix", "time_scale", "seed"):
        if options.get(key) not in (None, ""):
            rows.append([key.replace("_", " "), str(options[key])])
    rows.append(["run folder", str(verdict["run"])])
    return rows


def _chart(path: Path) -> dict:
    return {"name": Path(path).stem, "data": base64.b64encode(Path(path).read_bytes()).decode("ascii")}


def _plan_lines(verdict: dict) -> list[str]:
    answer = card.answer_of(verdict)
    if answer.per_replica_rps is None:
        return []
    lines = [f"Per replica: {answer.per_replica_rps:.3g} req/s ({answer.per_replica_basis})"]
    if answer.replicas is not None:
        lines += [answer.replicas.text(), *answer.replicas.steps]
    else:
        lines.append(
            f"no target rate: `loadline plan --target-qps Q --per-replica-qps {answer.per_replica_rps:.3g}` "
            "gives the replicas (or set target_qps in the SLO file)"
        )
    return lines


def _status_class(verdict: dict) -> str:
    answer = card.answer_of(verdict)
    if answer.status is Status.PASS:
        return "pass" if answer.trust is not Trust.UNTRUSTED else "warn"
    return "fail"


def render_html(verdict: dict, chart_paths: list[Path]) -> str:
    answer = card.answer_of(verdict)
    bottleneck = verdict.get("bottleneck") or {}
    errors = verdict.get("error_classes") or []
    classes = sorted({k for r in errors for k in r if k not in ("phase_index", "label")})
    recovery = verdict.get("recovery") or []
    context = {
        "name": str(verdict.get("name", "")),
        "headline": sections.headline(verdict),
        "reason": answer.reason,
        "sentence": verdict.get("sentence", ""),
        "status_class": _status_class(verdict),
        "card": card.rows(verdict),
        "layer": answer.layer.name,
        "evidence": card.evidence(verdict),
        "not_judged": answer.layer.not_judged,
        "next_steps": card.next_steps(verdict),
        "notes": verdict.get("notes") or [],
        "charts": [_chart(p) for p in chart_paths],
        "chart_problems": "; ".join(verdict.get("chart_problems") or []),
        "usable": (verdict.get("validity") or {}).get("usable") is not False,
        "validity_status": sections.validity_status(verdict),
        "setup_header": sections.SETUP_HEADER,
        "setup_rows": sections.setup_rows(verdict),
        "floor_header": sections.FLOOR_HEADER,
        "floor_rows": sections.floor_rows(verdict),
        "floor_note": sections.floor_note(verdict),
        "tested": _tested(verdict),
        "criteria": _criteria(verdict),
        "not_applied": [f"{n['name']} ({n['why']})" for n in verdict["slo"].get("not_applied") or []],
        "knee_method": f"Knee method: {verdict['knee']['method']}."
        if (verdict.get("knee") or {}).get("method")
        else "",
        "bottleneck_line": sections.bottleneck_line(verdict),
        "bottleneck_evidence": list(bottleneck.get("evidence") or [])[1:],  # [0] is the line above
        "actions": list(bottleneck.get("actions") or []),
        "secondary": [
            f"{s.get('layer')} in {s.get('window')}: " + "; ".join(s.get("evidence") or [])
            for s in bottleneck.get("secondary") or []
        ],
        "bottleneck_not_judged": "; ".join(bottleneck.get("not_judged") or []),
        "time_line": sections.time_line(verdict),
        "split_header": sections.SPLIT_HEADER,
        "split_rows": sections.split_rows(verdict),
        "split_note": sections.split_note(verdict),
        "plan_lines": _plan_lines(verdict),
        "plan_note": "no plan: no load met the SLO",
        "open_loop_header": open_loop.HEADER,
        "open_loop_rows": open_loop.rows(verdict),
        "open_loop_note": open_loop.NOTE,
        "trace_summary_header": trace_section.SUMMARY_HEADER,
        "trace_summary_rows": trace_section.summary_rows(verdict),
        "trace_rate_header": trace_section.RATE_HEADER,
        "trace_rate_rows": trace_section.rate_rows(verdict),
        "trace_note": trace_section.NOTE,
        "phase_header": [t for t, _, _ in f.phase_columns(verdict.get("phases", []))],
        "phase_rows": [
            [fmt(p.get(key)) for _, key, fmt in f.phase_columns(verdict.get("phases", []))]
            for p in verdict.get("phases", [])
        ],
        "error_header": ["phase", *classes],
        "error_rows": [[str(r["label"])] + [f.num(r.get(c, 0)) for c in classes] for r in errors] if classes else [],
        "recovery_header": RECOVERY_HEADER,
        "recovery_rows": recovery_rows(recovery) if recovery else [],
        "recovery_note": RECOVERY_NOTE.format(window=f.num(recovery[0]["window_s"]), hold=f.num(recovery[0]["hold_s"]))
        if recovery
        else "",
        "length_header": sections.LENGTH_HEADER,
        "length_rows": sections.length_rows(verdict),
        "length_note": sections.LENGTH_NOTE,
        "definitions": list(f.DEFINITIONS.items()),
        "workers": verdict.get("workers") or [],
        "missing": verdict.get("missing") or [],
    }
    return _TEMPLATES.get_template("report.html").render(**context) + "\n"
