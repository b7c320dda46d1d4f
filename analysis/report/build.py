"""Run folder -> report/: report.html, summary.md, verdict.json, junit.xml and the charts.

`build_report` is what `loadline report` and the end of every `loadline run` call. It is pure in
the sense that it only reads the run folder and writes the report folder; the exit code is the
answer's (loadline/core/answer.py); unusable input raises UsageError (exit 2); a run whose setup failed
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

from loadline.analysis.data.load import RunData, load_run
from loadline.analysis.data.memory import return_freed_memory
from loadline.analysis.data.prom_ingest import load_query_range
from loadline.analysis.data.timescale import model_run, time_scale
from loadline.analysis.data.timescale import note as timescale_note
from loadline.analysis.data.truth import read_truth
from loadline.analysis.report.guard import guarded
from loadline.analysis.report.html import render_html
from loadline.analysis.report.junit import junit_xml
from loadline.analysis.report.markdown import render_markdown, verdict_sentence
from loadline.analysis.report.workers import worker_lines
from loadline.analysis.stats import arrivals, knee, recovery, short_phases, trace_replay
from loadline.analysis.stats.lengths import length_table
from loadline.analysis.stats.phases import error_classes, phase_table
from loadline.analysis.verdict import answer as run_answer
from loadline.analysis.verdict import gate, validity
from loadline.analysis.verdict.bottleneck import judge
from loadline.analysis.verdict.capacity import replicas_in_run
from loadline.analysis.verdict.faults import explain_by_faults
from loadline.analysis.verdict.server_gate import server_criteria
from loadline.analysis.verdict.timesplit import time_split
from loadline.core import runfolder
from loadline.core.answer import SloSource
from loadline.core.errors import UsageError
from loadline.core.records import Status
from loadline.core.runsettings import streaming_of
from loadline.core.slo import SLO, recorded


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
    fallback = {
        "layer": None,
        "evidence": [],
        "actions": [],
        "secondary": [],
        "not_judged": ["bottleneck verdict unavailable"],
    }
    failed = [c for c in criteria if c.get("passed") is False]  # a failed SLO is a limit: never "headroom"
    return guarded(
        "bottleneck verdict",
        lambda: judge(run, table, slo_failures=failed, measurement_floor_ms=floor_model_ms),
        fallback,
    )


def _validity(run: RunData, criteria: list[dict], scale: float) -> dict:
    fallback: dict[str, Any] = {
        "usable": True,
        "trustworthy": None,
        "reason": None,
        "findings": [],
        "floor": {},
        "confidence_steps": 0,
    }
    return guarded(
        "validity",
        lambda: validity.assess(run.requests, run.phases, run.generator, criteria, scale, read_truth(run.path)),
        fallback,
    )


def unusable_reason(verdict: dict) -> str | None:
    """The one-line reason of a run whose setup failed (exit 2), else None."""
    v = verdict.get("validity") or {}
    return str(v.get("reason")) if v.get("usable") is False else None


def _not_judged(reason: str) -> dict:
    """The bottleneck section of an unusable run: no layer, and why."""
    return {
        "layer": None,
        "confidence": None,
        "evidence": [],
        "actions": [],
        "secondary": [],
        "not_judged": [f"unusable run: {reason}"],
    }


def _replicas_behind_target(run: RunData) -> dict:
    """What the answer divides the max compliant load by; the replica plan itself is the answer's."""

    def read() -> dict:
        replicas, how = replicas_in_run(run)
        return {"replicas_in_run": replicas, "replicas_how": how}

    return guarded("replicas behind the target", read, {})


def _open_loop(model: RunData, slo: SLO) -> dict:
    """Arrival-rate runs: target vs achieved rate, lateness, latency from due (analysis/stats/arrivals.py)."""
    if not model.has_records:
        return {}
    return guarded(
        "open loop",
        lambda: arrivals.summary(model.requests, model.phases, model.manifest.get("options") or {}, slo),
        {},
    )


def _recovery(model: RunData, slo: SLO) -> tuple[list[dict], list[str]]:
    """Surge / fault recovery entries (loadline.analysis.stats.recovery), and why they are missing if they failed."""
    if not model.has_records:
        return [], []
    result = guarded("recovery", lambda: recovery.from_run(model, slo), {})
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
    inside = _in_phases(table)
    if run.has_records and inside == 0:
        raise UsageError(
            f"none of the {total} request records started inside a phase of {runfolder.PHASES} "
            "(do the clocks of master and workers agree?)"
        )
    raise UsageError(f"empty run: no request completed ({total} attempt(s), all cancelled)")


def _in_phases(table: pd.DataFrame) -> int:
    """Records that started inside a phase: its judged window's and those after it."""
    after = table["after_window"].fillna(0).sum() if "after_window" in table else 0
    return int(table["requests"].fillna(0).sum() + after)


