"""One answer on every surface, per run type: verdict.json (valid against the shipped schema),
summary.md, report.html, junit.xml, the exit code and `loadline plan --run` state the same status,
trust, max compliant load, safe point and replicas."""

from __future__ import annotations

import json

import numpy as np
import pytest
from surfaces import assert_surfaces_agree
from synthetic import Server, make_requests, stepped_run, write_run

from loadline.commands.main import main as cli
from loadline.core.answer import Status, Trust
from loadline.core.slo import record


def _report(run_dir, capsys, *args) -> tuple[int, dict]:
    code = cli(["report", str(run_dir), "--no-charts", *args])
    capsys.readouterr()
    assert cli(["plan", "--run", str(run_dir), "--json"]) in (0, 2)
    out = capsys.readouterr().out
    return code, (json.loads(out) if out.strip().startswith("{") else {})


def _manifest(run_dir, **fields):
    path = run_dir / "manifest.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))
    return run_dir


def _slo_file(tmp_path, name, **values):
    path = tmp_path / f"{name}.toml"
    path.write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in values.items()) + "\n")
    return path


def _stepped(tmp_path, name="run", steps=(2, 4, 8, 16, 32), server=None):
    run = stepped_run(tmp_path / name, steps, server or Server(), step_s=20)
    return _manifest(run, status="finished", streaming=True, slo=record(None))


def _sweep(tmp_path, answer):
    rates = [(0.5, 0.5, 300.0), (100.0, 14.5, 5000.0), (17.6, 14.0, 2500.0), (8.8, 8.7, 400.0), (4.02, 4.0, 350.0)]
    frames, phases = [], []
    for i, (rate, served, ttft) in enumerate(rates):
        start = 1000.0 + i * 60
        n = int(served * 60)
        frames.append(
            make_requests(start + np.linspace(0, 59, n), np.full(n, ttft * 2), ttft_ms=ttft, output_tokens=20)
        )
        phases.append(
            {
                "index": i,
                "label": f"probe-{i} ({rate:g}/s)",
                "kind": "step",
                "start_wall": start,
                "end_wall": start + 60,
                "target_users": 0,
                "spawn_rate": 0,
                "users_start": 0,
                "users_end": 0,
                "note": "",
                "target_rate": rate,
            }
        )
    requests = frames[0].__class__(np.concatenate([f.to_numpy() for f in frames]), columns=frames[0].columns)
    requests["request_id"] = [f"r{i}" for i in range(len(requests))]
    return write_run(
        tmp_path / "sweep",
        requests,
        phases,
        {
            "name": "sweep",
            "status": "finished",
            "streaming": True,
            "slo": record(None),
            "sweep_max_rate": answer,
            "sweep": f"sweep: max SLO-compliant rate {answer}/s (bracket)",
        },
    )


def test_a_fail_at_the_break_point(tmp_path, capsys):
    run = _stepped(tmp_path)
    code, plan = _report(run, capsys)
    answer = assert_surfaces_agree(run, code, plan=plan)
    assert answer.status is Status.FAIL and code == 1 and answer.break_point.found
    assert answer.safe.rps[1] <= answer.max_compliant.load.rps


def test_a_headroom_pass_with_a_target_gives_replicas(tmp_path, capsys):
    run = _stepped(tmp_path, steps=(1, 2, 4), server=Server(capacity_rps=100))
    slo = _slo_file(tmp_path, "target", target_qps=2.0)
    code, plan = _report(run, capsys, "--slo", str(slo))
    answer = assert_surfaces_agree(run, code, plan=plan)
    assert answer.status is Status.PASS and answer.replicas is not None and answer.slo.origin == "given"


@pytest.mark.parametrize("slo_name, origin", [(None, "run"), ("strict", "given"), ("relaxed", "given")])
def test_a_report_judges_with_the_runs_slo_unless_told_and_says_so(tmp_path, capsys, slo_name, origin):
    run = _stepped(tmp_path, steps=(2, 4, 8, 16))
    code, plan = _report(run, capsys, *(["--slo", slo_name] if slo_name else []))
    answer = assert_surfaces_agree(run, code, plan=plan)
    assert answer.slo.origin == origin
    assert (answer.slo.note == "") is (origin == "run")
    if origin == "given":
        assert f"re-judged with {slo_name}; the run was started with defaults" == answer.slo.note
        assert answer.slo.note in (run / "report" / "summary.md").read_text()
    # the same folder re-reported without --slo goes back to the run's own SLO, never silently the last one
    code, plan = _report(run, capsys)
    assert assert_surfaces_agree(run, code, plan=plan).slo.origin == "run"


@pytest.mark.parametrize(
    "fields, status, code",
    [
        ({"status": "interrupted", "interrupted_by": "SIGINT"}, Status.INTERRUPTED, 1),
        ({"status": "stopped", "ended_by": "user"}, Status.STOPPED_BY_USER, 1),
    ],
)
def test_runs_that_did_not_end_on_their_own(tmp_path, capsys, fields, status, code):
    run = _manifest(_stepped(tmp_path, steps=(1, 2), server=Server(capacity_rps=100)), **fields)
    got, plan = _report(run, capsys)
    answer = assert_surfaces_agree(run, got, plan=plan)
    assert answer.status is status and got == code


def test_an_unusable_401_run(tmp_path, capsys):
    n = 40
    requests = make_requests(
        1000.0 + np.arange(n),
        np.full(n, 5.0),
        status="error",
        error_class="http",
        http_status=401,
        content_type="application/json",
        ttft_ms=np.nan,
        output_tokens=0,
    )
    run = write_run(tmp_path / "auth", requests, manifest={"name": "auth", "status": "finished", "slo": record(None)})
    code, plan = _report(run, capsys)
    answer = assert_surfaces_agree(run, code, plan=plan)
    assert answer.status is Status.UNUSABLE and code == 2 and answer.next_steps


def test_an_untrusted_pass_exits_2_everywhere(tmp_path, capsys):
    requests = make_requests(
        1000.0 + np.arange(100) * 0.1,
        np.full(100, 900.0),
        ttft_ms=200.0,
        output_tokens=64,
        itl_p50_ms=20.0,
        clock="kernel",
        read_delay_ms=35.0,
    )
    run = write_run(tmp_path / "behind", requests, manifest={"name": "behind", "streaming": True, "status": "finished"})
    slo = _slo_file(tmp_path, "tight", ttft_p95_ms=220.0)
    code, plan = _report(run, capsys, "--slo", str(slo))
    answer = assert_surfaces_agree(run, code, plan=plan)
    assert (answer.status, answer.trust, code) == (Status.PASS, Trust.UNTRUSTED, 2)
    assert "NOT TRUSTED" in (run / "report" / "summary.md").read_text().splitlines()[0]


@pytest.mark.parametrize("answer_rate, status", [(4.02, Status.PASS), (None, Status.FAIL)])
def test_a_sweep_is_judged_on_its_answer(tmp_path, capsys, answer_rate, status):
    run = _sweep(tmp_path, answer_rate)
    code, plan = _report(run, capsys)
    answer = assert_surfaces_agree(run, code, plan=plan)
    assert answer.status is status
    if answer_rate:
        assert answer.max_compliant.load.offered_rps == answer_rate
