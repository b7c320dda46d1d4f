"""A folder `loadline/` or a file `loadline.py` where `loadline run` is started does not shadow the
installed package in its child processes (Locust, the simulator, the precheck): they start Python
with -P (loadline/core/childpython.py), so the working directory is not first on their sys.path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

LOADLINE = str(Path(sys.executable).parent / "loadline")  # the console script, as a user starts it
RUN_TIMEOUT_S = 180
SHORT_RUN = [
    "--sim-profile",
    "tiny",
    "--users",
    "1",
    "--run-time",
    "8s",  # a run's clock starts before its user's start-up probes: 3 s on a loaded 2-core box sent nothing
    "--no-report",
    "--",
    "--think-mean",
    "0.1",
    "--think-p90",
    "0.2",
    "--max-tokens",
    "8",
    "--prompt-mix",
    "short=1",
]


def _folder(cwd: Path) -> None:
    (cwd / "loadline").mkdir()
    (cwd / "loadline" / "__init__.py").write_text("raise ImportError('the working directory shadowed loadline')\n")


def _file(cwd: Path) -> None:
    (cwd / "loadline.py").write_text("raise ImportError('the working directory shadowed loadline')\n")


@pytest.mark.parametrize("shadow", [_folder, _file], ids=["folder", "file"])
def test_a_loadline_folder_or_file_in_the_working_directory_does_not_break_a_run(tmp_path, shadow):
    shadow(tmp_path)
    assert Path(LOADLINE).exists()
    done = subprocess.run(
        [LOADLINE, "run", "--out", "runs", *SHORT_RUN],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "shadowed" not in done.stderr
    run_dir = Path(tmp_path / done.stdout.strip().splitlines()[-1])
    assert json.loads((run_dir / "manifest.json").read_text())["requests_written"] > 0
