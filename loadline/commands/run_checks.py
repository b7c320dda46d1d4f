"""`loadline run`'s options checked before anything starts: one line and exit 2 for each mistake.

A bad value found after a 30-minute run costs the run; found here it costs a second. The checks read
only the parsed options and the files they name (conf file, SLO file, trace: loadline/commands/trace_input.py).
"""

from __future__ import annotations

import argparse
import configparser
import re
from pathlib import Path

from loadline.commands import trace_input
from loadline.core import resources
from loadline.core.errors import UsageError
from loadline.core.redact import redact
from loadline.core.runsettings import validate_time_scale
from loadline.core.slo import SLO

OPEN_LOOP = "rate"  # the arrival-rate scenario: one scheduler user per process (users/arrivals.py)


def validate(args: argparse.Namespace) -> None:
    """Every option of `loadline run` checked before anything starts (UsageError: one line, exit 2)."""
    args.time_scale = validate_time_scale(args.time_scale)  # the one validation (loadline/core/runsettings.py)
    trace_input.validate(args)
    if args.rate is not None or args.arrival is not None:
        if args.scenario not in (None, OPEN_LOOP):
            raise UsageError(f"--rate/--arrival are for --scenario {OPEN_LOOP} (got --scenario {args.scenario})")
        args.scenario = OPEN_LOOP
    if args.rate is not None and not (args.rate > 0 and args.rate < float("inf")):
        raise UsageError(f"--rate must be > 0 requests/s (got {args.rate})")
    if args.workers < 0:
        raise UsageError(f"--workers must be >= 0 (got {args.workers})")
    if args.users is not None and args.users < 1:
        raise UsageError(f"--users must be >= 1 (got {args.users})")
    if args.spawn_rate is not None and not args.spawn_rate > 0:
        raise UsageError(f"--spawn-rate must be > 0 (got {args.spawn_rate})")
    if args.run_time is not None:
        try:
            seconds = parse_timespan(args.run_time)
        except ValueError:
            raise UsageError(f"--run-time: expected a duration like 90s, 5m or 1h30m (got {args.run_time!r})") from None
        if seconds <= 0:
            raise UsageError(f"--run-time must be longer than 0 s (got {args.run_time!r})")
    if args.host and (args.sim_profile or args.sim_option):
        raise UsageError("--sim-profile/--sim-option configure the embedded simulator; they make no sense with --host")
    if args.host and not args.host.startswith(("http://", "https://")):
        raise UsageError(f"--host must be a URL like http://127.0.0.1:8000 (got {redact(args.host)!r})")
    for option in args.sim_option:
        if "=" not in option:
            raise UsageError(f"--sim-option takes KEY=VALUE (got {option!r})")
    # A user's relative path: the current directory first, then Loadline's shipped configs/.
    args.config = str(resources.resolve(args.config, "profile")) if args.config else args.config
    args.slo = str(resources.resolve(args.slo, "slo")) if args.slo else args.slo
    for what, path, shelf in (("config file", args.config, "profile"), ("SLO file", args.slo, "slo")):
        if path and Path(path).is_dir():
            raise UsageError(f"{what} {path} is a directory: give a file")
        if path and not Path(path).is_file():
            raise UsageError(
                f"{what} not found: {path} (a path, or one of Loadline's: {resources.shipped_names(shelf)})"
            )
    SLO.from_file(args.slo)  # types and ranges now, not after a 30-minute run
    conf_value(args.config, "locustfile")  # a conf file that is not one: said before anything starts


TIMESPAN = re.compile(r"(?:(?P<hours>\d+)h)?(?:(?P<minutes>\d+)m)?(?:(?P<seconds>\d+)s)?")


def parse_timespan(text: str) -> int:
    """Seconds in `20`, `20s`, `3m`, `1h30m`...; ValueError otherwise."""
    if text.isdigit():
        return int(text)
    match = TIMESPAN.fullmatch(text)
    if not text or match is None or not any(match.groupdict().values()):
        raise ValueError(f"invalid time span {text!r}")
    parts = {k: int(v or 0) for k, v in match.groupdict().items()}
    return parts["hours"] * 3600 + parts["minutes"] * 60 + parts["seconds"]


def conf_value(path: str | None, key: str) -> str:
    if not path:
        return ""
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    try:
        parser.read_string("[conf]\n" + Path(path).read_text())
    except (configparser.Error, UnicodeDecodeError) as exc:
        raise UsageError(f"config file {path} is not a Locust conf file: {exc}") from None
    return parser.get("conf", key, fallback="").strip()
