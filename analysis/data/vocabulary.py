"""One vendor-neutral vocabulary for server metrics: samples by concept, whatever the engine called them.

The table of concepts and vendor names, and what each engine's /metrics lacks, is
analysis/data/metric_names.py; this module reads a scraped server_metrics table through it.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from loadline.analysis.data.metric_concepts import Source
from loadline.analysis.data.metric_dialects import DIALECT_GAPS, DIALECT_PREFIXES
from loadline.analysis.data.metric_names import CONCEPTS

_HIST_SUFFIXES = ("_bucket", "_sum", "_count")


def _labels(text: object) -> dict[str, str]:
    if isinstance(text, dict):
        return text
    try:
        value = json.loads(str(text)) if text not in (None, "") else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _matches(labels: dict[str, str], source: Source) -> bool:
    return all(labels.get(k) == v for k, v in source.match) and not any(labels.get(k) == v for k, v in source.exclude)


def _per_distinct(values: pd.Series, fn, dtype=object) -> pd.Series:
    """`values.map(fn)`, with `fn` run once per distinct value: a table repeats each label set once
    per scrape, and parsing its JSON for every row was most of the verdict's cost."""
    try:
        codes, distinct = pd.factorize(values, use_na_sentinel=False)
    except TypeError:  # unhashable values (labels already parsed into dicts): nothing to share
        return values.map(fn).astype(dtype)
    mapped = np.empty(len(distinct), dtype=dtype)
    for i, value in enumerate(distinct):
        mapped[i] = fn(value)
    return pd.Series(mapped[codes], index=values.index, dtype=dtype)


class MetricTable:
    """One server_metrics table indexed by metric name, its label texts parsed once.

    The verdict asks for about ten concepts per run, each used to filter the whole table and parse
    every row's JSON labels again; `Signals` holds one of these per table instead. Lookups are cached:
    the table must not be changed while this index is in use.
    """

    def __init__(self, server_metrics: pd.DataFrame | None):
        self.table = server_metrics
        self._rows: dict[str, np.ndarray] = {}
        if server_metrics is not None and len(server_metrics):
            names = server_metrics["metric"].astype(str)
            self._rows = {str(k): v for k, v in names.groupby(names, sort=False).indices.items()}
        self._found: dict[str, tuple[Source, pd.DataFrame] | None] = {}

    def names(self) -> set[str]:
        return set(self._rows)

    def first_source(self, concept: str) -> tuple[Source, pd.DataFrame] | None:
        """The first of the concept's vendor names with matching rows: (source, rows)."""
        if concept not in self._found:
            self._found[concept] = self._first_source(concept)
        return self._found[concept]

    def _first_source(self, concept: str) -> tuple[Source, pd.DataFrame] | None:
        spec = CONCEPTS[concept]
        for source in spec.sources:
            wanted = [source.name + s for s in _HIST_SUFFIXES] if spec.kind == "histogram" else [source.name]
            positions = [self._rows[name] for name in wanted if name in self._rows]
            if not positions:
                continue
            assert self.table is not None  # rows are indexed only from a table
            rows = self.table.iloc[np.sort(np.concatenate(positions))]  # table order, as a mask keeps it
            keep = _per_distinct(
                rows["labels"], lambda text, source=source: _matches(_labels(text), source), dtype=bool
            )
            if keep.any():
                return source, rows[keep]
        return None

    def samples(self, concept: str) -> pd.DataFrame:
        """The samples of `concept`, unit-converted: columns ts, series, suffix, le, value.

        The first vendor name present in the data wins (a fleet exposing both an old and a new vLLM
        name would otherwise be counted twice). `series` identifies one time series (source + labels
        without `le`); `suffix` is "" for gauges and counters, "_bucket"/"_sum"/"_count" for histograms.
        """
        found = self.first_source(concept)
        if found is None:
            return pd.DataFrame(columns=["ts", "series", "suffix", "le", "value"])
        spec = CONCEPTS[concept]
        source, rows = found
        texts = _per_distinct(rows["labels"], lambda text: _series_labels(_labels(text)))
        out = pd.DataFrame(
            {
                "ts": pd.to_numeric(rows["ts"], errors="coerce"),
                "series": rows["source"].astype(str) + "|" + texts,
                "suffix": rows["metric"].astype(str).str[len(source.name) :],
                "le": _per_distinct(rows["labels"], lambda text: _le(_labels(text).get("le")), dtype=float),
                "value": pd.to_numeric(rows["value"], errors="coerce"),
            }
        )
        if spec.kind != "histogram":
            out["value"] = out["value"] * source.scale
        return out.dropna(subset=["ts", "value"]).reset_index(drop=True)

    def present(self) -> list[str]:
        """Concepts with at least one sample in the table."""
        found = []
        for concept in CONCEPTS.values():
            for source in concept.sources:
                wanted = [source.name + s for s in _HIST_SUFFIXES] if concept.kind == "histogram" else [source.name]
                if not any(name in self._rows for name in wanted):
                    continue
                # one family can carry several concepts in a label (Triton's request_type=active|waiting|max):
                # present only if a series with the right labels is there
                if (source.match or source.exclude) and self.first_source(concept.name) is None:
                    continue
                found.append(concept.name)
                break
        return found

    def source(self, concept: str) -> Source | None:
        """The vendor name `samples` reads for `concept` in this table (None if absent)."""
        found = self.first_source(concept)
        return found[0] if found else None


def _series_labels(labels: dict[str, str]) -> str:
    return json.dumps({k: v for k, v in labels.items() if k != "le"}, sort_keys=True)


def concept_samples(server_metrics: pd.DataFrame | None, concept: str) -> pd.DataFrame:
    """The samples of `concept` in a table (MetricTable.samples; hold a MetricTable to ask for several)."""
    return MetricTable(server_metrics).samples(concept)


def _le(text: str | None) -> float:
    if text is None:
        return float("nan")
    try:
        return float(text)
    except ValueError:
        return float("nan")


def present_concepts(server_metrics: pd.DataFrame | None) -> list[str]:
    """Concepts with at least one sample in the table."""
    return MetricTable(server_metrics).present()


def engine_dialects(server_metrics: pd.DataFrame | None) -> list[str]:
    """The engines whose metrics are in the table, by name prefix (usually one)."""
    if server_metrics is None or len(server_metrics) == 0:
        return []
    names = server_metrics["metric"].astype(str).drop_duplicates()
    found = []
    for dialect, prefix in DIALECT_PREFIXES:
        if names.str.startswith(prefix).any():
            found.append(dialect)
    if "triton tensorrt-llm" in found and "triton" in found:
        found.remove("triton")  # the backend's metrics speak for Triton's core ones
    return found


def dialect_gaps(server_metrics: pd.DataFrame | None) -> dict[str, str]:
    """{concept: why it is missing} for the engines in the table, concepts present elsewhere excluded."""
    present = set(present_concepts(server_metrics))
    gaps: dict[str, str] = {}
    for dialect in engine_dialects(server_metrics):
        for concept, reason in DIALECT_GAPS.get(dialect, {}).items():
            if concept not in present and concept not in gaps:
                gaps[concept] = reason
    return gaps
