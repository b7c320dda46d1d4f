"""`loadline run` checks its own options before anything starts, and hands Locust the load options
in Locust's order: command line over conf file over our defaults."""

from __future__ import annotations

import argparse

import pytest
from locust.util.timespan import parse_timespan as locust_parse_timespan

from loadline.commands import run, run_checks
from loadline.core.errors import UsageError


def parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    run.add_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize(
    "text",
    [
        "20",
        "20s",
        "3m",
        "2h",
        "1h20m",
        "3h30m10s",
        "0",
        "90s",
        "1m30s",
        "abc",
        "",
        "1.5m",
        "5 m",
        "m",
        "s1",
        "10x",
        "1h1h",
        "-5s",
    ],
)
def test_run_time_grammar_is_locusts(text):
    try:
        expected = locust_parse_timespan(text)
    except ValueError:
        with pytest.raises(ValueError):
            run_checks.parse_timespan(text)
    else:
        assert run_checks.parse_timespan(text) == expected


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--run-time", "abc"], "--run-time"),
        (["--run-time", "0s"], "--run-time"),
        (["--users", "0"], "--users must be >= 1"),
        (["--users", "-3"], "--users must be >= 1"),
        (["--spawn-rate", "0"], "--spawn-rate"),
        (["--workers", "-1"], "--workers"),
    ],
)
def test_bad_load_options_are_refused_before_anything_starts(argv, words):
    with pytest.raises(UsageError, match=words):
        run_checks.validate(parsed(*argv))


def test_without_shape_or_conf_our_defaults_go_to_locust():
    assert run._load_options(parsed()) == ["--users", "10", "--spawn-rate", "10", "--run-time", "60s"]


def test_command_line_wins_over_a_conf_file(tmp_path):
    conf = tmp_path / "p.conf"
    conf.write_text("locustfile = locustfiles/chat.py\nusers = 3\nrun-time = 5m\n")
    args = parsed("--config", str(conf), "--users", "7", "--run-time", "20s")
    assert run._load_options(args) == ["--users", "7", "--spawn-rate", "10", "--run-time", "20s"]


def test_conf_file_values_are_left_to_locust_and_missing_ones_get_defaults(tmp_path):
    conf = tmp_path / "p.conf"
    conf.write_text("locustfile = locustfiles/chat.py\nusers = 3\n")
    assert run._load_options(parsed("--config", str(conf))) == ["--spawn-rate", "10", "--run-time", "60s"]


def test_a_shape_gets_only_explicit_values():
    assert run._load_options(parsed("--shape", "stepped")) == []
    assert run._load_options(parsed("--shape", "stepped", "--run-time", "2m")) == ["--run-time", "2m"]