def _consistency(run: RunData, table: pd.DataFrame) -> list[str]:
    """Records the run wrote but the report does not count, said out loud."""
    notes = []
    outside = len(run.requests) - _in_phases(table) if run.has_records else 0
    if outside > 0:
        notes.append(f"{outside} request record(s) started outside every phase and are not counted")
    written = run.manifest.get("requests_written")
    if isinstance(written, int) and run.has_records and written > len(run.requests):
        notes.append(
            f"the manifest says {written} request rows were written, {runfolder.REQUESTS} holds {len(run.requests)}"
        )
    return notes


def resolve_slo(
    manifest: dict | None, given: SLO | None = None, given_name: str | None = None
) -> tuple[SLO, SloSource]:
    """The SLO a report judges by: the one the run recorded at its start, unless another is given,
    which the answer then says (never a silent re-judgement with other thresholds)."""
    run_slo = recorded(manifest)
    run_name = Path(run_slo[1]).name if run_slo else None
    if given is None:
        if run_slo:
            return run_slo[0], SloSource(run_name or "defaults", "run")
        return SLO(), SloSource("defaults", "defaults", "the run recorded no SLO: judged with the built-in defaults")
    name = Path(given_name).name if given_name else "an SLO given to the report"
    if run_slo and run_slo[0] == given:
        return given, SloSource(run_name or name, "run")
    note = (
        f"re-judged with {name}; the run was started with {run_name}"
        if run_slo
        else f"judged with {name} (the run recorded no SLO)"
    )
    return given, SloSource(name, "given", note)


def _points(table: pd.DataFrame, slo: SLO, streaming: bool | None, has_records: bool) -> dict[str, dict]:
    """The knee, break point, max compliant load and safe operating point of these phases."""
    found = {
        "knee": knee.find_knee(table) if has_records else {"found": False, "reason": "no per-request records"},
        "break point": knee.find_break_point(table, slo, streaming),
        "max compliant load": knee.max_compliant_throughput(table, slo, streaming),
    }
    with_time = knee.broke_with_time(table, found["break point"], slo, streaming)
    found["safe"] = knee.safe_operating_point(table, found["break point"], found["max compliant load"], with_time)
    return found


def _capacity_points(
    table: pd.DataFrame, slo: SLO, streaming: bool | None, has_records: bool
) -> tuple[dict[str, dict], list[dict]]:
    """The capacity points from the phases that ran their planned users, and the phases set aside
    (analysis/stats/short_phases.py), each saying which point it would have been."""
    judged = short_phases.judged(table)
    chosen = _points(judged, slo, streaming, has_records)
    if len(judged) == len(table):
        return chosen, []
    aside = short_phases.set_aside(table, _points(table, slo, streaming, has_records), chosen)
    note = f"{len(aside)} phase(s) set aside: they ran below their planned users (workers lost or short)"
    for name in (*short_phases.POINTS, "safe"):
        if not chosen[name].get("found"):
            chosen[name] = {**chosen[name], "reason": f"{chosen[name].get('reason') or 'none'}; {note}"}
    return chosen, aside


