"""A controlled clock and a stand-in runner for driving shapes' tick() without Locust running."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from loadline.runtime import timeline


class FakeClock:
    def __init__(self, wall0: float = 1_700_000_000.0):
        self.t = 0.0
        self.wall0 = wall0

    def monotonic(self) -> float:
        return self.t

    def wall(self) -> float:
        return self.wall0 + self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def make_shape(cls: type, **options: Any):
    """A shape wired to a FakeClock and a fake runner whose parsed options are `options`."""
    timeline.activate(None)
    shape = cls()
    shape.clock = FakeClock()
    environment = SimpleNamespace(parsed_options=SimpleNamespace(**options), process_exit_code=None, runner=None)
    shape.runner = SimpleNamespace(user_count=0, environment=environment)
    environment.runner = shape.runner
    return shape


def drive(shape, tick_every: float = 1.0, max_ticks: int = 100_000) -> list[tuple[float, Any]]:
    """Tick until the shape returns None; users follow each target at once. Returns (time, tick) pairs."""
    ticks = []
    for _ in range(max_ticks):
        tick = shape.tick()
        ticks.append((shape.clock.t, tick))
        if tick is None:
            return ticks
        shape.runner.user_count = tick[0]
        shape.clock.advance(tick_every)
    raise AssertionError(f"shape did not end within {max_ticks} ticks")


def changes(ticks: list[tuple[float, Any]]) -> list[tuple[float, Any]]:
    """Only the ticks whose value differs from the previous one (what Locust actually applies)."""
    out: list[tuple[float, Any]] = []
    for t, tick in ticks:
        if not out or out[-1][1] != tick:
            out.append((t, tick))
    return out
