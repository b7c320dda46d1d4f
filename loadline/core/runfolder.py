"""The run folder: one directory per test run, self-describing, written while the test runs.

Layout (every writer and reader uses these names; columns and types: loadline/core/schema.py):
    manifest.json            config without secrets, versions, git revision, host, shape, start/end
    requests.csv             one row per HTTP attempt (loadline.core.records.COLUMNS), appended live
    requests.arrows          the same rows, typed, for the report (loadline/core/columnar_copy.py)
    phases.csv               the phase timeline written by the shape on the master (PHASE_COLUMNS)
    faults.csv               drills: every fault action sent (or skipped) and its outcome (FAULT_COLUMNS)
    server_metrics.csv       scraped Prometheus samples, long format (SERVER_METRIC_COLUMNS)
    generator_metrics.csv    the load generator's own health per worker (GENERATOR_COLUMNS)
    truth.jsonl              the embedded simulator's ground truth (loadline run without --host)
    locust_stats.csv, locust_stats_history.csv, locust_failures.csv, locust_report.html
    report/                  written by `loadline report`: report.html, summary.md, verdict.json, charts

CSV rather than Parquet for the requests table: rows are appended as batches arrive from workers
and flushed at once, so a crash loses at most one batch and the file is readable while the test
runs (`tail -f`); Parquet needs whole row groups and pyarrow. See docs/benchmarks.md for sizes.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadline.core import columnar_copy, schema
from loadline.core.columnar_copy import ColumnarCopy
from loadline.core.records import COLUMNS

MANIFEST = "manifest.json"
REQUESTS = "requests.csv"
PHASES = "phases.csv"
SERVER_METRICS = "server_metrics.csv"
GENERATOR_METRICS = "generator_metrics.csv"
TRUTH = "truth.jsonl"
FAULTS = "faults.csv"
TRACE_SCHEDULE = "trace-schedule.jsonl"  # a trace replay's warped schedule: what was offered
LOCUST_CSV_PREFIX = "locust"  # -> locust_stats.csv, locust_stats_history.csv, locust_failures.csv
LOCUST_HTML = "locust_report.html"
REPORT_DIR = "report"
VERDICT = "verdict.json"  # in REPORT_DIR: the report's verdict, for `loadline plan --run` too

# Column names in file order; their types are loadline/core/schema.py's (the one declaration).
PHASE_COLUMNS = schema.columns(schema.PHASES)
SERVER_METRIC_COLUMNS = schema.columns(schema.SERVER_METRICS)
GENERATOR_COLUMNS = schema.columns(schema.GENERATOR)
FAULT_COLUMNS = schema.columns(schema.FAULTS)
GENERATOR_SAMPLE_INTERVAL_S = 1.0  # one generator_metrics.csv row per worker per second (loadline.runtime.selfcheck)

# Whole words at the end of a key: "api_key", "access_token", "password"; not "max_tokens" or
# "first_token_timeout", which are config worth seeing.
_SECRET_KEY = re.compile(r"(^|[_-])(api[_-]?key|apikey|token|secret|password|passwd|authorization|bearer)$", re.I)


def redact(config: dict[str, Any]) -> dict[str, Any]:
    """A copy of `config` with every secret-looking value replaced, recursively."""
    clean: dict[str, Any] = {}
    for key, value in config.items():
        if _SECRET_KEY.search(str(key)) and value is not None and value != "":
            clean[key] = "***"
        elif isinstance(value, dict):
            clean[key] = redact(value)
        else:
            clean[key] = value
    return clean


def new_run_dir(out_dir: str | os.PathLike[str], name: str = "run") -> Path:
    """Create runs/<UTC timestamp>-<name>[-n]/ and return it."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "run"
    base = Path(out_dir) / f"{stamp}-{slug}"
    path, n = base, 1
    while True:
        try:
            path.mkdir(parents=True, exist_ok=False)
            return path
        except FileExistsError:
            n += 1
            path = base.with_name(f"{base.name}-{n}")


