"""report.html: one self-contained page (inline CSS, charts as base64 PNG, no external resource)."""

from __future__ import annotations

import base64
import json
from html import escape
from pathlib import Path

from loadline.analysis.report import formatting as f
from loadline.analysis.report import open_loop, sections
from loadline.analysis.stats.recovery import RECOVERY_HEADER, RECOVERY_NOTE, recovery_rows

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{margin-bottom:.2em}.verdict{padding:.8em 1em;border-radius:6px;font-size:1.05em;margin:1em 0}
.pass{background:#e6f4ea;border:1px solid #34a853}.fail{background:#fce8e6;border:1px solid #d93025}
table{border-collapse:collapse;margin:.5em 0 1.2em;font-size:.88em}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}
td:first-child,th:first-child{text-align:left}th{background:#f3f3f3}.bad{color:#d93025;font-weight:bold}
img{max-width:100%;border:1px solid #eee;margin:.4em 0}dt{font-weight:bold}dd{margin:0 0 .4em 1.5em}
table.left td{text-align:left}.muted{color:#666;font-size:.9em}pre{background:#f7f7f7;padding:.6em;overflow-x:auto;font-size:.85em}
"""


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _criteria(verdict: dict) -> str:
    rows = []
    for c in verdict["slo"]["criteria"]:
        result = {True: "pass", False: '<span class="bad">FAIL</span>', None: "not measured"}[c["passed"]]
        rows.append([escape(c["name"]), escape(c["threshold"]), escape(f.measured(c)),
                     escape(c.get("where") or "-"), result, escape(c.get("why") or "-")])
    skipped = "".join(f"<li>Not applied: {escape(n['name'])} ({escape(n['why'])})</li>"
                      for n in verdict["slo"].get("not_applied") or [])
    return (_table(["criterion", "threshold", "measured", "where", "result", "why it applies"], rows)
            + (f"<ul>{skipped}</ul>" if skipped else ""))


def _limits(verdict: dict) -> str:
    items = [f.point(verdict["knee"], "Knee"), f.point(verdict["break_point"], "Break point"),
             f.point(verdict["max_slo_throughput"], "Max SLO-compliant throughput")]
    safe = verdict["safe_operating_point"]
    if safe.get("found") or safe.get("none"):
        items.append(f.safe_point(safe))
    method = verdict["knee"].get("method")
    extra = f'<p class="muted">Knee method: {escape(method)}.</p>' if method else ""
    return "<ul>" + "".join(f"<li>{escape(i)}</li>" for i in items) + "</ul>" + extra


def _mapping(data: dict) -> str:
    """A generic, readable rendering of another part's dict (bottleneck verdict, capacity plan)."""
    if not data:
        return "<p class='muted'>not available</p>"
    parts = []
    for key, value in data.items():
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            inner = "".join(f"<li>{escape(v)}</li>" for v in value) or "<li>-</li>"
            parts.append(f"<dt>{escape(str(key))}</dt><dd><ul>{inner}</ul></dd>")
        elif isinstance(value, (dict, list)):
            parts.append(f"<dt>{escape(str(key))}</dt><dd><pre>{escape(json.dumps(value, indent=1, default=str))}</pre></dd>")
        else:
            parts.append(f"<dt>{escape(str(key))}</dt><dd>{escape(str(value))}</dd>")
    return "<dl>" + "".join(parts) + "</dl>"


def _phases(verdict: dict) -> str:
    rows = [[escape(fmt(p.get(key))) for _, key, fmt in f.PHASE_COLUMNS] for p in verdict.get("phases", [])]
    return _table([t for t, _, _ in f.PHASE_COLUMNS], rows) + "<p class='muted'>Latencies in ms.</p>"


def _open_loop(verdict: dict) -> list[str]:
    rows = open_loop.rows(verdict)
    if not rows:
        return []
    return ["<h2>Open loop (arrival rate)</h2>", _table(open_loop.HEADER, [[escape(c) for c in r] for r in rows])
            + f"<p class='muted'>{escape(open_loop.NOTE)}</p>"]


def _errors(verdict: dict) -> str:
    rows = verdict.get("error_classes") or []
    classes = sorted({k for r in rows for k in r if k not in ("phase_index", "label")})
    if not classes:
        return "<p>No errors.</p>"
    return _table(["phase"] + classes, [[escape(str(r["label"]))] + [f.num(r.get(c, 0)) for c in classes] for r in rows])


def _lengths(verdict: dict) -> list[str]:
    rows = sections.length_rows(verdict)
    if not rows:
        return []
    return ["<h2>Lengths in tokens</h2>", _table(sections.LENGTH_HEADER, [[escape(c) for c in r] for r in rows])
            + f"<p class='muted'>{escape(sections.LENGTH_NOTE)}</p>"]


def _recovery(verdict: dict) -> list[str]:
    entries = verdict.get("recovery") or []
    if not entries:
        return []
    rows = [[escape(cell) for cell in row] for row in recovery_rows(entries)]
    note = RECOVERY_NOTE.format(window=f.num(entries[0]["window_s"]), hold=f.num(entries[0]["hold_s"]))
    return ["<h2>Recovery</h2>", _table(RECOVERY_HEADER, rows), f"<p class='muted'>{escape(note)}</p>"]


_TESTED = (("run", "run_id"), ("target", "target"), ("shape", "shape"), ("users", "user_classes"),
           ("runner", "runner"), ("workers", "workers"), ("started", "started_at_iso"), ("status", "status"),
           ("stop reason", "stop_reason"), ("git revision", "git_revision"))


def _tested(verdict: dict) -> str:
    manifest = verdict.get("manifest") or {}
    rows = []
    for title, key in _TESTED:
        value = manifest.get(key)
        if value not in (None, "", [], {}):
            text = ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
            rows.append([escape(title), escape(text)])
    options = manifest.get("options") or {}
    for key in ("locustfile", "prompt_mix", "time_scale", "seed"):
        if options.get(key) not in (None, ""):
            rows.append([escape(key.replace("_", " ")), escape(str(options[key]))])
    rows.append(["run folder", escape(verdict["run"])])
    return _table(["what", "value"], rows).replace("<table>", "<table class='left'>")


def _image(path: Path) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f'<figure><img alt="{escape(Path(path).stem)}" src="data:image/png;base64,{data}"></figure>'


def _validity(verdict: dict) -> str:
    status = sections.validity_status(verdict)
    usable = (verdict.get("validity") or {}).get("usable") is not False
    parts = [f"<p class='{'' if usable else 'verdict fail'}'>{escape(status)}</p>"]
    setup = sections.setup_rows(verdict)
    if setup:
        parts.append(_table(sections.SETUP_HEADER, [[escape(c) for c in row] for row in setup]))
    floor = sections.floor_rows(verdict)
    if floor:
        parts.append(_table(sections.FLOOR_HEADER, [[escape(c) for c in row] for row in floor]))
    note = sections.floor_note(verdict)
    return "".join(parts) + (f"<p class='muted'>{escape(note)}</p>" if note else "")


def _time_split(verdict: dict) -> str:
    line = sections.time_line(verdict)
    rows = sections.split_rows(verdict)
    table = _table(sections.SPLIT_HEADER, [[escape(c) for c in row] for row in rows]) if rows else ""
    return ((f"<p><b>{escape(line)}</b></p>" if line else "") + table
            + f"<p class='muted'>{escape(sections.split_note(verdict))}</p>")


def _bottleneck(verdict: dict) -> str:
    """The headline line (with the reason whenever headroom sits beside a failed SLO), then the details."""
    return f"<p><b>{escape(sections.bottleneck_line(verdict))}</b></p>" + _mapping(verdict.get("bottleneck") or {})


def render_html(verdict: dict, chart_paths: list[Path]) -> str:
    passed = verdict.get("exit_code") == 0  # not INCOMPLETE, INTERRUPTED or UNUSABLE either
    body = [
        f"<h1>Loadline report: {escape(str(verdict.get('name', '')))}</h1>",
        f"<div class='verdict {'pass' if passed else 'fail'}'>{escape(verdict['sentence'])}</div>",
        "".join(f"<p class='muted'>Note: {escape(n)}.</p>" for n in verdict.get("notes") or []),
        "<h2>Is this run valid?</h2>", _validity(verdict),
        "<h2>What was tested</h2>", _tested(verdict),
        "<h2>Where the limit is</h2>", _limits(verdict),
        "<h2>SLO gate</h2>", _criteria(verdict),
        "<h2>Bottleneck</h2>", _bottleneck(verdict),
        "<h2>Where the time goes</h2>", _time_split(verdict),
        "<h2>Capacity plan</h2>", _mapping(verdict.get("capacity") or {}),
        *_open_loop(verdict),
        "<h2>Phases</h2>", _phases(verdict),
        "<h2>Errors by class</h2>", _errors(verdict),
        *_lengths(verdict),
        *_recovery(verdict),
        "<h2>Charts</h2>", "".join(_image(p) for p in chart_paths) or "<p>No charts.</p>",
    ]
    if verdict.get("chart_problems"):
        body.append("<p class='muted'>" + escape("; ".join(verdict["chart_problems"])) + "</p>")
    body += ["<h2>Definitions</h2>", "<dl>" + "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in f.DEFINITIONS.items()) + "</dl>"]
    if verdict.get("workers"):  # lost workers, worker errors, clock offsets (analysis/report/workers.py)
        body += ["<h2>Workers</h2>", "<ul>" + "".join(f"<li>{escape(w)}</li>" for w in verdict["workers"]) + "</ul>"]
    if verdict.get("missing"):
        body += ["<h2>Missing inputs</h2>", "<ul>" + "".join(f"<li>{escape(m)}</li>" for m in verdict["missing"]) + "</ul>"]
    title = escape(f"Loadline report - {verdict.get('name', '')}")
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{title}</title>"
            f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>\n")
