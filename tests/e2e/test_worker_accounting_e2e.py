"""Every worker accounted for, with a real master, real workers and the simulator (loopback).

- One worker's users raise in on_start (a file missing on its host only): the run stops with exit 2
  naming that worker and the reason. The same when its users run but never send a request.
- The same with --allow-partial-workers: the run goes on, the manifest and the report say that half
  the planned users ran; a worker given its own --max-tokens is named with the value that ran instead.
- A worker SIGKILLed during a stepped, time-scaled run: its phase carries it in its row and is not the
  knee, break point or max compliant load; every surface states the same answer.
- A worker error in a shape run while another worker has just died: the run still ends with its
  manifest written (the stop goes through the shape, as its own end does).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from process_helpers import free_port, start, start_locust_cluster, stop, tail, wait_until
from spine_helpers import REPO, requests_so_far, requests_table
from surfaces import assert_surfaces_agree

from loadline.analysis.report.build import build_report
from loadline.core.answer import Answer

BROKEN_ENV = "LOADLINE_TEST_BROKEN_HOST"
STUCK_ENV = "LOADLINE_TEST_STUCK_HOST"
LOCUSTFILE = f'''
import os

import gevent

import loadline.runtime.plugin  # noqa: F401
from loadline.client import users


class HostBoundChat(users.ChatSessionUser):
    def on_start(self):
        if os.environ.get("{BROKEN_ENV}"):
            raise FileNotFoundError("/etc/llm/credentials: no such file on this host")
        if os.environ.get("{STUCK_ENV}"):  # a lookup that never answers: the users run, nothing is sent
            gevent.sleep(3600)
        super().on_start()
'''
USER_ARGS = ["--think-mean", "0.3", "--think-p90", "0.6", "--prompt-mix", "short=1", "--max-tokens", "16"]
RUN_TIMEOUT_S = 90


def _cluster(tmp_path, sim, run_dir, *extra, worker_args=None, run_time="20s", trouble=BROKEN_ENV):
    locustfile = tmp_path / "host_bound.py"
    locustfile.write_text(LOCUSTFILE)
    broken = {**os.environ, trouble: "1"}
    return start_locust_cluster(
        locustfile,
        ["-u", "4", "-r", "4", "-t", run_time, "--host", sim.url, "--run-dir", str(run_dir), *USER_ARGS, *extra],
        REPO,
        tmp_path,
        worker_env=[broken, None],
        worker_args=worker_args,
    )


def test_a_worker_whose_users_raise_at_start_stops_the_run_with_exit_2_naming_it(sim_server, tmp_path):
    sim = sim_server("tiny")
    run_dir = tmp_path / "run"
    master, workers = _cluster(tmp_path, sim, run_dir)
    try:
        master.wait(timeout=RUN_TIMEOUT_S)
    finally:
        for proc in [master, *workers]:
            stop(proc)
    log = (tmp_path / "master.log").read_text(errors="replace")
    assert master.returncode == 2, tail(tmp_path / "master.log")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    [error] = manifest["worker_errors"]
    assert f"-{workers[0].pid}-" in error["worker"], error  # the broken host's worker, not the other
    assert error["reason"] == (
        "2 of 2 user(s) failed at start: HostBoundChat.on_start raised FileNotFoundError: "
        "/etc/llm/credentials: no such file on this host"
    )
    assert f"worker {error['worker']} cannot run: 2 of 2 user(s) failed at start" in log
    assert manifest["status"] == "failed" and "Traceback" not in log


@pytest.mark.parametrize("users", [1, 3])
def test_a_local_run_whose_users_raise_at_start_stops_with_exit_2_and_says_why(sim_server, tmp_path, users):
    # one process, no master to tell: the run stops as for a worker instead of judging an idle service
    sim = sim_server("tiny")
    run_dir = tmp_path / "run"
    locustfile = tmp_path / "host_bound.py"
    locustfile.write_text(LOCUSTFILE)
    args = ["-u", str(users), "-r", str(users), "-t", "60s", "--host", sim.url, "--run-dir", str(run_dir)]
    began = time.monotonic()
    proc = start(
        [sys.executable, "-m", "locust", "-f", str(locustfile), "--headless", *args, *USER_ARGS],
        REPO,
        tmp_path / "local.log",
        env={**os.environ, BROKEN_ENV: "1"},
    )
    try:
        proc.wait(timeout=RUN_TIMEOUT_S)
    finally:
        stop(proc)
    assert proc.returncode == 2, tail(tmp_path / "local.log")
    assert time.monotonic() - began < 30, "stopped long before the run's 60 s"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    [error] = manifest["worker_errors"]
    assert error["reason"] == (
        f"{users} of {users} user(s) failed at start: HostBoundChat.on_start raised FileNotFoundError: "
        "/etc/llm/credentials: no such file on this host"
    )
    assert manifest["status"] == "failed"
    assert f"cannot run: {users} of {users} user(s) failed at start" in (tmp_path / "local.log").read_text()


def test_a_worker_that_runs_users_but_sends_nothing_stops_the_run_with_exit_2(sim_server, tmp_path):
    sim = sim_server("tiny")
    run_dir = tmp_path / "run"
    master, workers = _cluster(tmp_path, sim, run_dir, trouble=STUCK_ENV, run_time="40s")
    try:
        master.wait(timeout=RUN_TIMEOUT_S)
    finally:
        for proc in [master, *workers]:
            stop(proc)
    log = (tmp_path / "master.log").read_text(errors="replace")
    assert master.returncode == 2, tail(tmp_path / "master.log")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    [error] = manifest["worker_errors"]
    assert f"-{workers[0].pid}-" in error["worker"] and error["kind"] == "sends no records", error
    assert error["reason"].startswith("ran 2 user(s) but sent no records for ")
    assert error["at"] - manifest["started_at"] < 30, "found long before the run's 40 s were over"
    assert f"worker {error['worker']} cannot run: ran 2 user(s)" in log and "Traceback" not in log


def test_allow_partial_workers_goes_on_and_the_report_says_which_share_ran(sim_server, tmp_path):
    sim = sim_server("tiny")
    run_dir = tmp_path / "run"
    master, workers = _cluster(
        tmp_path, sim, run_dir, "--allow-partial-workers", worker_args=[[], ["--max-tokens", "8"]], run_time="6s"
    )
    try:
        master.wait(timeout=RUN_TIMEOUT_S)
    finally:
        for proc in [master, *workers]:
            stop(proc)
    assert master.returncode in (0, 1), tail(tmp_path / "master.log")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "finished" and manifest["worker_errors"] == []
    [short] = manifest["worker_shortfalls"]
    assert f"-{workers[0].pid}-" in short["worker"] and short["kind"] == "users failed at start"
    assert (short["users_short"], short["users_planned"], short["share_ran"]) == (2, 4, 0.5)
    [(worker, differ)] = manifest["worker_option_mismatches"].items()
    assert f"-{workers[1].pid}-" in worker and differ == {"max_tokens": [8, 16]}
    records = requests_table(run_dir)
    assert len(records) > 0 and set(manifest["rows_by_worker"]) == {worker}  # only the healthy worker ran
    report = subprocess.run(
        [sys.executable, "-m", "loadline", "report", str(run_dir), "--no-charts"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert report.returncode in (0, 1) and "Traceback" not in report.stderr, report.stderr[-2000:]
    summary = (run_dir / "report" / "summary.md").read_text()
    assert "50% of the 4 planned users ran from" in summary
    assert "--max-tokens 8 (ran with 16)" in summary
    answer = assert_surfaces_agree(run_dir, report.returncode)
    assert answer.trust.value == "doubtful" and answer.set_aside  # every phase ran at half its users


def test_a_sigkilled_workers_phase_is_flagged_and_not_the_knee(sim_server, tmp_path):
    scale = 20
    sim = sim_server("tiny", "--time-scale", str(scale))
    run_dir = tmp_path / "run"
    locustfiles = f"{REPO / 'locustfiles' / 'chat.py'},{REPO / 'locustfiles' / 'shape.py'}"
    master, workers = start_locust_cluster(
        locustfiles,
        [
            "--shape",
            "stepped",
            "--time-scale",
            str(scale),
            "--baseline-hold",
            "40",
            "--step-start-users",
            "2",
            "--step-factor",
            "2",
            "--step-max-users",
            "8",
            "--step-hold",
            "160",
            "--step-stop-on-slo",
            "false",
            "--host",
            sim.url,
            "--run-dir",
            str(run_dir),
            "--think-mean",
            "0",
            "--prompt-mix",
            "short=1",
            "--turns-max",
            "3",
            "--max-tokens",
            "16",
        ],
        REPO,
        tmp_path,
    )
    try:
        wait_until(lambda: len(requests_so_far(run_dir)) > 20, 30, "records")
        started = time.time()
        # into the second step (2 s baseline + 8 s per step, wall): mid-phase, as a node failure would be
        time.sleep(max(0.0, 13.0 - (time.time() - started)))
        os.kill(workers[0].pid, signal.SIGKILL)
        master.wait(timeout=RUN_TIMEOUT_S)
    finally:
        for proc in [master, *workers]:
            stop(proc)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    [lost] = manifest["workers_lost"]
    assert f"-{workers[0].pid}-" in lost["worker"] and lost["phases"], lost
    report = subprocess.run(
        [sys.executable, "-m", "loadline", "report", str(run_dir), "--no-charts"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert report.returncode in (0, 1, 2) and "Traceback" not in report.stderr, report.stderr[-2000:]
    verdict = json.loads((run_dir / "report" / "verdict.json").read_text())
    hit = {key.split(":", 1)[1] for key in lost["phases"]}
    rows = {p["label"]: p for p in verdict["phases"]}
    assert all(rows[label]["workers_short"].startswith(f"worker {lost['worker']} lost at ") for label in hit)
    assert all(not p.get("workers_short") for label, p in rows.items() if label not in hit)
    answer = Answer.from_dict(verdict["answer"])
    for point in (answer.knee, answer.break_point, answer.max_compliant):
        assert not point.found or point.load.phase not in hit, point
    assert {p.phase for p in answer.set_aside} == set(lost["phases"])
    assert_surfaces_agree(run_dir, report.returncode)
    # the same run judged as if nothing had been lost: whatever it would have taken from the hit phases
    # is what the answer says they would have been
    plain = tmp_path / "as-if-nothing-was-lost"
    shutil.copytree(run_dir, plain, ignore=shutil.ignore_patterns("report"))
    (plain / "manifest.json").write_text(json.dumps({**manifest, "workers_lost": []}))
    naive = Answer.from_dict(build_report(plain, charts=False).verdict["answer"])
    named = {"knee": naive.knee, "break point": naive.break_point, "max compliant load": naive.max_compliant}
    would = {name for name, point in named.items() if point.found and point.load.phase in hit}
    assert would == {name for p in answer.set_aside for name in p.would_be}, (named, answer.set_aside)
    print(f"lost {lost['worker']} in {lost['phases']}; knee {answer.knee.text()}; set aside {answer.set_aside}")


def test_a_worker_error_while_another_worker_is_dead_still_writes_the_manifest(sim_server, tmp_path):
    """The dead worker holds the stop's flush (up to 15 s: the master's heartbeat check is slowed here so
    that it is not declared lost first); a stop from outside the shape greenlet let Locust's main exit
    meanwhile, and the manifest stayed `running`, the worker error unrecorded."""
    sim = sim_server("tiny")
    run_dir = tmp_path / "run"
    locustfile = tmp_path / "host_bound.py"
    locustfile.write_text(LOCUSTFILE)
    files = f"{locustfile},{REPO / 'locustfiles' / 'shape.py'}"
    port = free_port()
    master = start(
        [
            sys.executable,
            "-c",
            "import sys, locust.runners as r; r.HEARTBEAT_LIVENESS = 40; sys.argv[0] = 'locust'; "
            "from locust.main import main; main()",
            *("-f", files, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port)),
            *("--headless", "--expect-workers", "3", "--shape", "stepped", "--baseline-hold", "4"),
            *("--step-start-users", "3", "--step-hold", "60", "--step-max-users", "6", "--step-stop-on-slo", "false"),
            *(
                "--host",
                sim.url,
                "--run-dir",
                str(run_dir),
                "--think-mean",
                "0",
                "--prompt-mix",
                "short=1",
                "--max-tokens",
                "16",
            ),
        ],
        REPO,
        tmp_path / "master.log",
    )
    worker = [sys.executable, "-m", "locust", "-f", files, "--worker", "--master-host", "127.0.0.1"]
    workers = [
        start(
            [*worker, "--master-port", str(port)],
            REPO,
            tmp_path / f"worker{i}.log",
            env={**os.environ, **({STUCK_ENV: "1"} if i == 0 else {})},
        )
        for i in range(3)
    ]
    try:
        wait_until(lambda: len(requests_so_far(run_dir)) > 20, 30, "records")
        os.kill(workers[2].pid, signal.SIGKILL)
        master.wait(timeout=RUN_TIMEOUT_S)
    finally:
        for proc in [master, *workers]:
            stop(proc)
    assert master.returncode == 2, tail(tmp_path / "master.log")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed", tail(tmp_path / "master.log")
    [error] = manifest["worker_errors"]
    assert f"-{workers[0].pid}-" in error["worker"] and error["kind"] == "sends no records"
    [dead] = manifest["workers_lost"]
    assert f"-{workers[2].pid}-" in dead["worker"] and dead["how"] == "no flush at stop"
