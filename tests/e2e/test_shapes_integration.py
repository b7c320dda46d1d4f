"""Each shape through `loadline run` against the tiny simulator, time-scaled (each run < ~25 s wall).

Checked from the run folder only: phases.csv targets match the shape, the users Locust actually ran
(locust_stats_history.csv) reach each target within the phase's ramp time, the stepped stop rule ends
the run at the first step past the tiny engine's batch cap (8 sequences) and says why, and
`--workers 2` leaves the same timeline.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pandas as pd
import pytest
from surfaces import assert_stop_reason_agrees, assert_surfaces_agree

from loadline.commands.main import main as cli

ROOT = Path(__file__).resolve().parents[2]
SCALE = 20  # the simulator runs 20x faster too; loadline.runtime.live (the stop rule) reports model time (x 20)
# Tiny engine TTFT P95 in model time (2026-11-30): ~100-230 ms up to 8 users (its batch cap), ~740 ms
# at 16, ~1,800 ms at 32. 400 ms sits well between 8 and 16 users.
TTFT_P95_LIMIT_MS = 400
RUN_TIMEOUT_S = 120
# Short prompts and few turns keep chat sessions inside the tiny engine's 2,048-token context, and no
# think time makes every user a busy closed loop: the engine saturates just above 8 users.
USER_ARGS = ["--prompt-mix", "short=1", "--turns-max", "3", "--think-mean", "0", "--step-settle", "1"]
REACH_SLACK_S = 2.0  # stats history has 1 s resolution; the shape ticks once a second


def loadline_run(tmp_path: Path, *args: str, workers: int = 0, scale: float = SCALE) -> Path:
    cmd = [
        sys.executable,
        "-m",
        "loadline",
        "run",
        "--sim-profile",
        "tiny",
        "--time-scale",
        str(scale),
        "--out",
        str(tmp_path / "runs"),
        "--no-report",
        "--workers",
        str(workers),
        *args,
    ]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    assert run_dir.is_dir()
    return run_dir


def phases_of(run_dir: Path) -> list[dict]:
    with open(run_dir / "phases.csv", newline="") as f:
        return list(csv.DictReader(f))


def shape_of(rows: list[dict]) -> list[tuple]:
    return [(r["label"], r["kind"], int(r["target_users"])) for r in rows]


def assert_users_reach_targets(run_dir: Path, rows: list[dict], slack_s: float = REACH_SLACK_S) -> None:
    """Every phase: Locust's own user count reaches the target within the phase's ramp time."""
    history = pd.read_csv(run_dir / "locust_stats_history.csv")
    users = history[history["Name"] == "Aggregated"][["Timestamp", "User Count"]]
    for row in rows:
        start, end, target = float(row["start_wall"]), float(row["end_wall"]), int(row["target_users"])
        ramp_s = abs(target - int(row["users_start"])) / float(row["spawn_rate"])
        seen = users[(users["Timestamp"] >= int(start)) & (users["Timestamp"] <= end + slack_s)]
        reached = seen[seen["User Count"] == target]
        assert not reached.empty, f"{row['label']}: never ran {target} users: {seen.values.tolist()}"
        assert reached["Timestamp"].iloc[0] <= start + ramp_s + slack_s, f"{row['label']}: reached late"


def assert_contiguous(rows: list[dict]) -> None:
    assert [int(r["index"]) for r in rows] == list(range(len(rows)))
    assert all(a["end_wall"] == b["start_wall"] for a, b in pairwise(rows))


def model_ttft_p95_ms(run_dir: Path, row: dict) -> float:
    """TTFT P95 of the phase from requests.csv (wall-clock ms), in model time like the stop rule."""
    requests = pd.read_csv(run_dir / "requests.csv")
    start, end = float(row["start_wall"]), float(row["end_wall"])
    ok = requests[(requests["status"] == "ok") & (requests["start_wall"] >= start) & (requests["start_wall"] < end)]
    return float(ok["ttft_ms"].quantile(0.95)) * SCALE


@pytest.fixture(scope="module")
def scaled_slo(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("slo") / "tiny-x20.toml"
    path.write_text(f'[slo]\ne2e_p95_ms = "none"\ne2e_p99_ms = "none"\nttft_p95_ms = {TTFT_P95_LIMIT_MS}\n')
    return path


STEPPED = [
    "--shape",
    "stepped",
    "--",
    *USER_ARGS,
    "--step-start-users",
    "4",
    "--step-max-users",
    "64",
    "--baseline-hold",
    "40",
    "--step-hold",
    "100",
]
EXPECTED_STEPPED = [
    ("baseline", "baseline", 1),
    ("step-1 (4 users)", "step", 4),
    ("step-2 (8 users)", "step", 8),
    ("step-3 (16 users)", "step", 16),
]


@pytest.fixture(scope="module")
def stepped_local(tmp_path_factory, scaled_slo) -> Path:
    return loadline_run(tmp_path_factory.mktemp("stepped"), "--slo", str(scaled_slo), *STEPPED)


@pytest.mark.exclusive  # at x20 the client's own ms count 20-fold toward the 400 ms stop rule: a busy box stops a step early
def test_stepped_stops_at_the_step_that_breaks_the_slo_and_says_so(stepped_local):
    rows = phases_of(stepped_local)
    assert shape_of(rows) == EXPECTED_STEPPED  # 16 users is past the batch cap of 8: no 32-user step
    assert_contiguous(rows)
    assert [r["note"] for r in rows[:-1]] == ["", "", ""]
    assert rows[-1]["note"].startswith("TTFT P95 ") and rows[-1]["note"].endswith(f" ms > {TTFT_P95_LIMIT_MS:,} ms")
    manifest = json.loads((stepped_local / "manifest.json").read_text())
    assert manifest["stop_reason"] == f"step-3 (16 users): {rows[-1]['note']}"
    code = cli(["report", str(stepped_local), "--no-charts"])
    assert code in (1, 2)  # a break fails the SLO (2: a box too busy for trustworthy numbers)
    assert_surfaces_agree(stepped_local, code)  # one answer on every surface of a real stepped run
    assert assert_stop_reason_agrees(stepped_local) == 1  # the report quotes the rule's TTFT P95
    # the verdict agrees with the run folder's own records
    assert model_ttft_p95_ms(stepped_local, rows[-1]) > TTFT_P95_LIMIT_MS
    assert all(model_ttft_p95_ms(stepped_local, r) <= TTFT_P95_LIMIT_MS for r in rows[1:-1])
    assert_users_reach_targets(stepped_local, rows)


@pytest.mark.exclusive  # compares with stepped_local (above), which runs alone
def test_stepped_with_two_workers_leaves_the_same_timeline(tmp_path, scaled_slo, stepped_local):
    run_dir = loadline_run(tmp_path, "--slo", str(scaled_slo), *STEPPED, workers=2)
    rows = phases_of(run_dir)
    assert shape_of(rows) == shape_of(phases_of(stepped_local))
    assert "TTFT P95" in rows[-1]["note"] and all(r["note"] == "" for r in rows[:-1])
    assert_contiguous(rows)
    # workers report their user count every few seconds: allow one report interval more
    assert_users_reach_targets(run_dir, rows, slack_s=REACH_SLACK_S + 3)


def test_pulse_bursts_to_three_times_base_and_back(tmp_path):
    run_dir = loadline_run(
        tmp_path,
        "--shape",
        "pulse",
        "--",
        *USER_ARGS,
        "--burst-base-users",
        "2",
        "--baseline-hold",
        "40",
        "--burst-hold",
        "60",
        "--burst-gap",
        "60",
        "--burst-repeats",
        "2",
    )
    rows = phases_of(run_dir)
    assert shape_of(rows) == [
        ("baseline", "baseline", 2),
        ("burst-1 (6 users)", "burst", 6),
        ("recover-1 (2 users)", "recover", 2),
        ("burst-2 (6 users)", "burst", 6),
        ("recover-2 (2 users)", "recover", 2),
    ]
    assert_contiguous(rows)
    assert all(float(r["end_wall"]) - float(r["start_wall"]) >= 60 / SCALE - 0.1 for r in rows[1:])
    assert_users_reach_targets(run_dir, rows)


def test_soak_holds_in_marked_windows(tmp_path):
    # two marked windows of 50 model s (3 s wall each: the shape ticks once a second), the same phases as
    # 200 s held in 100 s windows; the users are at 6 from the ramp's end on, as the checks below want
    run_dir = loadline_run(
        tmp_path,
        "--shape",
        "soak",
        "--",
        *USER_ARGS,
        "--soak-users",
        "6",
        "--soak-ramp",
        "40",
        "--soak-hold",
        "100",
        "--soak-window",
        "50",
    )
    rows = phases_of(run_dir)
    assert shape_of(rows) == [
        ("ramp (to 6 users)", "ramp", 6),
        ("soak-window-1", "soak-window", 6),
        ("soak-window-2", "soak-window", 6),
    ]
    assert float(rows[0]["spawn_rate"]) == pytest.approx(6 / (40 / SCALE))
    assert_contiguous(rows)
    assert_users_reach_targets(run_dir, rows)


def test_stages_follow_the_stage_file(tmp_path):
    stages = tmp_path / "stages.toml"
    stages.write_text(
        '[[stage]]\nduration = "1m"\nusers = 2\n'
        '[[stage]]\nlabel = "surge"\nkind = "burst"\nduration = 80\nusers = 8\nspawn_rate = 0.3\n'
        "[[stage]]\nduration = 40\nusers = 0\n"
    )
    run_dir = loadline_run(tmp_path, "--shape", "stages", "--", *USER_ARGS, "--stages-file", str(stages))
    rows = phases_of(run_dir)
    assert shape_of(rows) == [
        ("stage-1 (2 users)", "stage", 2),
        ("surge", "burst", 8),
        ("stage-3 (0 users)", "stage", 0),
    ]
    assert float(rows[1]["spawn_rate"]) == pytest.approx(0.3 * SCALE)
    assert_contiguous(rows)
    assert_users_reach_targets(run_dir, rows)


def test_a_ready_profile_runs_with_loadline_run_config(tmp_path):
    """configs/profiles/quick-look.conf: its conf-file options reach the shape (x100: 5 min -> 3 s)."""
    run_dir = loadline_run(
        tmp_path,
        "--config",
        "configs/profiles/quick-look.conf",
        "--",
        *USER_ARGS,
        "--step-stop-on-slo",
        "false",
        scale=100,
    )
    rows = phases_of(run_dir)
    assert shape_of(rows) == [
        ("baseline", "baseline", 1),
        ("step-1 (10 users)", "step", 10),
        ("step-2 (20 users)", "step", 20),
        ("step-3 (40 users)", "step", 40),
        ("step-4 (80 users)", "step", 80),
    ]
