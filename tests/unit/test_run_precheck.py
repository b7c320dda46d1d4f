"""`loadline run` checks every input before any process starts: its own
options and files in process (`_validate`), Locust's whole command line in a throwaway child
(loadline/commands/precheck.py, driven in process here): one line, UsageError (exit 2)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from loadline.commands import precheck, run, run_checks
from loadline.core.errors import UsageError

REPO = Path(__file__).resolve().parents[2]
ENTRY = ["-f", f"{REPO}/locustfiles/chat.py,{REPO}/locustfiles/shape.py"]


def parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    run.add_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize(
    "text, words",
    [
        ("garbage {{{\n", "not valid TOML"),
        ('[slo]\nttft_p95_ms = "fast"\n', "ttft_p95_ms must be a number"),
        ("[slo]\ne2e_p95_ms = -5\n", "e2e_p95_ms"),
        ("[slo]\nno_such_key = 1\n", "unknown keys"),
    ],
)
def test_a_bad_slo_file_is_refused_before_the_run(tmp_path, text, words):
    slo = tmp_path / "slo.toml"
    slo.write_text(text)
    with pytest.raises(UsageError, match=words) as raised:
        run_checks.validate(parsed("--slo", str(slo)))
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("option", ["--slo", "--config"])
def test_a_directory_for_a_file_is_one_line(tmp_path, option):
    with pytest.raises(UsageError, match="is a directory"):
        run_checks.validate(parsed(option, str(tmp_path)))


def test_a_binary_conf_file_is_one_line():
    with pytest.raises(UsageError, match="not a Locust conf file"):
        run_checks.validate(parsed("--config", "/bin/true"))


def _conf(tmp_path, text: str) -> str:
    path = tmp_path / "profile.conf"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--think-mean", "abc"], "argument --think-mean: invalid float value: 'abc'"),
        (["--bogus-option", "3"], "unrecognized arguments: --bogus-option"),
        (["--max-tokens", "-5"], "--max-tokens must be >= 0"),
        (["--turns-max", "0"], "--turns-max must be >= 1"),
        (["--think-mean", "nan"], "--think-mean must be >= 0"),
        (["--connect-timeout", "0"], "--connect-timeout must be > 0"),
        (["--prompt-mix", "foo=1"], "unknown length class 'foo'"),
        (["--request-id-header", "a b"], "not a valid HTTP header name"),
        (["--shape", "stages"], "needs --stages-file"),
        (["--shape", "stages", "--stages-file", "/nonexistent/stages.toml"], "stages file not found"),
        (["--shape", "stepped", "--step-factor", "0.5"], "--step-factor must be >= 1"),
        (["--shape", "nope"], "unknown shape"),
    ],
)
def test_locusts_command_line_is_checked_before_anything_starts(argv, words):
    with pytest.raises((UsageError, SystemExit)) as raised:
        precheck.check([*ENTRY, "--headless", *argv])
    if raised.type is UsageError:
        assert words in str(raised.value) and "\n" not in str(raised.value)
    else:  # the shape entry file itself said why and exited 2
        assert raised.value.code == 2


def test_a_profile_with_a_bad_loadline_value_is_refused(tmp_path):
    conf = _conf(
        tmp_path,
        f"locustfile = {REPO}/locustfiles/chat.py,{REPO}/locustfiles/shape.py\nshape = stepped\nstep-hold = abc\n",
    )
    with pytest.raises(UsageError, match="argument --step-hold: invalid float value"):
        precheck.check(["--config", conf, "--headless"])


def test_a_garbage_stages_file_is_refused(tmp_path):
    stages = tmp_path / "stages.toml"
    stages.write_bytes(b"not toml: [\n\x00\x01")
    with pytest.raises(UsageError, match="not valid TOML"):
        precheck.check([*ENTRY, "--shape", "stages", "--stages-file", str(stages)])


def test_a_sound_command_line_passes(tmp_path):
    precheck.check([*ENTRY, "--headless", "--shape", "stepped", "--users", "3", "--max-tokens", "0"])
    precheck.check(
        run._locust_command(parsed("--users", "2"), run.PRECHECK_HOST, tmp_path / "x", "")[len(run.LOCUST) :]
    )


RATE_ENTRY = ["-f", f"{REPO}/locustfiles/rate.py,{REPO}/locustfiles/shape.py"]


@pytest.mark.parametrize("shape", ["rate-steps", "rate-sweep"])
@pytest.mark.parametrize(
    "scenario, user", [("chat", "ChatSessionUser"), ("single_shot", "SingleShotUser"), ("completion", "CompletionUser")]
)
def test_a_rate_shape_with_closed_loop_users_is_refused_before_the_run(shape, scenario, user):
    """A rate shape publishes arrival rates that only the open-loop users follow. With chat users it
    started one user, carried 0.14/s of the 1/s offered, stopped at its first step, and the report
    said PASS with headroom (a new user's `loadline run --shape rate-steps`)."""
    entry = ["-f", f"{REPO}/locustfiles/{scenario}.py,{REPO}/locustfiles/shape.py"]
    with pytest.raises(UsageError, match=f"--shape {shape} offers arrival rates.*{user} run closed loop") as raised:
        precheck.check([*entry, "--headless", "--shape", shape])
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("shape", ["rate-steps", "rate-sweep"])
def test_a_rate_shape_with_the_open_loop_users_passes_and_is_implied_when_no_scenario_is_named(shape, tmp_path):
    precheck.check([*RATE_ENTRY, "--headless", "--shape", shape])
    args = parsed("--shape", shape)
    run._imply_open_loop(args, shape, conf_locustfile="")
    assert args.scenario == "rate"
    precheck.check(run._locust_command(args, run.PRECHECK_HOST, tmp_path / "x", "")[len(run.LOCUST) :])
    for named in (parsed("--shape", shape, "--scenario", "chat"), parsed("--shape", "stepped")):
        before = named.scenario
        run._imply_open_loop(named, named.shape, conf_locustfile="")
        assert named.scenario == before  # a named scenario, or a closed-loop shape: untouched


@pytest.mark.parametrize("shape", ["", "pulse", "stepped", "soak"])
def test_open_loop_users_with_no_rate_are_refused_before_the_run(shape):
    """`--scenario rate` with no --rate and a shape that sets users: the arrival users waited for a rate
    for the whole pulse (minutes), sent nothing, and the run ended as an empty run."""
    argv = [*RATE_ENTRY, "--headless", *(["--shape", shape] if shape else [])]
    said = f"--shape {shape} sets users, not rates" if shape else "no shape sets one"
    with pytest.raises(UsageError, match=f"none is set: {said}; give --rate R") as raised:
        precheck.check(argv)
    assert "\n" not in str(raised.value)
    precheck.check([*argv, "--arrival-rate", "2"])  # a rate: fine, whatever the shape


def test_open_loop_users_beside_closed_loop_ones_need_no_rate():
    both = ["-f", f"{REPO}/locustfiles/rate.py,{REPO}/locustfiles/chat.py,{REPO}/locustfiles/shape.py"]
    precheck.check([*both, "--headless", "--shape", "stepped"])  # the chat users make the load


@pytest.mark.parametrize(
    "profile, scenario",
    [
        ("rate-sweep", "rate"),
        ("standard", "completion"),
        ("burst", "single"),
        ("soak", "chat"),
        ("traffic-surprise", "completion"),
    ],
)
def test_a_profile_with_a_scenario_named_keeps_its_shape(profile, scenario, tmp_path):
    """`--config rate-sweep --scenario rate`: the scenario replaces the profile's locustfiles, and the
    profile's shape options (shape = rate-sweep, sweep-*) lost their entry file; Locust refused them
    after the simulator had started (the precheck had the shapes' options from its own imports)."""
    conf = REPO / "configs" / "profiles" / f"{profile}.conf"
    if not conf.exists():
        pytest.skip(f"no {profile} profile")
    cmd = run._locust_command(
        parsed("--config", str(conf), "--scenario", scenario),
        run.PRECHECK_HOST,
        tmp_path / "x",
        run_checks.conf_value(str(conf), "locustfile"),
    )
    files = cmd[cmd.index("-f") + 1].split(",")
    assert [Path(f).name for f in files] == [run.SCENARIOS[scenario], "shape.py"]
    precheck.check(cmd[len(run.LOCUST) :])


def test_shape_options_without_the_shape_entry_file_are_refused_by_the_precheck():
    """The precheck knows only the options the run's own locustfiles bring, as Locust does (in its
    own process: this one has every shape's options from other tests' imports)."""
    conf = REPO / "configs" / "profiles" / "rate-sweep.conf"
    for files, code in (("rate.py", 2), ("rate.py,shape.py", 0)):
        entry = ",".join(f"{REPO}/locustfiles/{name}" for name in files.split(","))
        done = subprocess.run(
            [sys.executable, "-m", "loadline.commands.precheck", "-f", entry, "--config", str(conf), "--headless"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == code, done.stderr
        if code:
            assert done.stderr.strip().splitlines() == [
                "loadline run: error: locust: unrecognized arguments: --shape=rate-sweep --sweep-start-rate=0.5 "
                "--sweep-max-rate=100 --sweep-hold=120 --sweep-probes=6"
            ], done.stderr
