"""Command-line, config-file and web-UI options of every shape, with their defaults in one table.

Importing this module (every shape does) registers `add_shape_arguments` as an
`init_command_line_parser` listener, so the options exist wherever a shape is loaded. Every option has a typed default (never None) because Locust's web UI converts form values
with the type of the default; `read()` falls back to the same defaults, so shapes also work when the
options were never registered (unit tests, a foreign locustfile).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from locust import events

from loadline.core.errors import UsageError
from loadline.core.runsettings import time_scale_of_options


@dataclass(frozen=True)
class ShapeOption:
    flag: str
    default: int | float | str | bool
    help: str

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


def to_bool(text: str | bool) -> bool:
    """argparse type for true/false values (conf files and the web UI send strings)."""
    if isinstance(text, bool):
        return text
    value = str(text).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


to_bool.__name__ = "true/false"  # argparse prints the type's name in its error message

OPTIONS: tuple[ShapeOption, ...] = (
    # stepped (also pulse: --baseline-hold is how long the baseline runs before the first change)
    ShapeOption("--baseline-hold", 60.0, "Seconds of the baseline phase (stepped: 1 user; pulse: base users)"),
    ShapeOption("--step-start-users", 10, "Stepped: users of the first step"),
    ShapeOption("--step-factor", 2.0, "Stepped: multiply the users by this at each step (1 = add only)"),
    ShapeOption("--step-add", 0, "Stepped: then add this many users at each step"),
    ShapeOption("--step-hold", 180.0, "Stepped: seconds each step holds its user count"),
    ShapeOption("--step-ramp", 0.0, "Stepped: seconds to ramp into each step (0 = as fast as possible)"),
    ShapeOption("--step-max-users", 640, "Stepped: never go above this many users (the last step)"),
    ShapeOption("--step-stop-on-slo", True, "Stepped: end the test at the first step that breaks the SLO"),
    ShapeOption("--step-max-error-rate", 0.05, "Stepped: a step with more failed requests than this breaks"),
    ShapeOption("--step-min-requests", 10, "Stepped: a step with fewer completed requests is not judged"),
    ShapeOption(
        "--step-settle", 5.0, "Stepped: wall seconds at the end of a step left out of its verdict (not scaled)"
    ),
    # pulse-burst
    ShapeOption("--burst-base-users", 4, "Pulse: users between bursts"),
    ShapeOption("--burst-factor", 3.0, "Pulse: burst users = base users x this"),
    ShapeOption("--burst-hold", 60.0, "Pulse: seconds each burst lasts"),
    ShapeOption("--burst-gap", 120.0, "Pulse: seconds back at base users after each burst (recovery)"),
    ShapeOption("--burst-repeats", 3, "Pulse: number of bursts"),
    # soak
    ShapeOption("--soak-users", 20, "Soak: users to hold"),
    ShapeOption("--soak-ramp", 60.0, "Soak: seconds to ramp up to the soak users"),
    ShapeOption("--soak-hold", 7200.0, "Soak: seconds to hold after the ramp"),
    ShapeOption("--soak-window", 600.0, "Soak: a phase marker every this many seconds (drift per window)"),
    # stages
    ShapeOption("--stages-file", "", "Stages: TOML file of [[stage]] duration/users/spawn_rate entries"),
    # drills (shapes/drill.py)
    ShapeOption("--sim-admin-url", "", "Drills: the simulator's admin API URL for stage fault actions (loadline run sets it)"),
)
DEFAULTS: dict[str, Any] = {o.dest: o.default for o in OPTIONS}


def add_shape_arguments(parser: Any) -> None:
    """Register every shape option on Locust's parser (visible in the web UI form, usable in conf files)."""
    for option in OPTIONS:
        value_type = to_bool if isinstance(option.default, bool) else type(option.default)
        parser.add_argument(
            option.flag,
            type=value_type,
            default=option.default,
            help=option.help,
            include_in_web_ui=True,
            env_var="LOCUST_" + option.dest.upper(),
        )


def read(options: Any, dest: str) -> Any:
    """The option's value from Locust's parsed options, or its default when it is missing."""
    default = DEFAULTS[dest]
    value = getattr(options, dest, default) if options is not None else default
    if value is None:
        return default
    if isinstance(default, bool):
        try:
            return to_bool(value)
        except ValueError:
            raise UsageError(f"--{dest.replace('_', '-')}: expected true or false, got {value!r}") from None
    try:
        converted = type(default)(value)
    except (TypeError, ValueError, OverflowError):
        converted = None
    if converted is None or (isinstance(converted, float) and not math.isfinite(converted)):
        raise UsageError(f"--{dest.replace('_', '-')}: expected a finite {type(default).__name__}, got {value!r}")
    return converted


def time_scale(options: Any) -> float:
    """`--time-scale` (registered by loadline.runtime.plugin): every shape duration is divided by it."""
    return time_scale_of_options(options)  # the one validation (loadline/core/runsettings.py)


def require(condition: bool, message: str) -> None:
    """Raise the one-line UsageError `message` unless `condition` holds."""
    if not condition:
        raise UsageError(message)


@events.init_command_line_parser.add_listener
def _register(parser: Any, **_: Any) -> None:
    add_shape_arguments(parser)
