"""`twin fit --replay` and `plan --twin` end to end on a short simulator run: the replay states a goodness
of fit per phase, and the plan takes its per-replica figure from the twin's prediction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.spine_helpers import loadline

# Not exclusive: the run and its replay on the twin are both time-scaled, but what is asserted is
# loose (each phase's replayed rate within 25 % of the run's) or structural. Measured beside three
# busy loops on two cores (load average 5): rate errors -2.2 % .. +1.2 % in 2 runs of 2.
pytestmark = pytest.mark.e2e

LOCUST = ["--step-start-users", "2", "--step-max-users", "4", "--step-hold", "30", "--baseline-hold", "10"]
LOCUST += ["--event-interval", "0.2", "--max-tokens", "32", "--prompt-tokens", "lognormal:200,0.5"]


def test_replay_states_goodness_per_phase_and_plan_uses_the_twin(tmp_path: Path) -> None:
    done = loadline(
        "run", "--sim-profile", "tiny", "--time-scale", "5", "--scenario", "single", "--shape", "stepped",
        "--out", str(tmp_path / "runs"), "--no-charts", "--", *LOCUST, timeout=300,
    )  # fmt: skip
    assert done.code in (0, 1), done.stderr[-2000:]
    twin = tmp_path / "twin"
    done = loadline("twin", "fit", str(done.run_dir), "--out", str(twin), "--replay", timeout=300)
    assert done.code == 0, done.stderr[-2000:]
    assert "replay of the run's load on the twin" in done.stdout
    goodness = json.loads((twin / "twin.json").read_text())["goodness"]
    assert [row["phase"] for row in goodness] == ["step-1 (2 users)", "step-2 (4 users)"]
    assert all(abs(row["rps_error"]) < 0.25 for row in goodness)  # a replay of the same load, loosely

    done = loadline("plan", "--target-qps", "20", "--twin", str(twin), "--json", timeout=300)
    assert done.code == 0, done.stderr[-2000:]
    plan = json.loads(done.stdout)
    assert plan["basis"].startswith("the twin of ") and plan["per_replica_qps"] > 0
    assert plan["plan"]["replicas"] >= 2
    assert any("predicted by the twin" in doubt for doubt in plan["doubts"])
