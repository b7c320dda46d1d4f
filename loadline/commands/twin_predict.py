"""Run a twin: its profile (with what-if changes) served by the simulator, the load replayed, the report read.

The prediction is an ordinary time-compressed `loadline run` against `loadline sim --profile
twin.toml`, so it answers with exactly a report's figures (knee, break point, max SLO-compliant load,
limiting layer) and its run folder can be opened like any other. Time scale: 5 by default, the
Makefile's demo choice (at 10-20x a busy 2-core machine's client delays, multiplied by the scale,
moved the break point between runs), lowered for a fast engine so its median inter-token gap stays
at least 4 ms of wall time (`twin fit` records the choice as the workload's `twin_time_scale`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadline.analysis.twin.model import TWIN_JSON, TWIN_TOML, TwinProfile
from loadline.analysis.twin.uncertainty import base_error, changes_outside, for_phase
from loadline.core import runfolder
from loadline.core.answer import Answer
from loadline.core.errors import UsageError
from loadline.simulator.config import coerce

DEFAULT_TIME_SCALE = 5.0
RUN_TIMEOUT_S = 3 * 3600  # a prediction longer than this is hung
PHASE_FIGURES = ("rps", "ttft_p50_ms", "ttft_p95_ms", "itl_p50_ms", "itl_p95_ms")


@dataclass
class WhatIf:
    changes: dict[str, Any] = field(default_factory=dict)  # simulator profile keys -> new values
    locust_args: list[str] = field(default_factory=list)  # load changes, after the replayed ones
    shape: str | None = None
    scenario: str | None = None
    time_scale: float | None = None  # None: the twin's own choice (fit.py), else DEFAULT_TIME_SCALE


def load_profile(path: str) -> tuple[TwinProfile, Path]:
    """A twin folder, or its twin.json / twin.toml."""
    where = Path(path)
    folder = where if where.is_dir() else where.parent
    try:
        return TwinProfile.from_dict(json.loads((folder / TWIN_JSON).read_text())), folder
    except FileNotFoundError:
        raise UsageError(
            f"no twin at {path}: give the folder `loadline twin fit` wrote (it holds {TWIN_JSON})"
        ) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{folder / TWIN_JSON} is not a twin: {exc}") from None


def profile_text(profile: TwinProfile, changes: dict[str, Any]) -> str:
    values = {**profile.values(), **{k: coerce(k, v) for k, v in changes.items()}}
    pool = int(values["num_gpu_blocks"]) * int(values["block_size"])
    if "max_model_len" not in changes:
        values["max_model_len"] = min(int(values["max_model_len"]), pool)
    lines = [f"# {profile.run}'s twin with what-if changes: {changes or 'none'}", "[twin]"]
    for name, value in values.items():
        lines.append(f"{name} = {json.dumps(value) if isinstance(value, (str, bool)) else value}")
    return "\n".join(lines) + "\n"


def time_scale_of(profile: TwinProfile, what_if: WhatIf) -> float:
    if what_if.time_scale is not None:
        return what_if.time_scale
    return float(profile.workload.get("twin_time_scale") or DEFAULT_TIME_SCALE)


def _command(profile: TwinProfile, toml: Path, what_if: WhatIf, out: Path) -> list[str]:
    load = profile.workload
    scenario = what_if.scenario or load.get("scenario") or "chat"
    shape = what_if.shape or load.get("shape")
    cmd = [sys.executable, "-m", "loadline.commands.main", "run", "--sim-profile", str(toml)]
    cmd += [
        "--time-scale",
        f"{time_scale_of(profile, what_if):g}",
        "--scenario",
        scenario,
        "--out",
        str(out),
        "--no-charts",
    ]
    if shape:
        cmd += ["--shape", shape]
    else:
        cmd += ["--users", str(load.get("users") or 10), "--run-time", str(load.get("run_time") or "60s")]
    return cmd + ["--", *load.get("locust_args", []), *what_if.locust_args]


def run_twin(profile: TwinProfile, what_if: WhatIf, out: Path) -> Path:
    """Serve the changed twin, replay the load, return the prediction's run folder (report included)."""
    out.mkdir(parents=True, exist_ok=True)
    toml = out / TWIN_TOML
    toml.write_text(profile_text(profile, what_if.changes))
    log = out / "predict.log"
    cmd = _command(profile, toml, what_if, out)
    with open(log, "w") as err:
        try:
            done = subprocess.run(
                cmd, stdout=subprocess.PIPE, stderr=err, text=True, timeout=RUN_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            raise UsageError(f"the twin's run took longer than {RUN_TIMEOUT_S} s; see {log}") from None
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    run_dir = Path(lines[-1]) if lines else None
    if (
        done.returncode not in (0, 1)
        or run_dir is None
        or not (run_dir / runfolder.REPORT_DIR / runfolder.VERDICT).is_file()
    ):
        tail = log.read_text()[-600:].strip().splitlines()[-3:]
        raise UsageError(f"the twin's run failed (exit {done.returncode}): {' / '.join(tail)}; see {log}")
    return run_dir


def verdict_of(run_dir: Path) -> dict:
    return json.loads((run_dir / runfolder.REPORT_DIR / runfolder.VERDICT).read_text())


def _prompt_p95(run_dir: Path) -> float | None:
    import pandas as pd

    try:
        prompts = pd.read_csv(run_dir / runfolder.REQUESTS, usecols=["prompt_tokens"])["prompt_tokens"].dropna()
    except (OSError, ValueError):
        return None
    return float(prompts.quantile(0.95)) if len(prompts) else None


def phase_rows(verdict: dict) -> list[dict[str, Any]]:
    rows = []
    for phase in verdict.get("phases") or []:
        if phase.get("kind") == "baseline" or not phase.get("requests"):
            continue
        row = {"phase": phase.get("label"), "users": phase.get("users"), "target_rate": phase.get("target_rate")}
        row.update({k: phase.get(k) for k in PHASE_FIGURES})
        rows.append(row)
    return rows


def predict(profile: TwinProfile, what_if: WhatIf, out: Path) -> dict[str, Any]:
    started = time.monotonic()
    run_dir = run_twin(profile, what_if, out)
    verdict = verdict_of(run_dir)
    answer = Answer.from_dict(verdict["answer"])
    replicas = int(what_if.changes.get("replicas", profile.replicas))
    base = base_error(profile)
    factor, reasons = changes_outside(profile, what_if.changes)
    prompt_p95 = _prompt_p95(run_dir)
    phases = []
    for row in phase_rows(verdict):
        u = for_phase(profile, base, factor, reasons, row["users"], row["rps"], replicas, prompt_p95)
        phases.append({**row, "error": round(u.error, 3), "outside_fitted_range": u.outside})
    return {
        "twin": str(profile.run),
        "changes": what_if.changes,
        "load_changes": what_if.locust_args,
        "run": str(run_dir),
        "wall_seconds": round(time.monotonic() - started, 1),
        "answer": verdict["answer"],
        "figures": {
            "status": answer.status.value,
            "knee": answer.knee.text(),
            "break_point": answer.break_point.text(),
            "max_compliant": answer.max_compliant.text(),
            "safe": answer.safe.text(),
            "limiting_layer": answer.layer.name if answer.layer else None,
            "per_replica_rps": answer.per_replica_rps,
        },
        "base_error": base,
        "phases": phases,
    }


def render(result: dict[str, Any]) -> str:
    f = result["figures"]
    lines = [
        f"twin of {result['twin']}; changes: {result['changes'] or 'none'}; load: {' '.join(result['load_changes']) or 'as fitted'}",
        f"predicted by the run {result['run']} ({result['wall_seconds']:g} s)",
        f"status: {f['status']}",
        f"knee: {f['knee']}",
        f"break point: {f['break_point']}",
        f"max SLO-compliant load: {f['max_compliant']}",
        f"safe operating point: {f['safe']}",
        f"limiting layer: {f['limiting_layer'] or 'none named'}",
        "",
        f"{'phase':<24} {'req/s':>8} {'TTFT p50':>9} {'TTFT p95':>9} {'ITL p50':>8} {'ITL p95':>8}  error",
    ]
    for p in result["phases"]:
        cells = [f"{p[k]:.3g}" if isinstance(p.get(k), (int, float)) else "-" for k in PHASE_FIGURES]
        lines.append(
            f"{str(p['phase'])[:24]:<24} {cells[0]:>8} {cells[1]:>9} {cells[2]:>9} {cells[3]:>8} {cells[4]:>8}  +-{p['error']:.0%}"
        )
        lines += [f"    outside the fitted range: {reason}" for reason in p["outside_fitted_range"]]
    return "\n".join(lines)
