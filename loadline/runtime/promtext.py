"""Prometheus text exposition -> rows of server_metrics.csv (SERVER_METRIC_COLUMNS).

Pure parsing, no I/O and no gevent: the master's scraper (loadline.runtime.scraper) writes these rows
live, and `loadline report --prometheus` (loadline.analysis.data.prom_ingest) reads saved pages with the same
code, so both tables have the same rows for the same page. `labels` is a JSON object with sorted keys;
`metric` is the exposed sample name (counters keep `_total`, histograms `_bucket`/`_sum`/`_count`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator

from prometheus_client.parser import text_string_to_metric_families

SCRAPE_ERROR = "loadline_scrape_error"
SCRAPE_DURATION = "loadline_scrape_duration_seconds"


def labels_json(labels: dict[str, str]) -> str:
    return json.dumps(labels, sort_keys=True, separators=(",", ":"))


def iter_rows(text: str, ts: float, source: str) -> Iterator[tuple]:
    """Prometheus text exposition -> rows in SERVER_METRIC_COLUMNS order, one metric family at a time
    (the parser reads the page lazily, so a caller may pause between rows).

    `_created` samples (the creation time of each counter/histogram) are dropped: they are not
    measurements, and would double the table. Non-finite values (NaN gauges) are dropped too.
    """
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            value = float(sample.value)
            if not math.isfinite(value):
                continue
            yield (round(ts, 3), source, sample.name, labels_json(sample.labels), value)


def text_to_rows(text: str, ts: float, source: str) -> list[tuple]:
    """iter_rows as a list: the whole page at once (saved pages, `loadline report --prometheus`)."""
    return list(iter_rows(text, ts, source))


def error_row(ts: float, source: str, reason: str) -> tuple:
    """The one row a failed scrape leaves: metric SCRAPE_ERROR, value 1, the reason in the labels."""
    return (round(ts, 3), source, SCRAPE_ERROR, labels_json({"reason": reason[:200]}), 1.0)
