"""`loadline run` refuses bad input before any process starts: exit 2, one line, no run folder, no
simulator.

Input that Locust's own parser judges (the conf file, the users' options, a stage file) goes through the
precheck child (loadline/commands/run.py _precheck): one real `loadline run` process per case. Input
that run.py's _validate refuses (the SLO file, --run-time) never leaves the command's own process: those
cases call its entry, loadline.commands.main.main (what `python -m loadline` runs), in process, with
the simulator and Locust launchers replaced by a failure, as tests/unit/test_cli_args.py does.
"""

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
        "trace-json.jsonl": '{"timestamp": 0, "input_length": 10, "output_length": 2}\n{"timestamp": 5, "input_le\n',
        "trace-missing.jsonl": '{"timestamp": 0, "input_length": 10, "output_length": 2}\n{"timestamp": 5, "input_length": 9}\n',
        "trace-backwards.jsonl": (
            '{"timestamp": 900, "input_length": 10, "output_length": 2}\n'
            '{"timestamp": 500, "input_length": 10, "output_length": 2}\n'
        ),
        "trace-azure.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,374,-4\n",
        "trace-burstgpt.csv": "Timestamp,Model,Request tokens,Response tokens\n5,ChatGPT,many,18\n",
        "trace-cut.parquet": "PAR1 not a whole file",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return {name: str(tmp_path / name) for name in files}


# refused by the precheck child (Locust's parser, the shape, the users' settings)
CASES = [
    (["--shape", "stages", "--", "--stages-file", "{stages-garbage.toml}"], "not valid TOML"),
    (["--config", "{profile-bad.conf}"], "locust: argument --step-hold: invalid float value: 'abc'"),
    (["--config", "{profile-negative.conf}"], "--max-tokens must be >= 0"),
    (["--", "--think-mean", "abc"], "locust: argument --think-mean: invalid float value"),
    (["--trace", "{trace-backwards.jsonl}"], "line 2: timestamp goes backwards"),  # the real command, end to end
]
# refused by run.py's _validate, before the precheck: no process of its own to start (1.7 s each as one)
IN_PROCESS_CASES = [
    (["--slo", "{tmp}"], "is a directory"),
    (["--slo", "{slo-garbage.toml}"], "not valid TOML"),
    (["--slo", "{slo-type.toml}"], "e2e_p95_ms must be a number"),
    (["--run-time", "abc"], "--run-time"),
    (["--trace", "{trace-json.jsonl}"], "line 2: not JSON"),
    (["--trace", "{trace-missing.jsonl}"], "line 2: missing field 'output_length'"),
    (["--trace", "{trace-backwards.jsonl}"], "line 2: timestamp goes backwards"),
    (["--trace", "{trace-azure.csv}"], "line 2: GeneratedTokens must be >= 0"),
    (["--trace", "{trace-burstgpt.csv}"], "line 2: Request tokens must be a whole number"),
    (["--trace", "{trace-cut.parquet}"], "not a readable Parquet file"),
    (["--trace", "{trace-json.jsonl}", "--rate", "3"], "no --rate"),
    (["--trace-surge", "3x@10m+2m"], "need --trace FILE"),
    (["--trace-format", "burstgpt"], "need --trace FILE"),
    (["--trace", "{trace-missing.jsonl}", "--trace-window", "9h..8h"], "--trace-window"),
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


@pytest.mark.parametrize("argv, words", IN_PROCESS_CASES)
def test_bad_input_is_one_line_exit_2_before_anything_starts_in_process(tmp_path, capsys, monkeypatch, argv, words):
    from loadline.commands import run as run_command
    from loadline.commands.main import main as cli

    def refuse(*_, **__):
        raise AssertionError("the input was accepted: loadline run went on to start a process")

    monkeypatch.setattr(run_command, "_precheck", refuse)
    monkeypatch.setattr(run_command, "start_simulator", refuse)
    monkeypatch.setattr(run_command, "_run_locust", refuse)
    paths = {"tmp": str(tmp_path), **_files(tmp_path)}
    out = tmp_path / "runs"
    capsys.readouterr()
    code = cli(["run", "--out", str(out), *[_fill(a, paths) for a in argv]])
    stderr = capsys.readouterr().err
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 2, stderr[-2000:]
    assert len(lines) == 1 and words in lines[0] and lines[0].startswith("loadline run: error:"), lines
    assert not out.exists() or not any(out.iterdir())  # no run folder: the simulator never started


def test_locusts_own_option_errors_say_locust_not___main__(tmp_path):
    from loadline.commands.run import LOCUST  # the launcher loadline run starts Locust with

    done = subprocess.run(
        [*LOCUST, "-f", str(REPO / "locustfiles" / "chat.py"), "--headless", "--think-mean", "abc"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "locust: error: argument --think-mean: invalid float value: 'abc'" in done.stderr, done.stderr[-1000:]
    assert "__main__.py" not in done.stderr


def test_help_after_the_separator_lists_loadlines_and_the_shapes_options_and_starts_nothing(tmp_path):
    # Locust's own --help stops before it loads locustfiles: it listed none of these and exited 2
    done = subprocess.run(
        [sys.executable, "-m", "loadline", "run", "--", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for option in ("--think-p90", "--max-tokens", "--slo-file", "--step-hold", "--burst-factor", "--stages-file"):
        assert option in done.stdout, option
    assert "simulator" not in done.stderr and list(tmp_path.iterdir()) == []  # no run folder, no simulator
