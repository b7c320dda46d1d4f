"""Shape options: how a shape declares one (ShapeOption), how it reads one, and the ones shapes share.

A shape lists its options next to its class (`shape_options`, see shapes/registry.py, which puts
every registered shape's options on Locust's parser whenever a shape is loaded). Every option has a
typed default (never None) because Locust's web UI converts form values with the type of the
default; `ShapeOption.read()` falls back to the same default, so shapes also work when the options
were never registered (unit tests, a foreign locustfile).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loadline.core.errors import UsageError
from loadline.core.runsettings import time_scale_of_options


def to_bool(text: object) -> bool:
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


@dataclass(frozen=True)
class ShapeOption:
    flag: str  # e.g. "--step-hold": the command line, `step-hold = 30` in a conf file, LOCUST_STEP_HOLD
    default: int | float | str | bool
    help: str

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def value_type(self) -> Callable[[Any], Any]:
        return to_bool if isinstance(self.default, bool) else type(self.default)

    def read(self, options: Any) -> Any:
        """The value from Locust's parsed options, or the default when it is missing."""
        value = getattr(options, self.dest, self.default) if options is not None else self.default
        if value is None:
            return self.default
        if isinstance(self.default, bool):
            try:
                return to_bool(value)
            except ValueError:
                raise UsageError(f"{self.flag}: expected true or false, got {value!r}") from None
        try:
            converted = type(self.default)(value)
        except (TypeError, ValueError, OverflowError):
            converted = None
        if converted is None or (isinstance(converted, float) and not math.isfinite(converted)):
            raise UsageError(f"{self.flag}: expected a finite {type(self.default).__name__}, got {value!r}")
        return converted


# Shared by the stepped and pulse shapes: how long the baseline runs before the first change.
BASELINE_HOLD = ShapeOption(
    "--baseline-hold", 60.0, "Seconds of the baseline phase (stepped: 1 user; pulse: base users)"
)


def time_scale(options: Any) -> float:
    """`--time-scale` (registered by loadline.runtime.plugin): every shape duration is divided by it."""
    return time_scale_of_options(options)  # the one validation (loadline/core/runsettings.py)


def require(condition: object, message: str) -> None:
    """Raise the one-line UsageError `message` unless `condition` holds."""
    if not condition:
        raise UsageError(message)
