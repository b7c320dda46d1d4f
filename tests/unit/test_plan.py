"""Capacity plan: DOMAIN.md's worked example, water levels, GPU memory, and `loadline plan`."""

from __future__ import annotations

import json

import pytest

import metric_scenarios as ms
from loadline.analysis.verdict import capacity
from loadline.analysis.stats.knee import find_knee
from loadline.analysis.data.load import load_run
from loadline.analysis.data.timescale import model_run
from loadline.analysis.stats.phases import phase_table
from loadline.commands.main import main as cli


def test_worked_example_500_qps_at_240_per_machine_needs_4():
    plan = capacity.plan(500, 240)
    assert plan["replicas"] == 4 and plan["serving_replicas"] == 3 and plan["spares"] == 1
    assert plan["steps"][0].startswith("500 / 240 = 2.08")
    assert "1.6-1.8x" in plan["horizontal_efficiency"]["assumption"]


@pytest.mark.parametrize("target,per,replicas", [(100, 100, 3), (80, 100, 2), (99, 100, 3), (1, 1000, 2), (1000, 100, 13)])
def test_replica_arithmetic(target, per, replicas):
    assert capacity.plan(target, per)["replicas"] == replicas


def test_horizontal_efficiency_is_applied_and_stated():
    plan = capacity.plan(500, 240)
    eff = plan["horizontal_efficiency"]
    assert eff["linear_capacity_qps"] == 960
    assert eff["capacity_qps"] == pytest.approx(240 * (1 + 3 * 0.7))
    assert capacity.scaled_capacity(100, 2) == pytest.approx(170)  # 2 replicas = 1.7x, within 1.6-1.8x
    assert plan["water_level"]["level"] == "green"
    assert plan["water_level_one_replica_down"]["level"] == "red"


@pytest.mark.parametrize("load,level", [(69, "green"), (70, "yellow"), (85, "yellow"), (86, "red")])
def test_water_levels(load, level):
    assert capacity.water_level(load, 100)["level"] == level


def test_gpu_memory_from_model_shape():
    seven_b = capacity.gpu_memory(capacity.ModelShape(params_b=7, dtype="fp16"), 1, 1)
    assert seven_b["weights_gb"] == 14.0  # DOMAIN: 7B FP16 weights = 14 GB
    llama3 = capacity.gpu_memory(capacity.ModelShape(8, 32, 8, 128, "bf16"), 4096, 32, gpu_memory_gb=80)
    assert llama3["kv_bytes_per_token"] == 128 * 1024  # REFERENCE-serving: 128 KiB/token
    assert llama3["kv_cache_gb"] == pytest.approx(131072 * 4096 * 32 / 1e9, abs=0.01)
    assert llama3["total_gb"] == pytest.approx((16 + 17.18) * 1.2, abs=0.05)
    assert llama3["water_level"]["level"] == "green"
    with pytest.raises(ValueError):
        capacity.gpu_memory(capacity.ModelShape(dtype="fp5"), 1, 1)


def test_plan_from_run_uses_the_best_slo_compliant_phase_per_replica(tmp_path):
    sc = ms.scheduler()  # 2 req/s per user up to the 4-user cap; from 8 users E2E P95 breaks 1,500 ms
    sc.manifest = {"sim": {"replicas": 2}, "target_qps": 20}
    run = load_run(ms.write_scenario(sc, tmp_path / "run"))
    table = phase_table(run)
    out = capacity.plan_from_run(run, table, find_knee(table))
    assert out["per_replica_qps"] == pytest.approx(8.0 / 2, rel=0.02)
    assert "SLO-compliant" in out["basis"] and "2 replica(s)" in out["basis"]
    assert out["plan"]["replicas"] == capacity.plan(20, out["per_replica_qps"])["replicas"]


