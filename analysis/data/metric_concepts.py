"""What a server-metric concept is: its kind, unit, how its series combine, and its vendor names.

The table of concepts is analysis/data/metric_names.py. Each concept has a kind:
- gauge: a level (e.g. requests running); several series at one timestamp are combined with `agg`
  (sum for counts across replicas, mean for fractions across GPUs, max where the worst one matters);
- counter: a cumulative count; analysis looks at its increase over a window (reset-aware);
- histogram: a Prometheus histogram (`_bucket`/`_sum`/`_count`); analysis takes means and quantiles
  of the observations that fell inside a window.
`scale` turns the vendor unit into the concept's unit (fractions 0-1, seconds, MiB, cores).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Source:
    """One vendor name for a concept. `match` filters on labels, e.g. {"method": "prefill"}."""

    name: str
    vendor: str
    scale: float = 1.0
    match: tuple[tuple[str, str], ...] = ()
    exclude: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Concept:
    name: str
    kind: str  # gauge | counter | histogram
    unit: str
    agg: str = "sum"  # how series at one timestamp combine (gauges only): sum | mean | max
    sources: tuple[Source, ...] = field(default_factory=tuple)
    meaning: str = ""


def source(
    name: str, vendor: str, scale: float = 1.0, match: dict | None = None, exclude: dict | None = None
) -> Source:
    """A Source from plain dicts of labels (the table's shorthand)."""
    return Source(name, vendor, scale, tuple(sorted((match or {}).items())), tuple(sorted((exclude or {}).items())))
