"""Server metrics from files: saved Prometheus text pages and Prometheus `query_range` JSON exports.

Teams whose Prometheus already scraped the servers export `GET /api/v1/query_range?query=...`
responses and pass them to `loadline report RUN --prometheus FILE...`; the result has exactly the
columns of server_metrics.csv (SERVER_METRIC_COLUMNS), so the verdict rules cannot tell the
difference.
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from loadline.core.errors import UsageError
from loadline.core.runfolder import SERVER_METRIC_COLUMNS
from loadline.runtime.promtext import labels_json, text_to_rows


def frame(rows: Iterable[tuple]) -> pd.DataFrame:
    df = pd.DataFrame(list(rows), columns=list(SERVER_METRIC_COLUMNS))
    df["ts"] = pd.to_numeric(df["ts"], errors="coerce")
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    return df


def parse_text(text: str, ts: float, source: str = "target") -> pd.DataFrame:
    """One Prometheus text page, as scraped at wall-clock `ts`."""
    try:
        return frame(text_to_rows(text, ts, source))
    except ValueError as exc:
        raise UsageError(f"not Prometheus text format ({source}): {exc}") from None


def _query_range_rows(doc: object, source: str) -> list[tuple]:
    if isinstance(doc, list):  # several responses saved in one file
        return [row for part in doc for row in _query_range_rows(part, source)]
    if not isinstance(doc, dict):
        raise ValueError("expected a JSON object")
    if doc.get("status", "success") != "success":
        raise ValueError(f"status {doc.get('status')!r}: {doc.get('error', '')}")
    data = doc.get("data", doc)
    if not isinstance(data, dict) or data.get("resultType") not in ("matrix", "vector"):
        raise ValueError("no data.resultType matrix/vector (is this a query_range response?)")
    rows: list[tuple] = []
    for series in data.get("result", []):
        labels = dict(series.get("metric", {}))
        name = labels.pop("__name__", None)
        if not name:
            raise ValueError("a series has no __name__ (query a metric selector, not an expression)")
        series_source = labels.get("instance") or source
        points = series.get("values") or ([series["value"]] if "value" in series else [])
        for ts, text in points:
            value = float(text)  # "NaN", "+Inf" parse; dropped below
            if math.isfinite(value):
                rows.append((round(float(ts), 3), series_source, name, labels_json(labels), value))
    return rows


def load_query_range(paths: Iterable[str | Path]) -> pd.DataFrame:
    """Prometheus HTTP API query_range (or query) JSON files (`.json` or `.json.gz`) -> one table."""
    rows: list[tuple] = []
    for path in paths:
        p = Path(path)
        try:
            raw = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
            doc = json.loads(raw.decode("utf-8"))
            rows.extend(_query_range_rows(doc, p.stem))
        except FileNotFoundError:
            raise UsageError(f"Prometheus export not found: {p}") from None
        except (ValueError, KeyError, TypeError, OSError, EOFError) as exc:
            raise UsageError(f"{p}: not a Prometheus query_range export: {exc}") from None
    return frame(rows).sort_values("ts", kind="stable").reset_index(drop=True)


def load_text_snapshots(paths: Iterable[str | Path], source: str = "target") -> pd.DataFrame:
    """Saved /metrics pages; each file's time is its first line `# ts <unix seconds>` or its mtime.

    Used for recorded fixtures (tests/data/) and for pages captured by hand with curl.
    """
    parts = []
    for path in paths:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UsageError(f"metrics file not found: {p}") from None
        first = text.split("\n", 1)[0]
        ts = float(first.split()[2]) if first.startswith("# ts ") else p.stat().st_mtime
        parts.append(parse_text(text, ts, source))
    if not parts:
        return frame([])
    return pd.concat(parts, ignore_index=True).sort_values("ts", kind="stable").reset_index(drop=True)
