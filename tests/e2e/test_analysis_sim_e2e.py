"""End to end: a stepped run against the tiny simulator; the report's knee must sit where the
simulator's own truth log says the engine starts queueing, and the exit code must follow the SLO.

The tiny profile caps the batch at 8 sequences (configs/sim/tiny.toml): the engine's capacity is
reached when 8 requests are in flight. With doubling steps the knee must be the first level that
(nearly) fills the batch: below it fewer than 8 requests are in flight and none queue; past it
the engine only adds queueing, which dominates the requests' latency. ~60 s.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from loadline.commands.main import main as cli_main

REPO = Path(__file__).resolve().parents[2]
MAX_NUM_SEQS = 8  # configs/sim/tiny.toml [engine]


@pytest.fixture(scope="module")
def stepped_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    # a loose SLO, so the stop rule lets the steps run past saturation to where throughput is flat.
    # Steps of 1 (baseline), 20, 40, 80, 160 users: the batch fills at 80 (in flight ~17, queue share ~0.5)
    # and 160 is the flat level past it (throughput +3-6 %, E2E P50 +444-457 % in 3 runs), the one level read
    # here; a 320-user step (measured: in flight ~240) added 9 s of load and its 4 MB of records, read by
    # no one, and a 10-user step (in flight ~1.0, queue share 0.004) 9 s more below the knee, where the
    # baseline, 20 and 40 users (in flight 0.1, ~2.2, ~4.4) are still checked.
    # No charts: only verdict.json and the truth log are read.
    loose = out / "loose.toml"
    loose.write_text("[slo]\ne2e_p95_ms = 600000\ne2e_p99_ms = 600000\nttft_p95_ms = 600000\nmax_error_rate = 0.5\n")
    command = [
        sys.executable,
        "-m",
        "loadline",
        "run",
        "--shape",
        "stepped",
        "--time-scale",
        "20",
        "--sim-profile",
        "tiny",
        "--scenario",
        "single",
        "--slo",
        str(loose),
        "--out",
        str(out),
        "--no-charts",
        "--",
        "--prompt-mix",
        "short=0.7,medium=0.3",
        "--seed",
        "1",
        "--step-start-users",
        "20",
        "--step-max-users",
        "160",
    ]
    done = subprocess.run(command, check=False, cwd=REPO, capture_output=True, text=True, timeout=300)
    folders = sorted(p for p in out.iterdir() if p.is_dir())
    assert folders, f"no run folder; stderr tail: {done.stderr[-2000:]}"
    return folders[-1], done.returncode


def _truth_by_phase(run_dir: Path) -> pd.DataFrame:
    truth = pd.read_json(run_dir / "truth.jsonl", lines=True)
    phases = pd.read_csv(run_dir / "phases.csv")
    truth = truth[truth["outcome"] == "ok"]
    truth = truth.assign(
        wait=truth["queue_end"] - truth["queue_start"],
        e2e=truth["last_token"] - truth["arrival"],
        phase=np.searchsorted(phases["start_wall"].to_numpy(), truth["arrival"].to_numpy(), side="right") - 1,
    )
    rows = []
    for position, phase in phases.iterrows():
        mine = truth[truth["phase"] == position]
        duration = phase["end_wall"] - phase["start_wall"]
        rows.append(
            {
                "users": phase["target_users"],
                "queue_share": mine["wait"].median() / mine["e2e"].median(),
                "in_flight": mine["e2e"].sum() / duration,
            }
        )  # Little's law over the simulator's own clock
    return pd.DataFrame(rows)


@pytest.mark.exclusive  # at x20 a starved generator keeps fewer requests in flight: the knee moves
def test_knee_is_where_the_simulator_batch_fills(stepped_run):
    run_dir, exit_code = stepped_run
    verdict = json.loads((run_dir / "report" / "verdict.json").read_text())
    knee = verdict["knee"]
    assert knee["found"], knee
    truth = _truth_by_phase(run_dir)
    below = truth[truth["users"] < knee["users"]]
    at = truth[truth["users"] == knee["users"]].iloc[0]
    after = truth[truth["users"] > knee["users"]]
    assert len(below) and len(after), "the knee must lie inside the tested range"
    assert (below["queue_share"] < 0.1).all(), truth  # below the knee the engine barely queues
    assert (below["in_flight"] < MAX_NUM_SEQS).all(), truth  # ...and the batch is not full
    assert at["in_flight"] >= MAX_NUM_SEQS * 0.75, truth  # the knee (nearly) fills the batch
    assert after.iloc[0]["queue_share"] > 0.5, truth  # one level past it, queueing dominates
    assert exit_code == verdict["exit_code"] == 0 and verdict["slo"]["passed"]  # the loose SLO holds


@pytest.mark.exclusive  # shares stepped_run with the knee test
def test_exit_code_follows_the_slo(stepped_run, tmp_path):
    run_dir, _ = stepped_run
    generous = tmp_path / "generous.toml"
    generous.write_text("[slo]\ne2e_p95_ms = 60000\ne2e_p99_ms = 60000\nttft_p95_ms = 60000\nmax_error_rate = 1.0\n")
    tight = tmp_path / "tight.toml"
    tight.write_text("[slo]\nttft_p95_ms = 1\n")  # a streaming run: judged on TTFT, not E2E (loadline/core/judge.py)
    # no charts: the exit code and verdict.json are what is judged, and charts do not change either
    assert cli_main(["report", str(run_dir), "--slo", str(generous), "--out", str(tmp_path / "a"), "--no-charts"]) == 0
    code = cli_main(["report", str(run_dir), "--slo", str(tight), "--out", str(tmp_path / "b"), "--no-charts"])
    verdict = json.loads((tmp_path / "b" / "verdict.json").read_text())
    if verdict["validity"]["generator"].get("behind") and verdict["validity"]["generator"].get("gate_doubts"):
        # A generator that read its sockets late can only have inflated TTFT: when that error reaches
        # down to the limit, the report says "not trustworthy" (exit 2) instead of blaming the server.
        assert code == 2
    else:
        assert code == 1
