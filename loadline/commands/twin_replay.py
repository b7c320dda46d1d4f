"""Goodness of fit: the fitted run's phases beside the twin's replay of the same load, phase by phase."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loadline.commands.twin_predict import PHASE_FIGURES, phase_rows, verdict_of
from loadline.core import runfolder


def run_verdict(run_dir: Path) -> dict:
    """The run's report (verdict.json), else its analysis computed now as the report would."""
    path = run_dir / runfolder.REPORT_DIR / runfolder.VERDICT
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        from loadline.analysis.data.load import load_run
        from loadline.analysis.report.build import analyse, resolve_slo

        run = load_run(run_dir)
        slo, source = resolve_slo(run.manifest)
        return analyse(run, slo, source)[1]


def compare(measured: list[dict[str, Any]], twin: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per phase (matched by label): each figure measured, by the twin, and the twin's relative error."""
    by_label = {row["phase"]: row for row in twin}
    rows = []
    for row in measured:
        other = by_label.get(row["phase"])
        out: dict[str, Any] = {"phase": row["phase"], "users": row.get("users")}
        for key in PHASE_FIGURES:
            m, t = row.get(key), (other or {}).get(key)
            out[key] = m
            out[f"twin_{key}"] = t
            numbers = isinstance(m, (int, float)) and isinstance(t, (int, float)) and m > 0
            out[f"{key}_error"] = round((float(t) - float(m)) / float(m), 4) if numbers else None  # type: ignore[arg-type]
        rows.append(out)
    return rows


def goodness(run_dir: Path, replay_dir: Path) -> list[dict[str, Any]]:
    return compare(phase_rows(run_verdict(run_dir)), phase_rows(verdict_of(replay_dir)))
