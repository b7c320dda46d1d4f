"""Model time for time-scaled runs (`--time-scale X`: simulator and shapes X times faster).

The run folder holds wall-clock measurements; a run compressed X times has latencies X times
shorter and rates X times higher than the service it models. The report judges and shows model
time, as the live stop rule does, so SLO thresholds keep their real-world meaning. The scale and
the rule for one measured field are loadline/core/runsettings.py's (`model_value`); this module is
where a run folder's tables cross from wall to model time, once, so that the analyses reading
them never multiply or divide by the scale:

- a timestamp (`start_wall`, `end_wall`, `due_wall`, `ts`) becomes origin + (wall - origin) x X,
  the origin being the run's first phase start: differences between timestamps are model seconds,
  so a count over a span is a model rate and a window of N seconds is N model seconds;
- a latency (`*_ms`, and each gap of `itl_us`) is multiplied by X; a rate (`rps`...) divided by X;
- in the server metrics, what the vocabulary (analysis/data/metric_names.py) says is in seconds: a
  seconds counter's value and a seconds histogram's `_sum` and bucket bounds (`le`) x X; counts and
  gauges stay, and a counter's rate comes out per model second because its timestamps are;
- the generator's own samples (CPU %, event-loop lag) describe its machine, whose clock is the wall
  clock: only their timestamps move (as `RunData.wall_second` keeps the generator's tick a wall tick);
- everything else (counts, users, `target_rate`, already in model requests/s) is unchanged.

`model_run` applies it to a loaded run's requests, phases, faults, generator samples and server
metrics. The one analysis that reads the run as recorded is the validity assessment
(analysis/verdict/validity.py, floor.py, generator.py): the generator's own delays are properties
of its machine, measured on the wall clock with the truth log, and their model-time cost is stated
by loadline.core.runsettings.model_value, the rule this module applies to whole tables. The load
side converts with the same module (runsettings) in one place too.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from functools import cache

import numpy as np
import pandas as pd

from loadline.analysis.data.load import RunData
from loadline.analysis.data.metric_names import CONCEPTS
from loadline.core.runsettings import is_scaled, model_value, time_scale_of

TIMESTAMPS = frozenset(
    {"start_wall", "end_wall", "due_wall", "judged_until_wall", "ts"}
)  # wall-clock seconds (time.time())
ITL_COLUMN = "itl_us"  # space-separated integer microseconds, one per gap


def time_scale(manifest: dict | None) -> float:
    """X of `--time-scale X` from the run's manifest (the one accessor: loadline.core.runsettings.time_scale_of)."""
    return time_scale_of(manifest)


@dataclass(frozen=True)
class ModelClock:
    """One run's wall clock -> its model clock."""

    scale: float
    origin: float  # the wall instant both clocks share (the run's first phase start)

    def at(self, wall):
        """A wall timestamp (or an array / Series of them) on the model clock."""
        return self.origin + (wall - self.origin) * self.scale


def clock_of(run: RunData) -> ModelClock:
    starts = pd.to_numeric(run.phases["start_wall"], errors="coerce").dropna()
    if starts.empty:
        starts = pd.to_numeric(run.requests["start_wall"], errors="coerce").dropna()
    return ModelClock(time_scale(run.manifest), float(starts.min()) if len(starts) else 0.0)


def _itl_to_model(itl_us: pd.Series, scale: float) -> pd.Series:
    """Each gap x scale, kept as integer microseconds (exact for an integer scale)."""

    def one(text: object) -> object:
        if not isinstance(text, str) or not text:
            return text
        gaps = np.fromstring(text, dtype=np.int64, sep=" ")
        return " ".join(map(str, np.rint(gaps * scale).astype(np.int64)))

    return itl_us.map(one).astype(object)


def stamps_to_model(table: pd.DataFrame, clock: ModelClock) -> pd.DataFrame:
    """A table with only its timestamps on the model clock (the generator's samples)."""
    if clock.scale == 1.0 or table is None:
        return table
    table = table.copy()
    for column in TIMESTAMPS.intersection(table.columns):
        table[column] = clock.at(pd.to_numeric(table[column], errors="coerce"))
    return table


