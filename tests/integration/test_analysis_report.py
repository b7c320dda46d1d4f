"""build_report and the report/compare commands on constructed run folders, charts drawn.

In process, but the whole pipeline (load, tables, verdict, matplotlib charts, HTML): seconds per
test, so it is in the integration tier; the pieces' own tests are in tests/unit."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from html import escape

import layer_scenarios as layers
import matplotlib.image
import metric_scenarios as ms
import numpy as np
import pandas as pd
import pytest
from synthetic import Server, make_requests, stepped_run, write_run

from loadline.analysis.data.load import load_run
from loadline.analysis.report import charts, server_charts
from loadline.analysis.report.build import build_report, merge_prometheus
from loadline.analysis.stats import knee
from loadline.analysis.stats.phases import phase_table
from loadline.commands.main import main as cli_main
from loadline.core.slo import SLO

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def stepped(tmp_path_factory):
    path = stepped_run(tmp_path_factory.mktemp("stepped") / "run", (2, 4, 8, 16, 32), step_s=20)
    return path, build_report(path, SLO())


def test_outputs_exist_and_verdict_has_the_contract_keys(stepped):
    path, result = stepped
    out = path / "report"
    for name in ("report.html", "summary.md", "verdict.json", "junit.xml"):
        assert (out / name).stat().st_size > 0
    verdict = json.loads((out / "verdict.json").read_text())
    for key in ("slo", "knee", "break_point", "safe_operating_point", "phases", "bottleneck", "capacity", "sentence"):
        assert key in verdict
    assert verdict["slo"]["passed"] is False and result.exit_code == 1  # 32 users break the default SLO
    assert verdict["knee"]["users"] == 8
    assert verdict["break_point"]["users"] == 32
    assert {c["name"] for c in verdict["slo"]["criteria"]} >= {"E2E P95", "E2E P99", "TTFT P95", "error rate"}
    assert len(verdict["phases"]) == 5
    ET.fromstring((out / "junit.xml").read_text())


def test_charts_are_non_empty_pngs(stepped):
    path, result = stepped
    names = result.verdict["charts"]
    assert {
        "latency_over_time.png",
        "throughput_vs_concurrency.png",
        "latency_cdf.png",
        "tokens_over_time.png",
        "errors_over_time.png",
    } <= set(names)
    for name in names:
        data = (path / "report" / name).read_bytes()
        assert data.startswith(PNG_SIGNATURE)
        image = matplotlib.image.imread(path / "report" / name)
        assert image.shape[0] > 200 and image.shape[1] > 400
        assert image[..., :3].std() > 0.01  # not a blank canvas


def test_report_html_is_self_contained(stepped):
    path, result = stepped
    html = (path / "report" / "report.html").read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.IGNORECASE)
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", html, re.IGNORECASE)
    assert html.count("data:image/png;base64,") == len(result.verdict["charts"])
    assert escape(result.verdict["sentence"]) in html


def test_summary_states_the_one_sentence_verdict(stepped):
    _, result = stepped
    assert result.summary.splitlines()[2].startswith("> FAIL: in a ")
    assert "E2E P95 reached" in result.summary and "step-5 (32 users)" in result.summary


def test_cli_exit_codes_follow_the_slo(tmp_path, capsys):
    e2e = np.full(50, 400.0)
    path = write_run(tmp_path / "run", make_requests(1000.0 + np.arange(50) * 0.2, e2e, ttft_ms=100.0, output_tokens=5))
    relaxed = tmp_path / "relaxed.toml"
    relaxed.write_text("[slo]\ne2e_p95_ms = 401\ne2e_p99_ms = 'none'\nttft_p95_ms = 'none'\n")
    strict = tmp_path / "strict.toml"
    strict.write_text("[slo]\ne2e_p95_ms = 399\n")  # 400 ms exactly at a 400 ms limit passes (loadline/core/judge.py)
    assert cli_main(["report", str(path), "--slo", str(relaxed), "--out", str(tmp_path / "r1"), "--no-charts"]) == 0
    assert cli_main(["report", str(path), "--slo", str(strict), "--out", str(tmp_path / "r2"), "--no-charts"]) == 1
    assert "PASS" in (tmp_path / "r1" / "summary.md").read_text()
    assert cli_main(["report", str(path), "--slo", str(tmp_path / "absent.toml")]) == 2
    assert "SLO file not found" in capsys.readouterr().err


def test_errors_fail_the_default_gate_and_are_charted(tmp_path):
    n = 40
    status = ["ok"] * 38 + ["error"] * 2
    requests = make_requests(
        1000.0 + np.arange(n) * 0.25,
        np.full(n, 300.0),
        ttft_ms=80.0,
        output_tokens=5,
        status=status,
        error_class=[""] * 38 + ["http", "reset"],
    )
    result = build_report(write_run(tmp_path / "run", requests), SLO(), out_dir=tmp_path / "out")
    assert result.exit_code == 1
    rate = next(c for c in result.verdict["slo"]["criteria"] if c["name"] == "error rate")
    assert rate["measured"] == pytest.approx(2 / 40) and rate["passed"] is False
    classes = result.verdict["error_classes"][0]
    assert classes["http"] == 1 and classes["reset"] == 1
    assert "| phase | http | reset |" in result.summary and "| whole-run | 1 | 1 |" in result.summary


def test_compare_flags_a_real_regression_and_not_noise(tmp_path, capsys):
    base = stepped_run(tmp_path / "base", (2, 4, 8, 16), step_s=20, seed=1)
    same = stepped_run(tmp_path / "same", (2, 4, 8, 16), step_s=20, seed=2)
    slower = stepped_run(tmp_path / "slower", (2, 4, 8, 16), Server(capacity_rps=14), step_s=20, seed=3)
    assert cli_main(["compare", str(base), str(same)]) == 0
    assert cli_main(["compare", str(base), str(slower), "--out", str(tmp_path / "cmp.md")]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION" in out and "step-4 (16 users)" in out
    assert "REGRESSION" in (tmp_path / "cmp.md").read_text()
    assert cli_main(["compare", str(base), str(tmp_path / "nope")]) == 2


def test_plain_locust_export_gives_a_report_that_says_what_is_missing(tmp_path):
    folder = tmp_path / "export"
    folder.mkdir()
    pd.DataFrame(
        [
            {
                "Type": "POST",
                "Name": "/v1/chat",
                "Request Count": 100,
                "Failure Count": 0,
                "Requests/s": 5.0,
                "50%": 400,
                "90%": 700,
                "95%": 900,
                "99%": 1600,
                "Max Response Time": 2000,
            },
            {
                "Type": "",
                "Name": "Aggregated",
                "Request Count": 100,
                "Failure Count": 0,
                "Requests/s": 5.0,
                "50%": 400,
                "90%": 700,
                "95%": 900,
                "99%": 1600,
                "Max Response Time": 2000,
            },
        ]
    ).to_csv(folder / "test_stats.csv", index=False)
    pd.DataFrame(
        [
            {
                "Timestamp": 1000 + 2 * i,
                "User Count": i,
                "Type": "",
                "Name": "Aggregated",
                "Requests/s": 0.5 * i,
                "50%": 400,
                "95%": 900,
            }
            for i in range(20)
        ]
    ).to_csv(folder / "test_stats_history.csv", index=False)
    result = build_report(folder, SLO(ttft_p95_ms=None))
    assert result.exit_code == 0
    assert "requests.csv (absent" in result.summary
    assert "Locust's bucketed" in result.summary
    assert result.verdict["phases"][0]["e2e_p95_ms"] == 900
    assert result.verdict["charts"] == ["locust_history.png"]
    assert (folder / "report" / "locust_history.png").read_bytes().startswith(PNG_SIGNATURE)


def test_prometheus_exports_are_merged_and_bad_ones_exit_2(tmp_path, capsys):
    path = stepped_run(tmp_path / "run", (2, 4, 8), step_s=10)
    export = tmp_path / "waiting.json"
    export.write_text(
        json.dumps(
            {
                "status": "success",
                "data": {
                    "resultType": "matrix",
                    "result": [
                        {
                            "metric": {"__name__": "vllm:num_requests_waiting", "instance": "gpu-1:8000"},
                            "values": [[1_700_000_000 + i, str(i % 3)] for i in range(30)],
                        }
                    ],
                },
            }
        )
    )
    run = load_run(path)
    merge_prometheus(run, [export])
    waiting = run.server_metrics[run.server_metrics["metric"] == "vllm:num_requests_waiting"]
    assert len(waiting) == 30 and set(waiting["source"]) == {"gpu-1:8000"}
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert cli_main(["report", str(path), "--prometheus", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "bad.json" in err and "\n" not in err


def test_time_scaled_runs_are_judged_in_model_time(tmp_path):
    n = 100  # 100 requests of 100 ms over 10 s of a run compressed x10 -> model: 1,000 ms, 1 req/s
    requests = make_requests(1000.0 + np.arange(n) * 0.1, np.full(n, 100.0), ttft_ms=20.0, output_tokens=5)
    path = write_run(tmp_path / "run", requests, manifest={"name": "scaled", "options": {"time_scale": 10}})
    result = build_report(path, SLO(e2e_p95_ms=900, e2e_p99_ms=None, ttft_p95_ms=None), charts=False)
    phase = result.verdict["phases"][0]
    assert phase["e2e_p50_ms"] == pytest.approx(1000.0)
    assert phase["rps"] == pytest.approx(n / (99 * 0.1 + 0.1) / 10)
    assert phase["goodput_rps"] == 0  # 1,000 ms model time misses the 900 ms limit
    assert result.exit_code == 1 and "x10" in result.summary
    assert "test (1 phase" in result.verdict["sentence"] and "100-second" in result.verdict["sentence"]
    unscaled = build_report(
        write_run(tmp_path / "plain", requests), SLO(e2e_p95_ms=900, e2e_p99_ms=None, ttft_p95_ms=None), charts=False
    )
    assert unscaled.exit_code == 0 and unscaled.verdict["phases"][0]["goodput_rps"] == pytest.approx(phase["rps"] * 10)


def test_every_chart_has_a_title_units_and_a_legend(tmp_path, monkeypatch):
    seen = {}

    beside = {}

    def capture(fig, path):
        seen[path.name] = [
            (ax.get_title(), ax.get_xlabel(), ax.get_ylabel(), ax.get_legend() is not None) for ax in fig.axes
        ]
        fig.tight_layout()  # what _save does before drawing
        renderer = fig.canvas.get_renderer()
        beside[path.name] = all(
            ax.get_legend().get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1
            for ax in fig.axes
            if ax.get_legend() is not None
        )
        charts.plt.close(fig)
        return path

    monkeypatch.setattr(charts, "_save", capture)
    errors = ["ok"] * 5 + ["error"]
    run = load_run(stepped_run(tmp_path / "run", (2, 4, 8, 16), step_s=10))
    for column in ("status", "error_class"):
        run.requests[column] = run.requests[column].astype(object)
    run.requests.loc[run.requests.index[:6], "status"] = errors  # a few errors so that chart has bars
    run.requests.loc[run.requests.index[5], "error_class"] = "timeout"
    table = phase_table(run)
    curve = knee.load_curve(table)
    charts.latency_over_time(run, tmp_path / "a.png")
    charts.throughput_vs_concurrency(
        curve, knee.find_knee(table), {"found": False}, {"TTFT P95": 800.0}, tmp_path / "b.png"
    )
    charts.latency_cdfs(run, tmp_path / "c.png")
    charts.tokens_over_time(run, tmp_path / "d.png")
    charts.errors_over_time(run, tmp_path / "e.png")
    assert set(seen) == {"a.png", "b.png", "c.png", "d.png", "e.png"}
    for name, axes in seen.items():
        for title, xlabel, ylabel, legend in axes:
            assert title and xlabel and ylabel and legend, (name, title, xlabel, ylabel, legend)
    units = " ".join(x + y for axes in seen.values() for _, x, y, _ in axes)
    assert "(ms)" in units and "(s)" in units and "requests/s" in units and "tokens/s" in units and "errors/s" in units
    # over time, the legend sits beside the axes: inside, it hid the first phase's label and data
    assert {name for name, outside in beside.items() if outside} == {"a.png", "d.png", "e.png"}, beside


def test_server_charts_are_drawn_for_present_metrics_only(tmp_path):
    sc = layers.kv_cache()
    run = load_run(ms.write_scenario(sc, tmp_path / "run"))
    drawn = server_charts.charts(run, phase_table(run), tmp_path / "out")
    assert {p.name for p in drawn} == {
        "server_running_waiting.png",
        "server_kv_cache.png",
        "server_gpu.png",
        "server_request_time.png",
    }
    assert all(p.stat().st_size > 5000 for p in drawn)
    server = ms.server_rows(sc)
    run = load_run(ms.write_scenario(sc, tmp_path / "run2", server[server["source"] != "dcgm"]))
    assert "server_gpu.png" not in {p.name for p in server_charts.charts(run, phase_table(run), tmp_path / "out2")}
    run = load_run(ms.write_scenario(sc, tmp_path / "run3", server.iloc[0:0]))
    assert server_charts.charts(run, phase_table(run), tmp_path / "out3") == []


@pytest.mark.parametrize("users, capacity", [((2, 4, 8, 16, 32), 20.0), ((1, 2, 4), 100.0)])
def test_no_charts_writes_the_same_verdict_without_pngs(tmp_path, capsys, users, capacity):
    """--no-charts (a CI gate): same verdict and exit code as the full report, no PNG, and the report says so."""
    run = stepped_run(tmp_path / "run", users, server=Server(capacity_rps=capacity), step_s=20)
    full = build_report(run, SLO(), tmp_path / "full")
    code = cli_main(["report", str(run), "--out", str(tmp_path / "quick"), "--no-charts"])
    quick = json.loads((tmp_path / "quick" / "verdict.json").read_text())
    assert code == full.exit_code and quick["slo"] == full.verdict["slo"]
    assert quick["bottleneck"]["layer"] == full.verdict["bottleneck"]["layer"] and quick["knee"] == full.verdict["knee"]
    assert full.verdict["charts"] and quick["charts"] == [] and not list((tmp_path / "quick").glob("*.png"))
    assert "--no-charts" in (tmp_path / "quick" / "report.html").read_text()
    assert (tmp_path / "quick" / "junit.xml").exists() and (tmp_path / "quick" / "summary.md").exists()


@pytest.mark.parametrize(
    "streaming, slo, expected",
    [
        (True, SLO(), {"SLO TTFT P95 800 ms"}),  # streams: E2E is not judged, so not drawn as a limit
        (True, SLO(gate_e2e_on_streams=True), {"SLO TTFT P95 800 ms", "SLO E2E P95 1500 ms", "SLO E2E P99 3000 ms"}),
        (True, SLO(ttft_p95_ms=500, e2e_p95_ms=None), {"SLO TTFT P95 500 ms"}),
        (False, SLO(), {"SLO E2E P95 1500 ms", "SLO E2E P99 3000 ms"}),  # request-response: no first token to judge
    ],
)
def test_the_concurrency_chart_draws_the_limits_the_gate_applied(streaming, slo, expected, tmp_path, monkeypatch):
    """The chart once drew E2E P95/P99 limits on streaming runs (not judged there) and no TTFT limit
    (the one that failed): a reader saw lines the verdict never used."""
    legends, save = {}, charts._save

    def capture(fig, path):
        legends[path.name] = {t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()}
        return save(fig, path)

    monkeypatch.setattr(charts, "_save", capture)
    path = stepped_run(tmp_path / "run", (2, 4, 8), step_s=10)
    manifest = path / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "streaming": streaming}))
    build_report(path, slo)
    drawn = {text for text in legends["throughput_vs_concurrency.png"] if text.startswith("SLO ")}
    assert drawn == expected
