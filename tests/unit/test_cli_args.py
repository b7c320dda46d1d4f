"""Argument handling, help text and one-line errors of the `loadline` commands, in process.

`loadline.commands.main.main(argv)` is what the console script and `python -m loadline` run; calling it
here checks the same exit codes and stderr lines without starting a Python per case. Whatever starts
a process for real (the simulator's startup line, an unreachable --host) stays in tests/integration
and tests/e2e.
"""

from __future__ import annotations

import asyncio
import io
import socket
from dataclasses import dataclass

import pytest

from loadline.commands import run as run_command
from loadline.commands import sim as sim_command
from loadline.commands.main import main as cli

SERVE_BOUND_S = 10.0  # a serve() that unexpectedly starts is stopped here, never left running


@dataclass
class Finished:
    code: int
    stdout: str
    stderr: str


def run_cli(capsys, *argv: str) -> Finished:
    """Exit code and output of `loadline ARGV`; argparse's own exits (help, usage) count like main's."""
    capsys.readouterr()
    try:
        code = cli(list(argv))
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    out = capsys.readouterr()
    return Finished(code, out.out, out.err)


@pytest.fixture
def bounded_serve(monkeypatch):
    """`loadline sim` serves through the real loadline.simulator.server.serve, but at most SERVE_BOUND_S."""
    real_serve = sim_command.serve

    async def serve(config, options):
        return await asyncio.wait_for(real_serve(config, options, out=io.StringIO()), SERVE_BOUND_S)

    monkeypatch.setattr(sim_command, "serve", serve)
    monkeypatch.setenv("LOADLINE_SIM_EVENT_LOOP", "asyncio")


@pytest.fixture
def nothing_starts(monkeypatch):
    """`loadline run` input that should be refused: if it were accepted, fail instead of starting anything."""

    def refuse(*_, **__):
        raise AssertionError("the input was accepted: loadline run went on to start a process")

    monkeypatch.setattr(run_command, "start_simulator", refuse)
    monkeypatch.setattr(run_command, "_run_locust", refuse)


def test_sim_help_explains_every_option(capsys):
    done = run_cli(capsys, "sim", "--help")
    assert done.code == 0
    for option in (
        "--profile",
        "--port",
        "--truth",
        "--api-key",
        "--admin",
        "--replicas",
        "--lb",
        "--time-scale",
        "--max-queue",
        "--set",
        "--error-rate",
        "--latency-spike",
        "--leak-blocks-per-s",
        "--max-connections",
        "--accept-delay-ms",
        "--max-num-seqs",
        "--num-gpu-blocks",
    ):
        assert option in done.stdout, option


@pytest.mark.parametrize(
    "args",
    [["--set", "max_num_seqs=abc"], ["--set", "nonsense=1"], ["--profile", "no-such-profile"], ["--lb", "random"]],
)
def test_sim_bad_options_exit_2_with_one_line(capsys, bounded_serve, args):
    done = run_cli(capsys, "sim", "--port", "0", *args)
    assert done.code == 2, (args, done.stderr)
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr


def test_sim_port_in_use_is_a_one_line_error(capsys, bounded_serve):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        done = run_cli(capsys, "sim", "--profile", "tiny", "--port", str(taken.getsockname()[1]))
    assert done.code == 2 and "cannot serve" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["plan"],
        ["plan", "--per-replica-qps", "0", "--target-qps", "1"],
        ["plan", "--run", "/no/such/run"],
        ["plan", "--per-replica-qps", "5", "--params-b", "7", "--dtype", "fp5"],
    ],
)
def test_plan_command_bad_input_exits_2_with_one_line(capsys, argv):
    done = run_cli(capsys, *argv)
    assert done.code == 2
    assert done.stderr.strip().count("\n") == 0 and "error" in done.stderr and "Traceback" not in done.stderr


# `loadline run` input refused before anything starts (no simulator, no Locust, no run folder left).
@pytest.mark.parametrize(
    "args, message",
    [
        (["--host", "localhost:8000"], "must be a URL"),
        (["--sim-option", "max_num_seqs"], "KEY=VALUE"),
        (["--time-scale", "0"], "time-scale"),
        (["--config", "/nonexistent.conf"], "not found"),
        (
            ["--config", "standrd"],
            "not found: standrd (a path, or one of Loadline's: burst, ",
        ),  # the names to pick from
        (["--slo", "strcit"], "one of Loadline's: default, drill, relaxed, strict"),
    ],
)
def test_run_bad_input_is_one_line_and_exit_2(capsys, tmp_path, nothing_starts, args, message):
    done = run_cli(capsys, "run", "--out", str(tmp_path), "--run-time", "2s", *args)
    assert done.code == 2
    lines = [line for line in done.stderr.splitlines() if line.startswith("loadline run: error:")]
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert "Traceback" not in done.stderr
