"""Capacity plan: DOMAIN.md's worked example, water levels, GPU memory, and `loadline plan`."""

from __future__ import annotations

import json

import layer_scenarios as layers
import metric_scenarios as ms
import pytest

from loadline.analysis.data.load import load_run
from loadline.analysis.data.timescale import model_run
from loadline.analysis.stats.knee import find_knee
from loadline.analysis.stats.phases import phase_table
from loadline.analysis.verdict import capacity
from loadline.commands.main import main as cli


def test_worked_example_500_qps_at_240_per_machine_is_one_count():
    """DOMAIN's arithmetic gives 3 serving if replicas added capacity linearly; at 70 % added-replica
    efficiency 3 carry 2.4x one, below the 2.5 the margin asks: 4 serving + 1 spare, and nothing else."""
    plan = capacity.plan(500, 240)
    assert plan["replicas"] == 5 and plan["serving_replicas"] == 4 and plan["spares"] == 1
    assert plan["steps"][0].startswith("500 / 240 = 2.08")
    assert "-> 3 if replicas added capacity linearly" in plan["steps"][1]
    assert plan["steps"][-1] == "+ 1 spare (N+1) = 5" and "warning" not in plan
    assert "1.6-1.8x" in plan["horizontal_efficiency"]["assumption"]


@pytest.mark.parametrize(
    "target,per,replicas", [(100, 100, 3), (80, 100, 2), (99, 100, 3), (1, 1000, 2), (1000, 100, 18)]
)
def test_replica_arithmetic(target, per, replicas):
    plan = capacity.plan(target, per)
    assert plan["replicas"] == replicas
    # the count carries the margin at the stated efficiency, and one fewer would not
    serving = plan["serving_replicas"]
    need = target * capacity.MARGIN
    assert capacity.scaled_capacity(per, serving) >= need - 1e-9
    assert serving == 1 or capacity.scaled_capacity(per, serving - 1) < need


@pytest.mark.parametrize("efficiency", [1.0, 0.8, 0.6])
def test_full_efficiency_is_the_linear_count(efficiency):
    plan = capacity.plan(500, 240, efficiency=efficiency)
    linear = 3 + 1
    assert plan["replicas"] == linear if efficiency == 1.0 else plan["replicas"] >= linear


def test_horizontal_efficiency_is_applied_and_stated():
    plan = capacity.plan(500, 240)
    eff = plan["horizontal_efficiency"]
    assert eff["linear_capacity_qps"] == 1200
    assert eff["capacity_qps"] == pytest.approx(240 * (1 + 4 * 0.7))
    assert capacity.scaled_capacity(100, 2) == pytest.approx(170)  # 2 replicas = 1.7x, within 1.6-1.8x
    assert plan["water_level"]["level"] == "green"
    assert plan["water_level_one_replica_down"]["level"] == "green"  # N+1: one down still carries the target


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
    sc = layers.scheduler()  # 2 req/s per user up to the 4-user cap; from 8 users E2E P95 breaks 1,500 ms
    sc.manifest = {"sim": {"replicas": 2}, "target_qps": 20}
    run = load_run(ms.write_scenario(sc, tmp_path / "run"))
    table = phase_table(run)
    out = capacity.plan_from_run(run, table, find_knee(table))
    assert out["per_replica_qps"] == pytest.approx(8.0 / 2, rel=0.02)
    assert "SLO-compliant" in out["basis"] and "2 replica(s)" in out["basis"]
    assert out["plan"]["replicas"] == capacity.plan(20, out["per_replica_qps"])["replicas"]


def test_plan_from_a_time_scaled_simulator_run_is_in_simulated_time(tmp_path):
    sc = layers.scheduler()
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
    assert "replicas for 500 req/s: 5" in out and "water level" in out and "are needed" not in out
    assert (
        cli(["plan", "--target-qps", "500", "--per-replica-qps", "240", "--json", "--params-b", "7", "--dtype", "fp16"])
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["plan"]["replicas"] == 5 and data["gpu_memory"]["weights_gb"] == 14.0


def test_plan_command_reads_a_run(tmp_path, capsys):
    run_dir = ms.write_scenario(layers.scheduler(), tmp_path / "run")
    assert cli(["plan", "--run", str(run_dir), "--target-qps", "40"]) == 0
    assert "SLO-compliant" in capsys.readouterr().out


def _caution(run_dir, capsys, *extra) -> list[str]:
    assert cli(["plan", "--run", str(run_dir), "--target-qps", "40", *extra]) == 0
    out = capsys.readouterr().out
    if extra:
        return json.loads(out)["doubts"]
    return [line.removeprefix("caution: ") for line in out.splitlines() if line.startswith("caution")]


def test_a_plan_from_a_run_carries_what_its_answer_says_against_its_numbers(tmp_path, capsys):
    """A plan read off a run inherits its answer's doubts (trust, no safe load); the per-replica figure is
    the answer's, with or without a written report."""
    run_dir = ms.write_scenario(layers.scheduler(), tmp_path / "run")
    assert f"no report in {run_dir} yet: `loadline report {run_dir}` writes it" in _caution(run_dir, capsys)
    capsys.readouterr()
    assert cli(["report", str(run_dir), "--no-charts"]) in (0, 1)
    capsys.readouterr()
    path = run_dir / "report" / "verdict.json"
    verdict = json.loads(path.read_text())
    answer = verdict["answer"]
    assert cli(["plan", "--run", str(run_dir), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["per_replica_qps"] == pytest.approx(answer["per_replica_rps"], rel=1e-3)
    answer["safe"] = {**answer["safe"], "found": True, "rps": [1.0, 1.2], "reason": "60-70 % of the break point"}
    for trust, reasons, said in (
        (
            "doubtful",
            ["the load generator was saturated: x"],
            ["the run's answer (trust doubtful): the load generator was saturated: x"],
        ),
        (
            "untrusted",
            ["TTFT P95 within the lag's error"],
            ["the run's answer (trust untrusted): TTFT P95 within the lag's error"],
        ),
        ("trusted", [], []),
    ):
        path.write_text(json.dumps({**verdict, "answer": {**answer, "trust": trust, "trust_reasons": reasons}}))
        assert _caution(run_dir, capsys) == said
        assert _caution(run_dir, capsys, "--json") == said
    unusable = {**answer, "status": "unusable", "reason": "unusable run: no request reached the target"}
    path.write_text(json.dumps({**verdict, "answer": unusable}))
    assert _caution(run_dir, capsys) == ["the run's answer: unusable run: no request reached the target"]
    # a break that came with time (a leaking soak) leaves no safe load: the plan says so too
    none = {**answer["safe"], "found": False, "rps": None, "reason": "soak-window-3 broke at 20 users, ..."}
    path.write_text(json.dumps({**verdict, "answer": {**answer, "safe": none}}))
    assert _caution(run_dir, capsys) == [
        "the run's answer: safe operating point none (soak-window-3 broke at 20 users, ...)"
    ]
    path.write_text("{not json")  # unreadable: computed again, as the report would
    assert _caution(run_dir, capsys) == []
