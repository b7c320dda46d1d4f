"""A worker dies mid-run (kill -9): the run goes on, the survivor's records are all kept, the loss is bounded."""

from __future__ import annotations

import json
import os
import signal
import time

from process_helpers import start_locust_cluster, stop, wait_until
from spine_helpers import REPO, requests_so_far, requests_table, truth_table


def test_killed_worker_loses_at_most_its_last_second(sim_server, tmp_path):
    sim = sim_server("tiny")
    run_dir = tmp_path / "run"
    master, workers = start_locust_cluster(
        REPO / "locustfiles" / "chat.py",
        [
            "-u",
            "8",
            "-r",
            "8",
            "-t",
            "14s",
            "--host",
            sim.url,
            "--run-dir",
            str(run_dir),
            "--think-mean",
            "0.3",
            "--think-p90",
            "0.6",
            "--prompt-mix",
            "short=1",
            "--max-tokens",
            "32",
        ],
        REPO,
        tmp_path,
    )
    try:
        wait_until(
            lambda: len(requests_so_far(run_dir)) > 20,
            30,
            "records from both workers",
        )
        victim = workers[0]
        os.kill(victim.pid, signal.SIGKILL)
        killed_at = time.time()
        master.wait(timeout=60)
    finally:
        for proc in [master, *workers]:
            stop(proc)
    sim.stop()
    records, truth = requests_table(run_dir), truth_table(sim.truth_path)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "finished"
    assert records.request_id.is_unique
    survivor_tags = {rid.split("-")[0] for rid in records.request_id[records.start_wall > killed_at + 1]}
    assert len(survivor_tags) == 1, "the surviving worker kept running after the kill"
    survivor = survivor_tags.pop()
    truth_tags = truth.request_id.str.split("-").str[0]
    # every request of the surviving worker is recorded
    assert set(truth.request_id[truth_tags == survivor]) <= set(records.request_id)
    # the dead worker's unsent records: at most about one shipping interval of its traffic
    lost = truth[(truth_tags != survivor) & ~truth.request_id.isin(records.request_id)]
    assert (lost.arrival > killed_at - 2.5).all(), "records older than the last shipping interval were lost"
    assert "Traceback" not in (tmp_path / "master.log").read_text()