def test_plan_from_a_time_scaled_simulator_run_is_in_simulated_time(tmp_path):
    sc = ms.scheduler()
    sc.manifest = {"options": {"time_scale": 10}}
    run = model_run(load_run(ms.write_scenario(sc, tmp_path / "run")))
    out = capacity.plan_from_run(run, phase_table(run), None)
    assert out["per_replica_qps"] == pytest.approx(0.8, rel=0.02)  # 8 req/s of wall time = 0.8 simulated
    assert "time-scale 10" in out["basis"] and "engines seen in the scraped metrics" in out["basis"]
    # E2E ~1 s of wall time is ~10 s of model time: no phase meets the 1.5 s SLO once scaled
    assert "SLO-compliant" not in out["basis"] and "no phase met the SLO" in out["basis"]


def test_plan_command_prints_the_example(capsys):
    assert cli(["plan", "--target-qps", "500", "--per-replica-qps", "240"]) == 0
    out = capsys.readouterr().out
    assert "replicas for 500 req/s: 4" in out and "water level" in out
    assert cli(["plan", "--target-qps", "500", "--per-replica-qps", "240", "--json", "--params-b", "7", "--dtype", "fp16"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["plan"]["replicas"] == 4 and data["gpu_memory"]["weights_gb"] == 14.0


def test_plan_command_reads_a_run(tmp_path, capsys):
    run_dir = ms.write_scenario(ms.scheduler(), tmp_path / "run")
    assert cli(["plan", "--run", str(run_dir), "--target-qps", "40"]) == 0
    assert "SLO-compliant" in capsys.readouterr().out



def test_a_plan_from_a_run_carries_what_its_report_said_against_its_numbers(tmp_path, capsys):
    """A capacity plan read off a saturated generator's run inherits that doubt; no report yet says how to ask."""
    run_dir = ms.write_scenario(ms.scheduler(), tmp_path / "run")
    assert cli(["plan", "--run", str(run_dir), "--target-qps", "40"]) == 0
    assert f"caution: no report in {run_dir} yet: `loadline report {run_dir}`" in capsys.readouterr().out
    report = run_dir / "report"
    report.mkdir()
    findings = [{"kind": "generator-saturated", "severity": "untrustworthy", "message": "the load generator was saturated: x"},
                {"kind": "generator-behind", "severity": "note", "message": "behind, but only a note"}]
    for validity, said in (({"usable": True, "trustworthy": False, "findings": findings},
                            ["caution: the run's report: the load generator was saturated: x"]),
                           ({"usable": True, "trustworthy": True, "findings": findings[1:]}, []),
                           ({"usable": False, "reason": "no request reached the target", "findings": []},
                            ["caution: the run's report calls it unusable: no request reached the target"])):
        (report / "verdict.json").write_text(json.dumps({"validity": validity}))
        assert cli(["plan", "--run", str(run_dir), "--target-qps", "40"]) == 0
        out = capsys.readouterr().out
        assert [line for line in out.splitlines() if line.startswith("caution")] == said, out
        assert cli(["plan", "--run", str(run_dir), "--target-qps", "40", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["doubts"] == [line.removeprefix("caution: ") for line in said]
    (report / "verdict.json").write_text("{not json")
    assert cli(["plan", "--run", str(run_dir), "--target-qps", "40"]) == 0
    assert "could not be read" in capsys.readouterr().out
    # a break that came with time (a leaking soak) leaves no safe load: the plan says so too
    none = {"found": False, "none": True, "reason": "none: soak-window-3 broke at 20 users, ..."}
    for safe, said in ((none, ["caution: the run's report: safe operating point none: soak-window-3 broke at 20 users, ..."]),
                       ({"found": True, "rps": [1.0, 1.2], "reason": "60-70 % of the break point"}, [])):
        (report / "verdict.json").write_text(json.dumps({"validity": {"usable": True, "findings": []},
                                                         "safe_operating_point": safe}))
        assert cli(["plan", "--run", str(run_dir), "--target-qps", "40"]) == 0
        out = capsys.readouterr().out
        assert [line for line in out.splitlines() if line.startswith("caution")] == said, out
