"""The web UI's live LLM charts: a bounded history of window summaries, one point every ~2 s.

Pure (no Locust, no Flask): `Series` is fed a window function (loadline.runtime.live.window, which
speaks model time in a time-scaled run) and the run's users / phase at each sample; the web UI's
sampler greenlet (loadline/runtime/webui_live.py) calls `sample` and serves `as_json`.

A point describes the trailing `POINT_WINDOW_S` wall seconds of request *starts*, the same rule as
the report's windows (analysis/stats/phases.py assigns a request to the window it started in), so a
point's percentiles equal the report's over the same rows of requests.csv. A request is recorded
only when it ends, so a fresh window lacks the slow requests still in flight: points younger than
`SETTLE_S` are recomputed at every sample, and once more when they settle (or the run ends).

The pooled ITL percentiles parse every gap of every reply (~0.5 s per tick at 100 req/s of 256-token
replies if redone for every settling point), so they are computed twice per point only: when it is
new (provisional) and when it settles.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SAMPLE_S = 2.0  # Locust's web UI refreshes its charts from /stats/requests every 2 s
# Locust's charts plot "current" percentiles over the last 10 s (locust/stats.py,
# CURRENT_RESPONSE_TIME_PERCENTILE_WINDOW = 10): the same trailing window here.
POINT_WINDOW_S = 10.0
SETTLE_S = 30.0  # records arrive when their request ends; a long reply streams for tens of seconds
FINE_POINTS = int(2 * 3600 / SAMPLE_S)  # the last 2 hours at full resolution
COARSE_EVERY = 10  # older points: one in ten kept (one every 20 s)
COARSE_POINTS = 3 * FINE_POINTS  # ... for another 20 hours at most

# WindowSummary fields a point carries (model time: ms and per second)
FIELDS = (
    "requests",
    "ttft_p50_ms",
    "ttft_p95_ms",
    "ttft_p99_ms",
    "itl_pooled_p50_ms",
    "itl_p99_ms",
    "e2e_p95_ms",
    "output_tokens_per_s",
    "rps",
    "error_rate",
)
ITL_FIELDS = ("itl_pooled_p50_ms", "itl_p99_ms")  # the costly ones (pooled gaps)

# (start_wall, end_wall, itl) -> WindowSummary | None; itl=False may leave the ITL fields None
WindowFunction = Callable[[float, float, bool], Any]


@dataclass
class Point:
    start_wall: float  # the window: requests that started in [start_wall, end_wall)
    end_wall: float
    t: float  # the window's end in model seconds since the run started (the charts' x axis)
    users: int
    phase: str
    values: dict[str, float | None] = field(default_factory=dict)
    errors_per_s: dict[str, float] = field(default_factory=dict)  # by error class, model time
    settled: bool = False  # computed once more after SETTLE_S: final

    def as_json(self) -> dict:
        return {
            "t": round(self.t, 3),
            "start_wall": self.start_wall,
            "end_wall": self.end_wall,
            "users": self.users,
            "phase": self.phase,
            **self.values,
            "errors_per_s": self.errors_per_s,
            "settled": self.settled,
        }


@dataclass
class PhaseSpan:
    label: str
    kind: str
    start_wall: float
    end_wall: float | None  # None: still running


class Series:
    """The charts' history of one run. Not thread-safe: one greenlet samples, requests only read."""

    def __init__(
        self, started_wall: float, scale: float, window: WindowFunction, window_s: float = POINT_WINDOW_S
    ) -> None:
        self.started_wall = started_wall
        self.scale = scale
        self.window_s = window_s
        self._window = window
        self.fine: deque[Point] = deque()
        self.coarse: deque[Point] = deque(maxlen=COARSE_POINTS)
        self._dropped = 0
        self.phases: list[PhaseSpan] = []
        self.ended_wall: float | None = None

    def sample(self, wall: float, users: int, phase: str, phases: list[PhaseSpan] | None = None) -> Point:
        """A new point ending at `wall`; points still settling are recomputed from the records so far."""
        if phases:
            self.phases = list(phases)
        point = Point(
            max(self.started_wall, wall - self.window_s), wall, (wall - self.started_wall) * self.scale, users, phase
        )
        self._fill(point, itl=True)
        self._settle(wall)
        self.fine.append(point)
        while len(self.fine) > FINE_POINTS:
            old = self.fine.popleft()
            if self._dropped % COARSE_EVERY == 0:
                self.coarse.append(old)
            self._dropped += 1
        return point

    def finish(self, wall: float, phases: list[PhaseSpan] | None = None) -> None:
        """The run ended: the last points get the records that arrived while it stopped."""
        if phases:
            self.phases = list(phases)
        self.ended_wall = wall
        self._settle(wall, final=True)

    def points(self) -> list[Point]:
        return [*self.coarse, *self.fine]

    def _settle(self, wall: float, final: bool = False) -> None:
        for point in reversed(self.fine):
            if point.settled:
                break
            point.settled = final or wall - point.end_wall > SETTLE_S
            self._fill(point, itl=point.settled)

    def _fill(self, point: Point, itl: bool) -> None:
        summary = self._window(point.start_wall, point.end_wall, itl)
        kept = {name: point.values.get(name) for name in ITL_FIELDS}
        point.values = {name: getattr(summary, name, None) if summary is not None else None for name in FIELDS}
        if not itl:  # the provisional ITL stays until the point settles
            point.values.update(kept)
        if summary is None:
            point.values["requests"] = 0
        seconds = max(point.end_wall - point.start_wall, 1e-9) * self.scale
        by_class = getattr(summary, "errors_by_class", None) or {}
        point.errors_per_s = {name: count / seconds for name, count in sorted(by_class.items())}

    def as_json(self, since_t: float | None = None) -> dict:
        """Everything the charts draw; `since_t` keeps only later points: the page keeps the settled
        points it has and asks for those after the last one (younger points still change)."""
        points = [p for p in self.points() if since_t is None or p.t > since_t]
        return {
            "started_wall": self.started_wall,
            "ended_wall": self.ended_wall,
            "scale": self.scale,
            "sample_s": SAMPLE_S,
            "window_s": self.window_s,
            "settle_s": SETTLE_S,
            "points": [p.as_json() for p in points],
            "phases": [
                {
                    "label": s.label,
                    "kind": s.kind,
                    "start_t": round((s.start_wall - self.started_wall) * self.scale, 3),
                    "end_t": None if s.end_wall is None else round((s.end_wall - self.started_wall) * self.scale, 3),
                }
                for s in self.phases
            ],
        }