def write_json_atomic(path: Path, data: Any) -> None:
    """The old file stays whole until the new one is complete; a failed write (disk full) leaves no .tmp."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def update_manifest(run_dir: Path, **fields: Any) -> dict[str, Any]:
    """Merge `fields` into manifest.json (created if missing) and return the result."""
    path = Path(run_dir) / MANIFEST
    manifest: dict[str, Any] = {}
    if path.exists():
        try:
            manifest = json.loads(path.read_text())
        except ValueError:
            manifest = {}
    manifest.update(fields)
    write_json_atomic(path, manifest)
    return manifest


_COLUMNAR_MIN_ROWS = 256  # below this the csv module is as quick, and pyarrow is not imported


class CsvAppender:
    """Append rows to a CSV file, writing the header once and flushing every batch.

    Flushing per batch (not per row) keeps the write cost low while bounding what a crash loses.
    `copy`: the same rows also go to a columnar copy beside the file (loadline/core/columnar_copy.py),
    only when this appender starts the file (a CSV appended to by another writer gets none).
    """

    def __init__(self, path: Path, columns: Iterable[str], copy: schema.Schema | None = None):
        self.path = Path(path)
        self.columns = tuple(columns)
        new = not self.path.exists() or self.path.stat().st_size == 0
        self._file = open(self.path, "a", newline="", encoding="utf-8")
        self._writer = csv.writer(self._file)
        self.rows_written = 0
        if new:
            self._writer.writerow(self.columns)
            self._file.flush()
        self.copy: ColumnarCopy | None = None
        if copy is not None:
            copy_file = columnar_copy.copy_path(self.path)
            copy_file.unlink(missing_ok=True)  # a copy of some earlier file is no copy of this one
            if new and tuple(copy) == self.columns:
                self.copy = ColumnarCopy(copy_file, copy)

    def write_rows(self, rows: Iterable[Iterable[Any]]) -> int:
        rows = rows if isinstance(rows, list) else list(rows)
        if not rows:
            return 0
        typed = self.copy.arrays(rows) if self.copy is not None else None  # one conversion for both files
        text = self._columnar_text(rows, typed) if len(rows) >= _COLUMNAR_MIN_ROWS else None
        if text is None:
            buffer = io.StringIO()
            csv.writer(buffer, self._writer.dialect).writerows(rows)
            text = buffer.getvalue()
        start = os.fstat(self._file.fileno()).st_size if self.copy is not None else 0  # flushed: exact
        try:
            self._file.write(text)
            self._file.flush()
        except BaseException as exc:
            if self.copy is not None:  # the CSV now holds an unknown part of this batch: no copy can match it
                self.copy.abandon(exc)
            raise
        if self.copy is not None:
            written = text[-columnar_copy.TAIL_BYTES :].encode("utf-8")  # at least the file's last TAIL_BYTES
            self.copy.append_arrays(typed, start, os.fstat(self._file.fileno()).st_size, written)
        self.rows_written += len(rows)
        return len(rows)

    def _columnar_text(self, rows: list[Any], typed: list[Any] | None = None) -> str | None:
        """A large batch (a worker's second of records, on the master) through pyarrow's CSV writer:
        half the CPU of the csv module, whose float formatting is most of a master's cost per record
        (docs/benchmarks.md, "Master intake"). The same cells as csv.writer's (numbers may be spelled
        differently, 1e-05 / 1e-5, and read back the same); None, for a batch it cannot write unquoted
        (a text with a comma, quote or line break) or whose column types mix: the csv module writes
        that one. `typed`: the columns already converted for the copy (else inferred here). Imported
        here: a worker never writes requests.csv."""
        if any(len(row) != len(self.columns) for row in rows):
            return None
        try:
            import pyarrow as pa
            import pyarrow.csv as pacsv
        except ImportError:
            return None
        try:
            columns = typed if typed is not None else [pa.array(column) for column in zip(*rows)]
            if any(pa.types.is_boolean(c.type) for c in columns):  # csv writes True, pyarrow true
                return None
            out = pa.BufferOutputStream()
            pacsv.write_csv(
                pa.table(columns, names=[str(i) for i in range(len(columns))]),
                out,
                write_options=pacsv.WriteOptions(
                    include_header=False, quoting_style="none", eol=self._writer.dialect.lineterminator
                ),
            )
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            return None
        text: str = out.getvalue().to_pybytes().decode("utf-8")
        return text

    @property
    def closed(self) -> bool:
        return self._file.closed

    def close(self) -> None:
        if not self._file.closed:
            self._file.flush()
            self._file.close()
        if self.copy is not None:
            self.copy.close()


def append_to_active(file: str, columns: Iterable[str], rows: Iterable[Iterable[Any]]) -> bool:
    """Append rows to `file` in the active run folder (header once); False when no run folder is active.

    For the master's small, rare tables (phases, fault actions): open, append, flush, close.
    """
    run = active()
    if run is None:
        return False
    appender = CsvAppender(Path(run.path) / file, columns)
    try:
        appender.write_rows(rows)
    finally:
        appender.close()
    return True


def requests_appender(run_dir: Path) -> CsvAppender:
    return CsvAppender(Path(run_dir) / REQUESTS, COLUMNS, copy=schema.REQUESTS)


@dataclass
class ActiveRun:
    """The run folder of the test in progress in this (master or local) process."""

    path: Path
    started_wall: float


_active: ActiveRun | None = None


def set_active(run: ActiveRun | None) -> None:
    global _active
    _active = run


def active() -> ActiveRun | None:
    """The current run folder on the master/local process, or None (workers, or no test running).

    Shapes (phase timeline) and the metrics scraper write next to the requests table through this.
    """
    return _active
