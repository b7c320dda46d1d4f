"""A trace file read into a checked Trace, and warped into a replay schedule, from its path and options.

One reader for every caller: `loadline run --trace` (the command line) and the trace shape of a
plain Locust run (the web UI's form: `--trace-file`), which runs on Locust's master and so may not
load pandas. JSONL is read line by line (loadline/core/trace.py), CSV with the standard library's
reader, Parquet with pyarrow (imported only when a Parquet file is read: it loads numpy, which a
worker never needs since only the master reads the trace). Each row is then checked by the same
rules (loadline/core/trace.py: check_row), and the first bad one is a UsageError naming its line
(for Parquet, its row, 1-based).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

from loadline.core.errors import UsageError
from loadline.core.trace import (
    BLOCK_TOKENS,
    FIELDS,
    TIME_UNIT_S,
    Checked,
    Trace,
    Window,
    build,
    check_row,
    read_jsonl,
    sniff_jsonl,
)
from loadline.core.trace_warp import Schedule, check_speed, parse_surges, parse_window, warp

TABLE_SUFFIXES = (".csv", ".tsv", ".parquet", ".pq")
TEXT_COLUMNS = frozenset({"session", "hash_ids"})  # kept as written: session "007" is not "7"
# a table's format from its columns, first match wins (a JSONL file is sniffed by its first object)
SNIFF = (("ContextTokens", "azure"), ("Request tokens", "burstgpt"), ("input_tokens", "loadline"),
         ("input_length", "mooncake"))  # fmt: skip


def read_trace(path: str, fmt: str = "auto", block_tokens: int = 0, window: Window | None = None) -> Trace:
    """The trace in `path`, checked (UsageError with the first bad line); with a window, only its requests
    (the rows after it are not read)."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"trace not found: {path}")
    if file.stat().st_size == 0:
        raise UsageError(f"trace {path} is empty")
    suffix = file.suffix.lower()
    parquet = suffix in (".parquet", ".pq")
    table = suffix in TABLE_SUFFIXES or fmt in ("azure", "burstgpt")
    if not table:
        if fmt == "auto":
            fmt = sniff_jsonl(file)
        return read_jsonl(file, fmt, _block(fmt, block_tokens), window)
    columns, rows = _parquet(file) if parquet else _csv(file)
    if fmt == "auto":
        fmt = next((name for column, name in SNIFF if column in columns), "")
        if not fmt:
            known = ", ".join(f"{column} ({name})" for column, name in SNIFF)
            raise UsageError(f"trace {file}: no column says its format (one of {known}); give --trace-format")
    missing = [c for c in FIELDS[fmt] if c not in columns]
    if missing:
        raise UsageError(f"trace {file}: missing column {missing[0]!r} (a {fmt} trace has {', '.join(FIELDS[fmt])})")
    block = _block(fmt, block_tokens)
    return build(str(file), fmt, block, _checked(rows, fmt, str(file), block), window)


def warped(path: str, fmt: str, block_tokens: int, speed: float, window: str, surge: str) -> Schedule:
    """The replay schedule of the trace in `path` (UsageError for any bad option or row): the options
    first, as they are cheap to check and a typo should not wait for a large file."""
    windows, surges = parse_window(window), parse_surges(surge)
    check_speed(speed)
    return warp(read_trace(path, fmt, block_tokens, windows), windows, speed, surges)


def _block(fmt: str, block_tokens: int) -> int:
    block = block_tokens or BLOCK_TOKENS[fmt]
    if block < 1:
        raise UsageError(f"--trace-block-tokens must be >= 1 (got {block})")
    return block


Rows = Iterator[tuple[int, Mapping[str, object]]]  # (line or row number, row)


def _csv(file: Path) -> tuple[set[str], Rows]:
    # utf-8-sig: a spreadsheet's export starts with a byte-order mark, which would be the first column's name
    delimiter = "\t" if file.suffix.lower() == ".tsv" else ","
    try:
        handle = file.open(encoding="utf-8-sig", newline="")
        header = next(csv.reader([handle.readline()], delimiter=delimiter, skipinitialspace=True), [])
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UsageError(f"trace {file} is not a readable CSV: {exc}") from None
    names = [h.strip() for h in header]

    def rows() -> Rows:
        with handle:
            try:
                for number, values in enumerate(csv.reader(handle, delimiter=delimiter, skipinitialspace=True), 2):
                    if not values:
                        continue
                    if len(values) > len(names):
                        raise UsageError(
                            f"trace {file} line {number}: {len(values)} fields, the header has {len(names)}"
                        )
                    yield number, {name: v if name in TEXT_COLUMNS else _cell(v) for name, v in zip(names, values)}
            except (UnicodeDecodeError, csv.Error) as exc:
                raise UsageError(f"trace {file} is not a readable CSV: {exc}") from None

    return set(names), rows()


def _cell(text: str) -> object:
    """A CSV field as the JSON reader would give it: a number when it is one, None when empty."""
    text = text.strip()
    if not text:
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _parquet(file: Path) -> tuple[set[str], Rows]:
    import pyarrow as pa  # here: it loads numpy; only the process that reads the trace pays it
    import pyarrow.parquet as pq

    # ArrowException: e.g. a codec this pyarrow lacks (ArrowNotImplementedError), a column of a type it
    # cannot convert (ArrowTypeError); ArrowInvalid is also a ValueError
    unreadable = (OSError, ValueError, pa.ArrowException)
    try:
        table = pq.ParquetFile(file)
        names = set(table.schema_arrow.names)
    except unreadable as exc:
        raise UsageError(f"trace {file} is not a readable Parquet file: {' '.join(str(exc).split())[:200]}") from None

    def rows() -> Rows:
        number = 0
        try:
            for batch in table.iter_batches(batch_size=65_536):
                for row in batch.to_pylist():
                    number += 1
                    yield number, row
        except unreadable as exc:
            raise UsageError(f"trace {file} row {number + 1}: unreadable: {' '.join(str(exc).split())[:200]}") from None

    return names, rows()


def _checked(rows: Rows, fmt: str, source: str, block: int) -> Iterator[Checked]:
    unit = TIME_UNIT_S[fmt]
    for line, row in rows:
        timestamp, n_in, n_out, hash_ids, session, turn = check_row(row, fmt, line, source, block)
        seconds = _seconds(timestamp, FIELDS[fmt][0], line, source) if unit is None else timestamp * unit
        yield line, (seconds, n_in, n_out, hash_ids, session, turn)


def _seconds(stamp: object, key: str, line: int, source: str) -> float:
    """A date-time as POSIX seconds: Azure's 2023 `2023-11-16 18:15:46.6805900` (no zone: UTC taken, 7
    fractional digits cut to 6) and 2024 `2024-05-10 00:00:00.009930+00:00` (some rows without a fraction)."""
    if isinstance(stamp, str):
        try:
            stamp = datetime.fromisoformat(stamp.strip())
        except ValueError:
            pass
    if not isinstance(stamp, datetime):
        raise UsageError(f"trace {source} line {line}: {key} {stamp!r} is not a date-time")
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.timestamp()
