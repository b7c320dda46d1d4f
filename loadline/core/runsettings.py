"""Run-wide settings every layer reads: the time scale and whether the traffic streams.

One place validates them, one writes them into the manifest (loadline/core/manifest.py, top-level
`time_scale` and `streaming`) and one accessor reads each back, from parsed options on the load
side or from a run folder's manifest in analysis. Model-time conversion lives here too.

Time scale (`--time-scale X`): simulator, think times and shape durations run X times faster, so a
run folder holds wall-clock numbers X times shorter (latencies) or higher (rates) than the service
it models. Everything judged or shown is in model time: latency x X, rate / X.

Where the conversion happens, once per side: on the load side here (`model_value` for a measured
field, `model_span` / `wall_span` for a stretch of seconds; the live window converts its summary
and retention with them, the web UI and the stop rules their spans), and in analysis where a run
folder is read (loadline/analysis/data/timescale.py, which applies `model_value`'s rule to whole
tables). Nothing else converts; what runs faster (shape durations in shapes/phase.py `scaled`,
the users' think times, the simulator's clock) is the compression itself, not a conversion.
"""

from __future__ import annotations

import math
from typing import Any

from loadline.core.errors import UsageError

LATENCY_SUFFIX = "_ms"  # a field ending in this is a latency: x scale in model time
RATE_FIELDS = frozenset({"rps", "output_tokens_per_s", "goodput_rps"})  # per second: / scale


def validate_time_scale(value: Any) -> float:
    """`--time-scale` as a float; UsageError (one line) unless it is a finite number > 0."""
    if isinstance(value, bool):
        raise UsageError(f"--time-scale: expected a number, got {value!r}")
    try:
        scale = float(1.0 if value is None else value)
    except (TypeError, ValueError):
        raise UsageError(f"--time-scale: expected a number, got {value!r}") from None
    if not (math.isfinite(scale) and scale > 0):
        raise UsageError(f"--time-scale must be a finite number > 0, got {value!r}")
    return scale


def time_scale_of_options(options: Any) -> float:
    """The validated `--time-scale` of parsed Locust options (1.0 when there are none)."""
    return validate_time_scale(getattr(options, "time_scale", 1.0) if options is not None else 1.0)


def streaming_of_options(options: Any) -> bool:
    """Whether the built-in users stream (`--non-streaming` off)."""
    return not bool(getattr(options, "non_streaming", False)) if options is not None else True


def time_scale_of(manifest: dict[str, Any] | None) -> float:
    """X of the run's `--time-scale X` from its manifest; 1.0 when absent or invalid (old or foreign runs)."""
    manifest = manifest if isinstance(manifest, dict) else {}
    raw_options = manifest.get("options")
    options: dict[str, Any] = raw_options if isinstance(raw_options, dict) else {}
    for value in (manifest.get("time_scale"), options.get("time_scale")):  # options: runs before the key existed
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
            return float(value)
    return 1.0


def streaming_of(manifest: dict[str, Any] | None) -> bool | None:
    """Whether the run's traffic streamed, from its manifest; None when the manifest does not say."""
    manifest = manifest if isinstance(manifest, dict) else {}
    streaming = manifest.get("streaming")
    if isinstance(streaming, bool):
        return streaming
    raw_options = manifest.get("options")
    options: dict[str, Any] = raw_options if isinstance(raw_options, dict) else {}
    non_streaming = options.get("non_streaming")
    if isinstance(non_streaming, bool):
        return not non_streaming
    return None


def model_value(name: str, value: float, scale: float) -> float:
    """One measured field `name` (wall clock) in model time: latencies x scale, rates / scale."""
    if name.endswith(LATENCY_SUFFIX):
        return value * scale
    if name in RATE_FIELDS:
        return value / scale
    return value


def model_span(wall_s: float, scale: float) -> float:
    """A stretch of wall-clock seconds (a phase's time left, a judged window) in model seconds."""
    return wall_s * scale


def wall_span(model_s: float, scale: float) -> float:
    """A stretch of model seconds (a retention, a window asked for in model time) on the wall clock."""
    return model_s / scale


def is_scaled(name: str) -> bool:
    """Whether `model_value` changes the field `name`."""
    return name.endswith(LATENCY_SUFFIX) or name in RATE_FIELDS
