"""A trace replayed by plain Locust (`locust -f locustfiles/trace.py,locustfiles/shape.py --shape trace`)
from a raw trace file with the time warp and a surge as Locust options: the master warps it, each
worker gets its share from the master (the file exists only where the master runs), and the run folder
holds the schedule, the surge's phase and every request sent at its warped due time."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import process_helpers as ph
import pytest
from spine_helpers import REPO

from loadline.core.trace_files import read_trace
from loadline.core.trace_warp import read

pytestmark = pytest.mark.e2e

LOCUSTFILES = f"{REPO}/locustfiles/trace.py,{REPO}/locustfiles/shape.py"
SPEED, SURGE = 2.0, "3x@2s+2s"
WAIT_S = 90


def burstgpt(path: Path, rows: int = 24) -> Path:
    """A BurstGPT-layout CSV: a request every 0.25 s (trace seconds), short prompts and replies."""
    lines = ["Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"]
    for i in range(rows):
        n_in, n_out = 40 + 7 * i, 2 + i % 3
        lines.append(f"{10 + 0.25 * i:g},ChatGPT,{n_in},{n_out},{n_in + n_out},Conversation log")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_raw_trace_warped_by_locust_options_is_replayed_over_two_workers_without_their_copy(sim_server, tmp_path):
    sim = sim_server("tiny")
    master_dir, logs = tmp_path / "master-host", tmp_path / "logs"
    master_dir.mkdir()
    logs.mkdir()
    burstgpt(master_dir / "burstgpt.csv")
    port = ph.free_port()
    options = ["--shape", "trace", "--host", sim.url, "--out", str(tmp_path / "runs"), "--trace-file", "burstgpt.csv",
               "--trace-speed", f"{SPEED:g}", "--trace-surge", SURGE, "--trace-drain", "2"]  # fmt: skip
    master = ph.start(
        [sys.executable, "-m", "locust", "-f", LOCUSTFILES, "--headless", "--master", "--master-bind-host",
         "127.0.0.1", "--master-bind-port", str(port), "--expect-workers", "2", *options],
        master_dir,  # the relative --trace-file resolves here only
        logs / "master.log",
    )  # fmt: skip
    workers = [
        ph.start(
            [
                sys.executable,
                "-m",
                "locust",
                "-f",
                LOCUSTFILES,
                "--worker",
                "--master-host",
                "127.0.0.1",
                "--master-port",
                str(port),
            ],
            REPO,
            logs / f"worker{i}.log",
        )  # fmt: skip
        for i in range(2)
    ]
    try:
        assert master.wait(timeout=WAIT_S) == 0, ph.tail(logs / "master.log")
    finally:
        for proc in [master, *workers]:
            ph.stop(proc)
    for log in logs.iterdir():
        assert "Traceback" not in log.read_text(), ph.tail(log)
    (run_dir,) = (tmp_path / "runs").iterdir()
    header, scheduled = read(run_dir / "trace-schedule.jsonl")
    assert (header["format"], header["speed"], header["trace_requests"]) == ("burstgpt", SPEED, 24)
    trace = read_trace(str(master_dir / "burstgpt.csv"))
    assert len(scheduled) > len(trace.requests)  # the surge's copies
    phases = pd.read_csv(run_dir / "phases.csv").set_index("label")
    start = float(phases.loc["start", "end_wall"])
    surge = phases.loc["surge-1 (x3)"]
    assert surge["kind"] == "burst" and surge["start_wall"] - start == pytest.approx(2.0 / SPEED, abs=0.01)
    records = pd.read_csv(run_dir / "requests.csv")
    first = records[records["attempt"] == 0]
    assert first["worker_id"].nunique() == 2
    assert Counter(first["trace_index"].astype(int)) == Counter(r.trace_index for r in scheduled)
    due = sorted(r.due_s for r in scheduled)
    sent_due = sorted(first["due_wall"] - start)
    assert sent_due == pytest.approx(due, abs=0.005)  # the master's warped schedule, on both workers
    assert (first["start_wall"] - first["due_wall"]).median() < 0.02
    assert [r.at_s / SPEED for r in trace.requests if r.at_s < 2.0] == pytest.approx(due[:8])
    assert json.loads((run_dir / "manifest.json").read_text())["options"]["trace_file"] == "burstgpt.csv"


def test_a_bad_warp_option_stops_the_start_in_one_line_with_exit_2(tmp_path):
    trace = burstgpt(tmp_path / "burstgpt.csv", rows=4)
    log = tmp_path / "locust.log"
    proc = ph.start(
        [sys.executable, "-m", "locust", "-f", LOCUSTFILES, "--headless", "--shape", "trace", "--host",
         "http://127.0.0.1:9", "--out", str(tmp_path / "runs"), "--trace-file", str(trace), "--trace-window", "9m..1m"],
        REPO,
        log,
    )  # fmt: skip
    assert proc.wait(timeout=WAIT_S) == 2
    text = log.read_text()
    errors = [line for line in text.splitlines() if "ERROR" in line]
    assert "Traceback" not in text
    assert len(errors) == 1 and "TraceShape: --trace-window" in errors[0], text[-2000:]
