"""Shape names for `loadline run --shape NAME`: the entry file to pass to Locust and the class in it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadline.core.errors import UsageError
from shapes.base import PhasedShape
from shapes.pulse import PulseShape
from shapes.soak import SoakShape
from shapes.stages import StagesShape
from shapes.stepped import StepShape

SHAPES: dict[str, type[PhasedShape]] = {
    "stepped": StepShape,
    "pulse": PulseShape,
    "soak": SoakShape,
    "stages": StagesShape,
}
LOCUSTFILES = Path(__file__).resolve().parent.parent / "locustfiles"


def shape_class(name: str) -> type[PhasedShape]:
    try:
        return SHAPES[name]
    except KeyError:
        raise UsageError(f"unknown shape {name!r} (known: {', '.join(SHAPES)})") from None


def entry_file(name: str) -> Path:
    """locustfiles/shape_<name>.py, the file to append to Locust's -f list."""
    shape_class(name)
    return LOCUSTFILES / f"shape_{name}.py"


def check(name: str, options: Any) -> float:
    """Validate the shape's options before Locust starts; returns the planned duration in seconds.

    Raises UsageError with a one-line reason (bad option, missing stages file, ...).
    """
    shape = shape_class(name)()
    return sum(p.duration_s for p in shape.planned(options))
