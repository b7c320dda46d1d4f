"""Recorded metric files in SGLang, TGI and old-vLLM names give the verdicts of their vLLM twins.

The files in tests/data/ are Prometheus query_range exports (see make_metric_twins.py there); the
client side of each run is the same constructed table, so only the server's naming differs.
In process, but each case replays a whole recorded export through ingest and the full verdict
(seconds each): integration tier. The rules on constructed runs: tests/integration/test_bottleneck_rules.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import layer_scenarios as layers
import metric_scenarios as ms
import pytest

from loadline.analysis.data.load import load_run
from loadline.analysis.data.prom_ingest import load_query_range
from loadline.analysis.stats.phases import phase_table
from loadline.analysis.verdict.bottleneck import CONFIDENCE, judge
from loadline.commands.main import main as cli
from loadline.core import runfolder

DATA = Path(__file__).resolve().parents[1] / "data"
EXPECTED = {
    "scheduler": "scheduler",
    "gpu_compute": "gpu-compute",
    "healthy": "headroom",
    "kv_cache": "kv-cache",
    "memory_leak": "memory-leak",
}
TWINS = sorted(DATA.glob("metrics_*.json.gz"))


def _scenario_and_vendor(path: Path) -> tuple[str, str]:
    stem = path.name[len("metrics_") : -len(".json.gz")]
    for scenario in EXPECTED:
        if stem.startswith(scenario + "_"):
            return scenario, stem[len(scenario) + 1 :]
    raise AssertionError(f"unexpected fixture {path.name}")


def test_every_scenario_has_twins():
    vendors = {}
    for path in TWINS:
        scenario, vendor = _scenario_and_vendor(path)
        vendors.setdefault(scenario, set()).add(vendor)
    assert set(vendors) == set(EXPECTED)
    assert all("vllm" in v and len(v) >= 2 for v in vendors.values())
    assert {"sglang", "tgi", "vllm_old"} <= set().union(*vendors.values())


@pytest.mark.parametrize("path", TWINS, ids=lambda p: p.name)
def test_twin_gives_the_vllm_verdict(path, tmp_path):
    scenario, vendor = _scenario_and_vendor(path)
    server = load_query_range([path])
    assert len(server) > 100
    run = load_run(ms.write_scenario(getattr(layers, scenario)(), tmp_path / "run", server))
    verdict = judge(run, phase_table(run))
    assert verdict["layer"] == EXPECTED[scenario], (vendor, verdict)
    vllm = judge(
        load_run(
            ms.write_scenario(
                getattr(layers, scenario)(),
                tmp_path / "vllm",
                load_query_range([DATA / f"metrics_{scenario}_vllm.json.gz"]),
            )
        ),
        phase_table(run),
    )
    assert verdict["layer"] == vllm["layer"]
    # a dialect without a supporting signal (TGI has no KV gauge) may be less sure, never surer
    assert CONFIDENCE.index(verdict["confidence"]) <= CONFIDENCE.index(vllm["confidence"])


def test_report_reads_a_prometheus_export_instead_of_a_scrape(tmp_path):
    """`loadline report RUN --prometheus FILE`: a run without server_metrics.csv, judged from an export."""
    run_dir = ms.write_scenario(layers.kv_cache(), tmp_path / "run")
    (run_dir / runfolder.SERVER_METRICS).unlink()
    code = cli(["report", str(run_dir), "--prometheus", str(DATA / "metrics_kv_cache_sglang.json.gz"), "--no-charts"])
    assert code in (0, 1)
    verdict = json.loads((run_dir / "report" / "verdict.json").read_text())
    assert verdict["bottleneck"]["layer"] == "kv-cache"
