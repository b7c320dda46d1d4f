"""Run folder -> report/: report.html, summary.md, verdict.json, junit.xml and the charts.

`build_report` is what `loadline report` and the end of every `loadline run` call. It is pure in
the sense that it only reads the run folder and writes the report folder; the exit code is the
SLO gate's (0 pass, 1 fail); unusable input raises UsageError (exit 2); a run whose setup failed
(analysis/verdict/validity.py: most requests rejected, or not an event stream) still gets its
report, which says why, with exit code 2 and `verdict["validity"]["reason"]`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from loadline.analysis.verdict import gate

from loadline.analysis.stats import arrivals, knee, recovery
from loadline.analysis.verdict.bottleneck import judge
from loadline.analysis.verdict.capacity import plan_from_run
from loadline.analysis.verdict.faults import explain_by_faults
from loadline.analysis.data.load import RunData, load_run
from loadline.analysis.data.prom_ingest import load_query_range
from loadline.analysis.report.guard import guarded
from loadline.analysis.report.html import render_html
from loadline.analysis.report.markdown import render_markdown, verdict_sentence
from loadline.analysis.report.workers import worker_lines
from loadline.analysis.verdict.server_gate import server_criteria
from loadline.analysis.verdict import validity
from loadline.analysis.verdict.timesplit import time_split
from loadline.analysis.data.truth import read_truth
from loadline.analysis.stats.lengths import length_table
from loadline.analysis.stats.phases import error_classes, phase_table
from loadline.analysis.data.timescale import note as timescale_note
from loadline.analysis.data.timescale import point_to_model, time_scale, to_model_time
from loadline.core.runsettings import streaming_of
from loadline.core import runfolder
from loadline.core.errors import UsageError
from loadline.core.slo import SLO


EXIT_UNUSABLE = 2  # a setup failure (validity): the same code as unusable input


@dataclass
class ReportResult:
    exit_code: int
    summary: str
    verdict: dict
    out_dir: Path | None = None


def clean(value: Any) -> Any:
    """JSON-safe copy: NaN/inf -> None, numpy scalars -> Python, Paths -> str."""
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def _bottleneck(run: RunData, table: pd.DataFrame, criteria: list[dict], floor_model_ms: float | None = None) -> dict:
    fallback = {"layer": None, "evidence": [], "actions": [], "secondary": [], "not_judged": ["bottleneck verdict unavailable"]}
    failed = [c for c in criteria if c.get("passed") is False]  # a failed SLO is a limit: never "headroom"
    return guarded("bottleneck verdict", lambda: judge(run, table, slo_failures=failed,
                                                       measurement_floor_ms=floor_model_ms), fallback)


def _validity(run: RunData, criteria: list[dict], scale: float) -> dict:
    fallback = {"usable": True, "trustworthy": None, "reason": None, "findings": [], "floor": {}, "confidence_steps": 0}
    return guarded("validity", lambda: validity.assess(run.requests, run.phases, run.generator, criteria, scale,
                                                       read_truth(run.path)), fallback)


def unusable_reason(verdict: dict) -> str | None:
    """The one-line reason of a run whose setup failed (exit 2), else None."""
    v = verdict.get("validity") or {}
    return str(v.get("reason")) if v.get("usable") is False else None


def _not_judged(reason: str) -> dict:
    """The bottleneck section of an unusable run: no layer, and why."""
    return {"layer": None, "confidence": None, "evidence": [], "actions": [], "secondary": [],
            "not_judged": [f"unusable run: {reason}"]}


def _capacity(run: RunData, table: pd.DataFrame, knee_point: dict, slo: SLO) -> dict:
    return guarded("capacity plan", lambda: plan_from_run(run, table, knee_point, target_qps=slo.target_qps, slo=slo), {})


def _open_loop(run: RunData, scale: float, slo: SLO) -> dict:
    """Arrival-rate runs: target vs achieved rate, lateness, latency from due (analysis/stats/arrivals.py)."""
    if not run.has_records:
        return {}
    return guarded("open loop", lambda: arrivals.summary(run.requests, run.phases, run.manifest.get("options") or {},
                                                         scale, slo), {})


def _recovery(run: RunData, slo: SLO) -> tuple[list[dict], list[str]]:
    """Surge / fault recovery entries (loadline.analysis.stats.recovery), and why they are missing if they failed."""
    if not run.has_records:
        return [], []
    result = guarded("recovery", lambda: recovery.from_run(run.requests, run.phases, run.manifest, slo, run.faults), {})
    return (result, []) if isinstance(result, list) else ([], [result["error"]])


def merge_prometheus(run: RunData, files: Iterable[str | Path]) -> None:
    files = list(files)
    if not files:
        return
    extra = load_query_range(files)
    frames = [f for f in (run.server_metrics, extra) if f is not None and len(f)]
    if frames:
        run.server_metrics = pd.concat(frames, ignore_index=True)


def _require_outcomes(run: RunData, table: pd.DataFrame) -> None:
    """Nothing to judge is unusable input (exit 2), not a pass."""
    if (table["ok"].fillna(0) + table["errors"].fillna(0)).sum() > 0:
        return
    total = len(run.requests)
    inside = int(table["requests"].fillna(0).sum())
    if run.has_records and inside == 0:
        raise UsageError(f"none of the {total} request records started inside a phase of {runfolder.PHASES} "
                         "(do the clocks of master and workers agree?)")
    raise UsageError(f"empty run: no request completed ({total} attempt(s), all cancelled)")


def _consistency(run: RunData, table: pd.DataFrame) -> list[str]:
    """Records the run wrote but the report does not count, said out loud."""
    notes = []
    outside = len(run.requests) - int(table["requests"].fillna(0).sum()) if run.has_records else 0
    if outside > 0:
        notes.append(f"{outside} request record(s) started outside every phase and are not counted")
    written = run.manifest.get("requests_written")
    if isinstance(written, int) and run.has_records and written > len(run.requests):
        notes.append(f"the manifest says {written} request rows were written, {runfolder.REQUESTS} holds {len(run.requests)}")
    return notes


def analyse(run: RunData, slo: SLO) -> tuple[pd.DataFrame, dict]:
    """The numbers of a report, without writing anything: (phase table in model time, verdict dict)."""
    wall = phase_table(run, slo)
    _require_outcomes(run, wall)
    scale = time_scale(run.manifest)
    table = to_model_time(wall, scale)
    recovered, recovery_problems = _recovery(run, slo)
    streaming = streaming_of(run.manifest)
    open_loop = _open_loop(run, scale, slo)
    criteria = (gate.evaluate(table, slo, streaming) + server_criteria(run.server_metrics, slo)
                + recovery.criteria(recovered, slo.recovery_s_max)
                + gate.open_loop_criteria((open_loop or {}).get("phases") or [], (open_loop or {}).get("lateness_limit_ms")))
    stopped = validity.completion_criterion(run.manifest)  # an interrupted run never passes
    criteria += [stopped] if stopped else []
    passed = gate.gate_passed(criteria)
    knee_wall = knee.find_knee(wall) if run.has_records else {"found": False, "reason": "no per-request records"}
    break_point = knee.find_break_point(table, slo, streaming)
    verdict = {
        "run": str(run.path), "name": run.manifest.get("name", run.path.resolve().name), "manifest": run.manifest,
        # a pass that could not judge a criterion that applies is INCOMPLETE: exit 1, never a silent PASS
        "passed": passed, "exit_code": 0 if passed and not gate.unjudged(criteria) else 1, "time_scale": scale,
        "slo": {"passed": passed, "criteria": [c.as_dict() for c in criteria], "thresholds": dataclasses.asdict(slo),
                "unjudged": gate.unjudged(criteria),
                "streaming": streaming, "not_applied": gate.not_applied(slo, streaming)},
        "knee": point_to_model(knee_wall, scale), "break_point": break_point,
        "max_slo_throughput": (best := knee.max_compliant_throughput(table, slo, streaming)),
        "safe_operating_point": knee.safe_operating_point(
            table, break_point, best, knee.broke_with_time(table, break_point, slo, streaming)),
        "phases": table.to_dict(orient="records"),
        "error_classes": error_classes(run).to_dict(orient="records"),
        "lengths": length_table(run).to_dict(orient="records"),
        "recovery": recovered,
        "workers": worker_lines(run.manifest, run.requests, lambda: read_truth(run.path)),  # lost, clocks
        "missing": list(run.missing) + _consistency(run, wall) + recovery_problems,
        "notes": [n for n in [timescale_note(scale), gate.gate_note(criteria)] if n],
        "percentile_source": "raw samples" if run.has_records else "Locust's bucketed, integer-rounded histograms",
    }
    # "Is this run valid?" and "where does the time go?" come before any capacity statement
    verdict["validity"] = _validity(run, verdict["slo"]["criteria"], scale)
    floor = (verdict["validity"].get("floor") or {}).get("floor_model_ms")
    verdict["time_split"] = guarded("time split", lambda: time_split(
        run.requests, run.phases, run.server_metrics, scale, floor), {"available": False, "phases": []})
    if verdict["validity"].get("usable") is False:
        verdict["exit_code"] = EXIT_UNUSABLE
        verdict["bottleneck"] = _not_judged(verdict["validity"]["reason"])
        verdict["capacity"] = {}
    else:
        # the server-metrics analyses read the wall-time table and scale by themselves
        verdict["bottleneck"] = validity.qualify(_bottleneck(run, wall, verdict["slo"]["criteria"], floor), verdict["validity"])
        failed = int((run.requests["status"].astype(str) == "error").sum()) if run.has_records else 0
        verdict["bottleneck"] = explain_by_faults(verdict["bottleneck"], recovered, failed)
        verdict["capacity"] = _capacity(run, wall, knee_wall, slo)
        if verdict["safe_operating_point"].get("none") and verdict["capacity"]:
            verdict["capacity"]["caution"] = "safe operating point " + verdict["safe_operating_point"]["reason"]
        # a lagging generator: a warning, or exit 2 when a criterion lies within its error (validity.py)
        lag_note, untrustworthy = validity.generator_gate_note(verdict["validity"], passed, verdict["slo"]["criteria"],
                                                               verdict["slo"]["unjudged"])
        verdict["notes"] += [lag_note] if lag_note else []
        verdict["exit_code"] = EXIT_UNUSABLE if untrustworthy else verdict["exit_code"]
    verdict["open_loop"] = open_loop
    verdict["notes"] += (open_loop or {}).get("notes") or []
    verdict["sentence"] = verdict_sentence(verdict)
    return table, verdict


def build_report(run_dir: str | Path, slo: SLO | None = None, out_dir: str | Path | None = None,
                 prometheus: Iterable[str | Path] = (), charts: bool = True) -> ReportResult:
    """The report of a run folder. `charts=False` (--no-charts) writes the verdict, summary, HTML and
    JUnit without drawing (matplotlib takes about a second per chart): for a CI gate that only
    needs the exit code and the verdict."""
    slo = slo or SLO()
    run = load_run(run_dir)
    merge_prometheus(run, prometheus)
    out = Path(out_dir) if out_dir is not None else run.path / runfolder.REPORT_DIR
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create report folder {out}: {exc.strerror or exc}") from None
    table, verdict = analyse(run, slo)
    if charts:
        # Imported here: matplotlib costs ~0.6 s of CPU to import, which a --no-charts report skips.
        from loadline.analysis.report.figures import draw_charts

        chart_paths, problems = draw_charts(run, table, verdict, out)
    else:
        chart_paths, problems = [], ["charts not drawn (--no-charts): loadline report RUN draws them"]
    verdict["charts"] = [p.name for p in chart_paths]
    verdict["chart_problems"] = problems
    verdict = clean(verdict)
    summary = render_markdown(verdict)
    (out / "summary.md").write_text(summary)
    (out / "report.html").write_text(render_html(verdict, chart_paths))
    (out / "junit.xml").write_text(gate.junit_xml(verdict["slo"]["criteria"]))
    runfolder.write_json_atomic(out / runfolder.VERDICT, verdict)
    return ReportResult(verdict["exit_code"], summary, verdict, out)
