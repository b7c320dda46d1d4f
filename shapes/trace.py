"""Trace shape: the phase timeline of a trace replay (`loadline run --trace FILE`).

The requests' times come from the schedule (loadline/core/trace_warp.py; shapes/trace_source.py
says whether the master warps a --trace-file or every process reads a --trace-schedule), not from
this shape:
it runs one trace user per process, starts the replay (loadline/runtime/trace.py: the start on the
master's clock, each worker's share), and records the replay's phases - the trace before, during
and after each `--trace-surge` - at the times the schedule put them, each with the rate it offers
(`target_rate`: scheduled requests / phase length). So the report's open-loop section says whether
each phase's rate was carried, and its recovery section measures a surge as it measures a pulse.
After the last due time a drain phase lets the replies in flight finish.
"""

from __future__ import annotations

from typing import Any

from locust.runners import MasterRunner

from loadline.core.errors import UsageError
from loadline.core.runsettings import model_span, wall_span
from loadline.runtime import trace
from loadline.shapes.base import PhasedShape
from loadline.shapes.options import ShapeOption, require, time_scale
from loadline.shapes.phase import Phase
from loadline.shapes.trace_source import TraceSource, save_for_report, source_of

DRAIN = ShapeOption("--trace-drain", 30.0, "Trace: model seconds after the last due time for replies to finish")
LEAD = "start"
MIN_PHASE_S = 0.001


class TraceShape(PhasedShape):
    """Replays a trace (loadline run --trace FILE): its requests at their times, surges as phases."""

    shape_name = "trace"
    shape_options = (DRAIN,)

    def __init__(self) -> None:
        super().__init__()
        self.start_wall: float | None = None
        self.source: TraceSource | None = None  # planned at the run's first tick (master only)
        self.offsets: list[float] = []  # each phase's planned start, replay wall seconds from the start

    def schedulers(self) -> int:
        return max(1, self.runner.worker_count) if isinstance(self.runner, MasterRunner) else 1

    def plan(self, options: Any) -> list[Phase]:
        runner = getattr(self, "runner", None)
        if isinstance(runner, MasterRunner) and runner.worker_count == 0:
            # the shares are cut over the workers connected now: none would get one, a later one waits forever
            raise UsageError("the trace is split among the workers at the start: no worker is connected yet")
        self.source = source_of(options)
        header = self.source.header
        drain = DRAIN.read(options)
        require(drain >= 0, "--trace-drain must be >= 0")
        scale = time_scale(options)
        users = self.schedulers() if getattr(self, "runner", None) is not None else 1
        # the lead is wall time (the workers' start-up), so it is planned in model time: scaled() divides it back
        phases = [Phase(LEAD, "hold", model_span(trace.LEAD_S, scale), users)]
        self.offsets = [0.0]
        for p in header.get("phases") or []:
            length = max(MIN_PHASE_S, float(p["end_s"]) - float(p["start_s"]))
            rate = int(p["requests"]) / length
            phases.append(Phase(str(p["label"]), str(p["kind"]), length, users, target_rate=rate))
            self.offsets.append(wall_span(float(p["start_s"]), scale))
        phases.append(Phase("drain", "hold", max(drain, MIN_PHASE_S), users))
        self.offsets.append(wall_span(float(header.get("duration_s") or 0.0), scale))
        return phases

    def on_phase_enter(self, phase: Phase) -> None:
        if self.state is None or self.state.index != 0:
            return
        assert self.runner is not None
        source = self.source
        shipped = source.requests if source is not None and source.shipped else None
        block = int(source.header.get("block_tokens") or 0) if source is not None else 0
        # the start phase ends at the returned start (phases.csv)
        self.start_wall = trace.publish(self.runner.environment, requests=shipped, block_tokens=block)
        if source is not None:
            save_for_report(source)

    def entry_wall(self, index: int) -> float:
        if index == 0 or self.start_wall is None or index >= len(self.offsets):
            return self.clock.wall()
        # the schedule's boundary: the shape's 1 s tick may enter the phase late, the workers' due times
        # do not wait for it
        return self.start_wall + self.offsets[index]
