"""`loadline run` refuses bad input before any process starts: exit 2, one line, no run folder, no
simulator (issue 12, items 3, 4 and 9). One real `loadline run` process per case."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _files(tmp_path: Path) -> dict[str, str]:
    files = {
        "slo-garbage.toml": "garbage {{{\n",
        "slo-type.toml": '[slo]\ne2e_p95_ms = "fast"\n',
        "stages-garbage.toml": "[[stage]\nduration = \x01\n",
        "profile-bad.conf": "locustfile = locustfiles/chat.py,locustfiles/shape.py\nshape = stepped\nstep-hold = abc\n",
        "profile-negative.conf": "max-tokens = -5\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return {name: str(tmp_path / name) for name in files}


CASES = [
    (["--slo", "{tmp}"], "is a directory"),
    (["--slo", "{slo-garbage.toml}"], "not valid TOML"),
    (["--slo", "{slo-type.toml}"], "e2e_p95_ms must be a number"),
    (["--shape", "stages", "--", "--stages-file", "{stages-garbage.toml}"], "not valid TOML"),
    (["--config", "{profile-bad.conf}"], "locust: argument --step-hold: invalid float value: 'abc'"),
    (["--config", "{profile-negative.conf}"], "--max-tokens must be >= 0"),
    (["--", "--think-mean", "abc"], "locust: argument --think-mean: invalid float value"),
    (["--run-time", "abc"], "--run-time"),
]


def _fill(arg: str, paths: dict[str, str]) -> str:
    for name, path in paths.items():
        arg = arg.replace("{" + name + "}", path)
    return arg


@pytest.mark.parametrize("argv, words", CASES)
def test_bad_input_is_one_line_exit_2_before_anything_starts(tmp_path, argv, words):
    paths = {"tmp": str(tmp_path), **_files(tmp_path)}
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "loadline", "run", "--out", str(out), *[_fill(a, paths) for a in argv]]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(lines) == 1 and words in lines[0] and lines[0].startswith("loadline run: error:"), lines
    assert "__main__.py" not in done.stderr
    assert not out.exists() or not any(out.iterdir())  # no run folder: the simulator never started


def test_locusts_own_option_errors_say_locust_not___main__(tmp_path):
    from loadline.commands.run import LOCUST  # the launcher loadline run starts Locust with

    done = subprocess.run([*LOCUST, "-f", str(REPO / "locustfiles" / "chat.py"), "--headless", "--think-mean", "abc"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "locust: error: argument --think-mean: invalid float value: 'abc'" in done.stderr, done.stderr[-1000:]
    assert "__main__.py" not in done.stderr
