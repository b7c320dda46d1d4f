"""Faults a run must survive, each against real local processes.

- The target killed (SIGKILL) and restarted on the same port mid-run: the attempts it cut and the
  ones refused while it was down are errors classified `reset` / `connect`, the run goes on, and
  the records reconcile with what the restarted target received.
- The master killed (SIGKILL): its workers notice the silence and stop within Locust's heartbeat
  timeout; nothing hangs.
- The disk full while the run folder is written (a 300 KiB tmpfs; root only): one clear error line,
  exit 2, and what was written stays readable (an atomic manifest, the records up to the last line).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from process_helpers import free_port, start_locust_cluster, stop, wait_until
from spine_helpers import REPO, requests_so_far, requests_table, truth_table

FAST_USER = ["--think-mean", "0.2", "--think-p90", "0.4", "--prompt-mix", "short=1", "--max-tokens", "16"]
# A Locust worker quits when its master's heartbeats stop for MASTER_HEARTBEAT_TIMEOUT (60 s by default,
# locust/runners.py WorkerRunner.heartbeat_timeout_checker, which reads that module global on every tick).
# The workers here run with it at 10 s (tests/process_helpers.py): the same checker and quit path, 50 s
# less waiting. The bound is that timeout plus the same 30 s of slack for a busy box.
MASTER_HEARTBEAT_TIMEOUT_S = 10
WORKER_GIVES_UP_S = MASTER_HEARTBEAT_TIMEOUT_S + 30


def test_target_killed_and_restarted_mid_run_errors_are_classified_and_the_run_goes_on(sim_server, tmp_path):
    # 14 s: the kill comes 1-2 s after the first request (8 records) and the target is back ~2.5 s later
    # (3 runs), leaving ~9 s of the run (59 ok requests) after the restart for the checks below (24 s left ~19)
    port = free_port()
    first = sim_server("tiny", "--port", str(port))
    out = tmp_path / "runs"
    cmd = [
        sys.executable,
        "-m",
        "loadline",
        "run",
        "--host",
        first.url,
        "--users",
        "4",
        "--spawn-rate",
        "4",
        "--run-time",
        "14s",
        "--out",
        str(out),
        "--no-report",
        "--",
        *FAST_USER,
    ]
    run = subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        run_dir = wait_until(lambda: next(iter(out.glob("*/requests.csv")), None), 60, "the run folder").parent
        wait_until(lambda: len(requests_so_far(run_dir)) >= 8, 30, "records before the kill")
        first.proc.send_signal(signal.SIGKILL)  # a crash: no goodbye, streams cut mid-flight
        first.proc.wait(10)
        killed_at = time.time()
        time.sleep(2.0)  # down: new connections are refused
        second = sim_server("tiny", "--port", str(port))
        restarted_at = time.time()
        stdout, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    second.stop()  # flushes its truth log
    assert run.returncode in (0, 1), stderr[-3000:]
    assert "Traceback" not in stderr
    records = requests_table(run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "finished" and manifest["requests_written"] == len(records)
    assert records.request_id.is_unique
    failed = records[records.status == "error"]
    assert len(failed) > 0, "the kill cut nothing"
    assert set(failed.error_class) <= {"reset", "connect"}, failed.error_class.value_counts().to_dict()
    during = failed[(failed.start_wall >= killed_at) & (failed.start_wall < restarted_at - 0.5)]
    assert (during.error_class == "connect").all(), during[["start_wall", "error_class", "error_message"]].to_string()
    # the run went on: the restarted target served, and every request it received has one record
    after = records[records.start_wall > restarted_at + 1]
    assert (after.status == "ok").sum() > 0, "no request succeeded after the restart"
    truth = truth_table(second.truth_path)
    assert len(truth) > 0 and set(truth.request_id) <= set(records.request_id)
    served = records[records.request_id.isin(truth.request_id)]
    assert (served.status.isin(["ok", "cancelled"])).all(), served.status.value_counts().to_dict()


def test_master_killed_workers_stop_within_the_heartbeat_timeout(sim_server, tmp_path):
    sim = sim_server("tiny")
    run_dir = tmp_path / "run"
    master, workers = start_locust_cluster(
        REPO / "locustfiles" / "chat.py",
        ["-u", "4", "-r", "4", "-t", "120s", "--host", sim.url, "--run-dir", str(run_dir), *FAST_USER],
        REPO,
        tmp_path,
        master_heartbeat_timeout_s=MASTER_HEARTBEAT_TIMEOUT_S,
    )
    try:
        wait_until(
            lambda: len(requests_so_far(run_dir)) > 8,
            60,
            "records from the workers",
        )
        os.kill(master.pid, signal.SIGKILL)
        master.wait(10)
        for worker in workers:  # bounded: a worker that waits for a dead master forever fails here
            worker.wait(timeout=WORKER_GIVES_UP_S)
    finally:
        for proc in [master, *workers]:
            stop(proc, timeout_s=5, sig=signal.SIGKILL)
    for i, worker in enumerate(workers):
        log = (tmp_path / f"worker{i}.log").read_text()
        assert worker.returncode is not None, log[-2000:]
        # it quit because the master fell silent, after the timeout set above (not Locust's 60 s default)
        assert f"Didn't get heartbeat from master in over {MASTER_HEARTBEAT_TIMEOUT_S}s" in log, log[-2000:]
    # what the master had written stays readable; its manifest says the run never closed
    records = requests_table(run_dir)
    assert len(records) > 8 and records.request_id.is_unique
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "running"


def test_disk_full_while_writing_the_run_folder_is_one_clear_error_and_what_was_written_stays_readable(tmp_path):
    from loadline.analysis.data.load import load_run

    tiny = tmp_path / "tiny"
    tiny.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(tiny)], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("needs root to mount a 300 KiB tmpfs")
    try:
        cmd = [
            sys.executable,
            "-m",
            "loadline",
            "run",
            "--out",
            str(tiny),
            "--users",
            "4",
            "--spawn-rate",
            "4",
            "--run-time",
            "15s",
            "--",
            *FAST_USER,
        ]
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=180)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert done.returncode == 2, done.stderr[-3000:]
        assert lines[-1].startswith("loadline run: error: the disk holding") and "is full" in lines[-1], lines[-1]
        run_dir = next(tiny.glob("*/"))
        assert not list(run_dir.glob("*.tmp")), "a failed atomic write left its temporary file"
        manifest = json.loads((run_dir / "manifest.json").read_text())  # whole: written atomically
        # Never "finished": either the end could not be recorded, or it could (a failed write gives up
        # the columnar copy, freeing room) and it says which write failed.
        assert manifest["status"] in ("running", "failed"), manifest["status"]
        if manifest["status"] == "failed":
            assert "No space left on device" in manifest["write_error"], manifest
        run = load_run(run_dir)  # a half-written last line is dropped, the rest is read
        assert len(run.requests) > 0 and run.requests.request_id.is_unique
    finally:
        subprocess.run(["umount", str(tiny)], capture_output=True)