def table_to_model(table: pd.DataFrame, clock: ModelClock) -> pd.DataFrame:
    """A run-folder table with its timestamps, latencies and rates in model time (the module's rule)."""
    if clock.scale == 1.0 or table is None:
        return table
    table = table.copy()
    for column in table.columns:
        if column in TIMESTAMPS:
            table[column] = clock.at(pd.to_numeric(table[column], errors="coerce"))
        elif column == ITL_COLUMN:
            table[column] = _itl_to_model(table[column], clock.scale)
    return to_model_time(table, clock.scale)


@cache
def _seconds_metrics() -> tuple[frozenset[str], frozenset[str]]:
    """(counters, histograms): the vendor names whose values are seconds."""
    timed = [(c.kind, s.name) for c in CONCEPTS.values() if c.unit == "s" for s in c.sources]
    return (
        frozenset(name for kind, name in timed if kind == "counter"),
        frozenset(name for kind, name in timed if kind == "histogram"),
    )


def _le_to_model(labels: object, scale: float) -> object:
    """A bucket's labels (JSON text or dict) with its upper bound `le` x scale (+Inf stays)."""
    parsed = labels if isinstance(labels, dict) else json.loads(str(labels)) if labels not in (None, "") else {}
    try:
        bound = float(parsed["le"])
    except (KeyError, TypeError, ValueError):
        return labels
    out = {**parsed, "le": repr(bound * scale)}
    return out if isinstance(labels, dict) else json.dumps(out, sort_keys=True)


def server_metrics_to_model(table: pd.DataFrame, clock: ModelClock) -> pd.DataFrame:
    """Scraped server metrics in model time: timestamps, and the series the vocabulary says are seconds."""
    if clock.scale == 1.0 or table is None or table.empty:
        return table
    counters, histograms = _seconds_metrics()
    table = table.copy()
    table["ts"] = clock.at(pd.to_numeric(table["ts"], errors="coerce"))
    metric = table["metric"].astype(str)
    seconds = metric.isin(counters) | metric.isin([name + "_sum" for name in histograms])
    table.loc[seconds, "value"] = pd.to_numeric(table.loc[seconds, "value"], errors="coerce") * clock.scale
    buckets = metric.isin([name + "_bucket" for name in histograms])
    if buckets.any():
        texts = table.loc[buckets, "labels"]
        converted = {text: _le_to_model(text, clock.scale) for text in texts.astype(str).unique()}
        table.loc[buckets, "labels"] = texts.astype(str).map(converted)
    return table


def model_run(run: RunData) -> RunData:
    """The run with its requests, phases, faults, generator samples and server metrics in model time (the same run when
    unscaled or already converted); `wall_second` says how long one of the generator's wall seconds is."""
    clock = clock_of(run)
    if clock.scale == 1.0 or run.wall_second != 1.0:
        return run
    return dataclasses.replace(
        run,
        requests=table_to_model(run.requests, clock),
        phases=table_to_model(run.phases, clock),
        faults=table_to_model(run.faults, clock),
        generator=stamps_to_model(run.generator, clock),
        server_metrics=server_metrics_to_model(run.server_metrics, clock),
        wall_second=clock.scale,
        gaps=run.gaps.scaled(clock.scale) if run.gaps is not None else None,  # each gap x scale as it is read
    )


def to_model_time(table: pd.DataFrame, scale: float) -> pd.DataFrame:
    """Every latency (`*_ms`) and rate column in model time (loadline.core.runsettings.model_value's rule)."""
    if scale == 1.0:
        return table
    table = table.copy()
    for column in table.columns:
        if is_scaled(column):
            table[column] = model_value(column, table[column], scale)
    return table


def point_to_model(point: dict, scale: float) -> dict:
    """A knee / break-point dict (loadline.analysis.stats.knee) from wall time to model time."""
    if scale == 1.0 or not point:
        return point
    out = dict(point)
    for key, value in point.items():
        if isinstance(value, dict):  # e.g. the knee's `highest_tested` point
            out[key] = point_to_model(value, scale)
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and is_scaled(key):
            out[key] = round(model_value(key, value, scale), 3)
    return out


def note(scale: float) -> str | None:
    if scale == 1.0:
        return None
    return (
        f"time-scaled run (x{scale:g}): latencies and rates are shown and judged in model time "
        f"(measured latency x {scale:g}, measured rate / {scale:g}), as the live stop rule judges them"
    )