def analyse(
    run: RunData, slo: SLO, slo_source: SloSource | None = None, model: RunData | None = None
) -> tuple[pd.DataFrame, dict]:
    """The numbers of a report, without writing anything: (phase table in model time, verdict dict).
    `verdict["answer"]` is the run's answer (loadline/core/answer.py); its exit code is the report's.
    `model`: the run in model time when the caller already has it (timescale.model_run)."""
    model = model_run(run) if model is None else model
    table = short_phases.mark(phase_table(model, slo), run.manifest)  # phases a worker left short say so
    return_freed_memory()  # the gaps' pass: a large run's later parts start from the table alone
    _require_outcomes(run, table)
    scale = time_scale(run.manifest)
    recovered, recovery_problems = _recovery(model, slo)
    streaming = streaming_of(run.manifest)
    open_loop = _open_loop(model, slo)
    criteria = (
        gate.evaluate(table, slo, streaming)
        + server_criteria(run.server_metrics, slo)
        + gate.recovery_criteria(recovered, slo.recovery_s_max)
        + gate.open_loop_criteria((open_loop or {}).get("phases") or [], (open_loop or {}).get("lateness_limit_ms"))
    )
    stopped = validity.completion_criterion(run.manifest)  # an interrupted run never passes
    criteria += [stopped] if stopped else []
    passed = gate.gate_passed(criteria)
    points, aside = _capacity_points(table, slo, streaming, run.has_records)
    verdict = {
        "run": str(run.path),
        "name": run.manifest.get("name", run.path.resolve().name),
        "manifest": run.manifest,
        "time_scale": scale,
        "slo": {
            "passed": passed,
            "criteria": [c.as_dict() for c in criteria],
            "thresholds": dataclasses.asdict(slo),
            "unjudged": gate.unjudged(criteria),
            "streaming": streaming,
            "not_applied": gate.not_applied(slo, streaming),
        },
        "knee": points["knee"],
        "break_point": points["break point"],
        "max_slo_throughput": points["max compliant load"],
        "safe_operating_point": points["safe"],
        "set_aside": aside,
        "phases": table.to_dict(orient="records"),
        "error_classes": error_classes(run).to_dict(orient="records"),
        "lengths": length_table(run).to_dict(orient="records"),
        "recovery": recovered,
        "workers": worker_lines(run.manifest, run.requests, lambda: read_truth(run.path)),  # lost, clocks
        "missing": list(run.missing) + _consistency(run, table) + recovery_problems,
        "notes": [n for n in [timescale_note(scale), gate.gate_note(criteria)] if n],
        "percentile_source": "raw samples" if run.has_records else "Locust's bucketed, integer-rounded histograms",
    }
    return_freed_memory()  # the lengths' and error classes' working memory
    # "Is this run valid?" and "where does the time go?" come before any capacity statement
    verdict["validity"] = _validity(run, verdict["slo"]["criteria"], scale)
    floor = (verdict["validity"].get("floor") or {}).get("floor_model_ms")
    verdict["time_split"] = guarded(
        "time split",
        lambda: time_split(model.requests, model.phases, model.server_metrics, floor),
        {"available": False, "phases": []},
    )
    lag_note, untrustworthy = None, False
    if verdict["validity"].get("usable") is False:
        verdict["bottleneck"] = _not_judged(verdict["validity"]["reason"])
        verdict["capacity"] = {}
    else:
        verdict["bottleneck"] = validity.qualify(
            _bottleneck(model, table, verdict["slo"]["criteria"], floor), verdict["validity"]
        )
        failed = int((run.requests["status"] == Status.ERROR).sum()) if run.has_records else 0
        verdict["bottleneck"] = explain_by_faults(verdict["bottleneck"], recovered, failed)
        verdict["capacity"] = _replicas_behind_target(model)
        # a lagging generator: a warning, or exit 2 when a criterion lies within its error (validity.py)
        lag_note, untrustworthy = validity.generator_gate_note(
            verdict["validity"], passed, verdict["slo"]["criteria"], verdict["slo"]["unjudged"]
        )
        verdict["notes"] += [lag_note] if lag_note else []
    verdict["open_loop"] = open_loop
    verdict["notes"] += (open_loop or {}).get("notes") or []
    verdict["trace"] = guarded(
        "trace replay",
        lambda: trace_replay.summary(run.path, model.requests, model.phases, model.server_metrics, open_loop),
        {},
    )
    verdict["notes"] += [n for n in verdict["trace"].get("notes") or [] if "never sent" in n]  # rates: open loop's
    # the answer decides the status and exit code (loadline/core/answer.py): set from it, not before it
    answer = run_answer.compute(
        verdict,
        slo,
        slo_source or SloSource("an SLO given to the report", "given"),
        lag_note if untrustworthy else None,
    )
    verdict["schema_version"] = 1  # loadline/core/verdict.schema.json's $id version
    verdict["answer"] = answer.to_dict()
    verdict["exit_code"] = answer.exit_code
    verdict["passed"] = answer.exit_code == 0
    verdict["sentence"] = verdict_sentence(verdict)
    return table, verdict


def build_report(
    run_dir: str | Path,
    slo: SLO | None = None,
    out_dir: str | Path | None = None,
    prometheus: Iterable[str | Path] = (),
    charts: bool = True,
    slo_name: str | None = None,
) -> ReportResult:
    """The report of a run folder. `slo`: None judges with the SLO the run recorded at its start (else
    the defaults, said so); another one is named in the answer (`slo_name`: its file). `charts=False`
    (--no-charts) writes the verdict, summary, HTML and JUnit without drawing (matplotlib takes about a
    second per chart): for a CI gate that only needs the exit code and the verdict."""
    run = load_run(run_dir)
    slo, slo_source = resolve_slo(run.manifest, slo, slo_name)
    merge_prometheus(run, prometheus)
    out = Path(out_dir) if out_dir is not None else run.path / runfolder.REPORT_DIR
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create report folder {out}: {exc.strerror or exc}") from None
    model = model_run(run)
    table, verdict = analyse(run, slo, slo_source, model)
    if charts:
        # Imported here: matplotlib costs ~0.6 s of CPU to import, which a --no-charts report skips.
        from loadline.analysis.report.figures import draw_charts

        chart_paths, problems = draw_charts(model, table, verdict, out)
    else:
        chart_paths, problems = [], ["charts not drawn (--no-charts): loadline report RUN draws them"]
    verdict["charts"] = [p.name for p in chart_paths]
    verdict["chart_problems"] = problems
    verdict = clean(verdict)
    summary = render_markdown(verdict)
    (out / "summary.md").write_text(summary)
    (out / "report.html").write_text(render_html(verdict, chart_paths))
    (out / "junit.xml").write_text(junit_xml(verdict))
    runfolder.write_json_atomic(out / runfolder.VERDICT, verdict)
    return ReportResult(verdict["exit_code"], summary, verdict, out)
