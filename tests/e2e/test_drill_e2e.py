"""The traffic-surprise drill with a replica kill, end to end: `loadline run` against the tiny
simulator with 2 replicas, x20 time scale (about 20 s wall), report included."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Busy closed-loop users (no think time) keep requests in flight on both replicas, so the kill fails
# some of them; 12 users on the 8-sequence survivor queue until the replica is back (40 model s).
STAGES = """
[[stage]]
label = "baseline"
kind = "baseline"
duration = 60
users = 4
[[stage]]
label = "surge + kill"
kind = "burst"
duration = 200
users = 12
kill_replica = 0
restart_after_s = 40
fault_after_s = 20
[[stage]]
label = "recovery"
kind = "recover"
duration = 30
users = 4
"""


def test_the_kill_runs_requests_fail_and_the_report_gives_a_recovery_time(tmp_path):
    stages = tmp_path / "drill.toml"
    stages.write_text(STAGES)
    slo = tmp_path / "slo.toml"
    slo.write_text("recovery_s_max = 1000\nmax_error_rate = 1.0\n")
    cmd = [
        sys.executable,
        "-m",
        "loadline",
        "run",
        "--shape",
        "stages",
        "--sim-profile",
        "tiny",
        "--sim-option",
        "replicas=2",
        "--time-scale",
        "20",
        "--slo",
        str(slo),
        "--out",
        str(tmp_path / "runs"),
        "--",
        "--stages-file",
        str(stages),
        "--prompt-mix",
        "short=1",
        "--turns-max",
        "3",
        "--think-mean",
        "0",
    ]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    run_dir = Path(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else None
    assert run_dir is not None and run_dir.is_dir(), done.stderr[-3000:]

    with open(run_dir / "phases.csv", newline="") as f:
        phases = list(csv.DictReader(f))
    assert [p["label"] for p in phases] == ["baseline", "surge + kill", "recovery"]
    assert 'fault: POST /admin/replicas/0/kill {"restart_after_s": 40} ok' in phases[1]["note"]  # for people
    with open(run_dir / "faults.csv", newline="") as f:
        [fault] = list(csv.DictReader(f))  # the typed record analysis reads
    assert (fault["phase_index"], fault["phase"], fault["method"], fault["path"], fault["outcome"]) == (
        "1",
        "surge + kill",
        "POST",
        "/admin/replicas/0/kill",
        "ok",
    )
    assert json.loads(fault["body"]) == {"restart_after_s": 40}
    assert float(phases[1]["start_wall"]) <= float(fault["ts"]) < float(phases[1]["end_wall"])

    truth = [json.loads(line) for line in (run_dir / "truth.jsonl").read_text().splitlines()]
    assert any(r["replica"] == 0 and r["outcome"] == "fault" for r in truth)  # the simulator did kill it

    verdict = json.loads((run_dir / "report" / "verdict.json").read_text())
    [entry] = verdict["recovery"]
    assert entry["event"] == "surge x3 + fault" and entry["phase"] == "surge + kill"
    assert entry["failed"] > 0 and sum(entry["errors_by_class"].values()) == entry["failed"]
    assert entry["recovered"] and math.isfinite(entry["recovery_s"]) and entry["recovery_s"] >= 0
    [criterion] = [c for c in verdict["slo"]["criteria"] if c["name"] == "recovery time"]
    assert criterion["passed"] is True and criterion["measured"] == entry["recovery_s"]
    summary = (run_dir / "report" / "summary.md").read_text()
    assert "### Recovery" in summary and "POST /admin/replicas/0/kill" in summary
    assert "<h2>Recovery</h2>" in (run_dir / "report" / "report.html").read_text()
    assert "recovery.png" in verdict["charts"] and (run_dir / "report" / "recovery.png").stat().st_size > 0
