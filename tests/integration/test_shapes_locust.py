"""Shapes through plain `locust` (no loadline run, no target): an idle user, a real runner."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IDLE_USER = ROOT / "tests" / "locust_idle_user.py"
ENTRY = ROOT / "locustfiles" / "shape.py"
SQUARE = ROOT / "tests" / "fixtures" / "square_shape.py"  # a shape outside the shapes package


def locust(tmp_path: Path, shape: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        f"{IDLE_USER},{ENTRY}",
        "--shape",
        shape,
        "--headless",
        "--host",
        "http://127.0.0.1:9",
        "--out",
        str(tmp_path / "runs"),
        *args,
    ]
    return subprocess.run(
        cmd, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False, env={**os.environ, **(env or {})}
    )


def test_plain_locust_runs_the_pulse_shape_and_writes_the_timeline(tmp_path):
    done = locust(tmp_path, "pulse", "--time-scale", "60", "--burst-base-users", "2", "--burst-repeats", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    (phases,) = (tmp_path / "runs").glob("*/phases.csv")
    with open(phases, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["label"], r["target_users"], r["users_end"]) for r in rows] == [
        ("baseline", "2", "2"),
        ("burst-1 (6 users)", "6", "6"),
        ("recover-1 (2 users)", "2", "2"),
    ]
    assert "Phase 2/3: burst-1 (6 users)" in done.stderr


def test_bad_shape_options_exit_2_with_one_line_and_no_traceback(tmp_path):
    done = locust(tmp_path, "stepped", "--step-factor", "0.5")
    assert done.returncode == 2
    assert "StepShape: --step-factor must be >= 1" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unknown_shape_is_one_line_and_exit_2(tmp_path):
    done = locust(tmp_path, "zigzag")
    assert done.returncode == 2
    assert (
        "--shape zigzag: unknown shape (known: pulse, rate-steps, rate-sweep, soak, stages, stepped, trace)"
        in done.stderr
    )
    assert "Traceback" not in done.stderr


def test_the_entry_file_offers_every_shape_to_the_class_picker_the_selected_one_first():
    # Locust's own loader, in a child process (the entry file hooks loadline.runtime.plugin into Locust's
    # events); a shape in a fixture file joins through LOADLINE_SHAPE_MODULES alone.
    code = (
        "import sys; from locust.util.load_locustfile import load_locustfile; "
        "users, shapes = load_locustfile(sys.argv[1]); print([type(s).__name__ for s in shapes])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(ENTRY), "--shape", "square"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "LOADLINE_SHAPE_MODULES": str(SQUARE)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == (
        "['SquareWaveShape', 'PulseShape', 'RateStepShape', 'RateSweepShape', 'SoakShape', 'StagesShape', 'StepShape', 'TraceShape']"
    )


def test_loadline_run_lists_the_shapes_without_importing_locust():
    """The catalog is read from source: gevent's monkey-patching stays out of the supervising process."""
    code = (
        "import sys; from loadline.commands import run; import argparse; p = argparse.ArgumentParser(); "
        "run.add_arguments(p); print('square' in p.format_help(), 'locust' in sys.modules, 'gevent' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "LOADLINE_SHAPE_MODULES": str(SQUARE)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "False", "False"]


def test_a_fixture_shape_runs_through_plain_locust(tmp_path):
    done = locust(
        tmp_path, "square", "--time-scale", "60", "--square-half", "60", env={"LOADLINE_SHAPE_MODULES": str(SQUARE)}
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (phases,) = (tmp_path / "runs").glob("*/phases.csv")
    with open(phases, newline="") as f:
        assert [(r["label"], r["users_end"]) for r in csv.DictReader(f)] == [
            ("low-1", "2"),
            ("high-1", "6"),
            ("low-2", "2"),
            ("high-2", "6"),
        ]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition, timeout_s: float, what: str):
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def test_web_ui_form_picks_a_shape_and_sets_its_options(tmp_path):
    import urllib.parse
    import urllib.request

    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        f"{IDLE_USER},{ENTRY}",
        "--class-picker",
        "--web-host",
        "127.0.0.1",
        "--web-port",
        str(port),
        "--host",
        "http://127.0.0.1:9",
        "--out",
        str(tmp_path / "runs"),
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "LOADLINE_SHAPE_MODULES": str(SQUARE)},
    )
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return urllib.request.urlopen(base + "/", timeout=2).status == 200
        except OSError:
            return False

    try:
        wait_for(up, 30, "the web UI")
        page = urllib.request.urlopen(base + "/", timeout=10).read()
        # the fixture file's shape is in the class picker and its options in the form
        assert b"SquareWaveShape" in page and b"square_high_users" in page
        form = {
            "user_count": "1",
            "spawn_rate": "1",
            "host": "http://127.0.0.1:9",
            "shape_class": "StepShape",
            "user_classes": "IdleUser",
            "time_scale": "60",
            "baseline_hold": "60",
            "step_start_users": "2",
            "step_max_users": "4",
            "step_hold": "120",
            "step_stop_on_slo": "false",
        }
        request = urllib.request.Request(base + "/swarm", data=urllib.parse.urlencode(form).encode())
        assert b"StepShape" in urllib.request.urlopen(request, timeout=10).read()

        def timeline_rows():
            found = list((tmp_path / "runs").glob("*/phases.csv"))
            if not found:
                return None
            with open(found[0], newline="") as f:
                rows = list(csv.DictReader(f))
            return rows if len(rows) == 3 else None

        rows = wait_for(timeline_rows, 30, "three phases in phases.csv")
        assert [r["label"] for r in rows] == ["baseline", "step-1 (2 users)", "step-2 (4 users)"]
        # the form's durations, divided by the form's time scale (defaults would be 60 s and 180 s)
        for row, planned_s in zip(rows, (1.0, 2.0, 2.0)):
            assert planned_s - 0.05 <= float(row["end_wall"]) - float(row["start_wall"]) < planned_s + 1.5
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
