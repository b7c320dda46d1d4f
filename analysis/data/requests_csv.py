"""requests.csv into a compact table, in streamed batches (pyarrow's multi-threaded CSV reader).

What makes a 10 M-row table fit: the inter-token gaps (`itl_us`, most of the file's bytes) are not
converted at all: analysis/data/gaps.py reads them again, streamed, when a figure needs them. Texts
with few distinct values become categories (a small code per row), the unique request ids Arrow
strings (bytes, not one Python object per row), numbers float64 as before (so every figure is the
same to the last bit), and columns that are empty in every row float32 NaN (half the bytes; NaN
either way). The whole-table pandas reader stays the path for a table pyarrow refuses (a row with
the wrong number of fields, a non-number in a number column, bytes that are not UTF-8): it skips and
counts the bad rows (analysis/data/load.py).

When the run's columnar copy (requests.arrows) holds exactly the file's rows, the blocks come from
it instead (analysis/data/requests_copy.py), typed as this reader types the same cells: no text to
split, and the same table after.
"""

from __future__ import annotations

import csv
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from pandas.api.types import union_categoricals

from loadline.analysis.data import requests_copy, spill
from loadline.analysis.data.gaps import ITL_COLUMN, GapColumn, csv_gap_batches
from loadline.analysis.data.memory import return_freed_memory
from loadline.core import schema
from loadline.core.errors import UsageError

BATCH_BYTES = 4 << 20  # one parse block: more (16-32 MB) piles up read-ahead blocks and triples the peak
# the gaps' pass converts one column: smaller blocks cost no time there, and pyarrow reads up to 32
# blocks ahead (1 MB: ~70 MB held; 4 MB: ~260 MB, measured on a 10 M-row run)
GAP_BATCH_BYTES = 1 << 20
CHUNK_BYTES = 32 << 20  # whole lines parsed at once on every core: 8 blocks
_FLOATS = schema.columns(schema.REQUESTS, schema.FLOAT)
_INTS = schema.columns(schema.REQUESTS, schema.INT)
_TEXTS = schema.columns(schema.REQUESTS, schema.STR)
UNIQUE_TEXT = "request_id"
# Columns no analysis reads (the user's view of the CSV keeps them): not converted, not held.
UNREAD = frozenset(
    {
        "user_id",
        "user_class",
        "endpoint",
        "model",
        "stale_retries",
        "connect_ms",
        "itl_mean_ms",
        "itl_max_ms",
        "tokens_source",
        "content_chunks",
    }
)
WIDE_INTS = frozenset({"output_tokens"})  # summed over many rows: int64 as before; other counts fit int32


class Refused(Exception):
    """pyarrow would not read the table as declared: the caller falls back to the tolerant reader."""


@dataclass
class StreamedRequests:
    frame: pd.DataFrame  # every column but itl_us; rows as in the file
    gaps: GapColumn  # the itl_us of the same rows
    source: str = "csv"  # "copy": read from the run's columnar copy (requests.arrows), which held the same rows


def _header(path: Path) -> list[str]:
    with open(path, "rb") as handle:
        first = handle.readline().decode("utf-8", errors="replace")
    return next(csv.reader([first]), [])


def _types(header: list[str]) -> dict[str, pa.DataType]:
    types: dict[str, pa.DataType] = {}
    for name in header:
        if name in _FLOATS or name in _INTS:  # ints may be empty in a row: read as numbers, filled below
            types[name] = pa.float64()
        elif name == UNIQUE_TEXT:
            types[name] = pa.string()
        elif name in _TEXTS:
            types[name] = pa.dictionary(pa.int32(), pa.string())
    return types


def _compact_batch(batch: pa.RecordBatch) -> dict[str, object]:
    """One parsed block in its compact form, as numpy/pandas pieces (the Arrow block is freed at once):
    counts int32 (int64 where summed), numbers float64 with NaN for empty (None: empty in the whole
    block), texts categories, the request ids Arrow strings."""
    out: dict[str, object] = {}
    for name, column in zip(batch.schema.names, batch.columns):
        if name in _INTS:
            wide = pa.int64() if name in WIDE_INTS else pa.int32()
            out[name] = pc.cast(pc.fill_null(column, 0.0), wide, safe=False).to_numpy().copy()  # as astype
        elif pa.types.is_floating(column.type):
            # a copy: a view would keep the reader's whole block alive (twice the table's memory)
            out[name] = None if column.null_count == len(column) else np.array(column.to_numpy(zero_copy_only=False))
        elif pa.types.is_dictionary(column.type):
            out[name] = column.to_pandas().array
        else:
            out[name] = column
    return out


def _column(name: str, pieces: list, sizes: list[int]) -> object:
    """One column of the table from its blocks' pieces, in the dtype the analyses get."""
    first = next((piece for piece in pieces if piece is not None), None)
    if first is None:  # a number column empty in every row: no bytes per row
        return pd.arrays.SparseArray(np.full(sum(sizes), np.nan), fill_value=np.nan)
    if isinstance(first, pd.Categorical):
        # categories sorted, as the pandas reader sorts them (crosstabs and groupbys follow that order)
        return union_categoricals(pieces, sort_categories=True)
    if isinstance(first, pa.Array):
        return pd.array(pa.concat_arrays(pieces), dtype=pd.StringDtype("pyarrow"))
    return np.concatenate([np.full(n, np.nan) if piece is None else piece for piece, n in zip(pieces, sizes)])


def read_streamed(path: Path, open_limited, ids: bool = True, spill_to: str | None = None) -> StreamedRequests:
    """The table without itl_us, and where its gaps are. Raises Refused for a table to read tolerantly.
    `ids`: read request_id (only a truth log is joined on it: 16-44 bytes a row otherwise unused).
    `spill_to`: a directory for the columns of a table larger than spill.MEMORY_BYTES (None: held).
    From the run's columnar copy when it holds exactly the CSV's rows, else from the CSV's text."""
    header = _header(path)
    if not header or len(set(header)) != len(header):
        raise Refused("no header, or a repeated column name")
    copy = requests_copy.find_copy(path, header)
    if copy is not None:
        try:
            return _read_copy(copy, header, ids, spill_to)
        except (requests_copy.StaleCopy, pa.ArrowException, OSError, ValueError):  # the CSV's text decides
            pass  # (the copy changed after it was checked: pieces read so far are freed below)
        return_freed_memory()
    try:  # a line per row, the common case, splits into blocks for both threads at once
        return _read_streamed(path, open_limited, header, False, ids, spill_to)
    except Refused:  # a quoted newline (an error message's) breaks a row there: read quote-aware
        return _read_streamed(path, open_limited, header, True, ids, spill_to)


def _wanted(header: list[str], ids: bool) -> list[str]:
    skipped = UNREAD if ids else UNREAD | {UNIQUE_TEXT}
    return [c for c in header if c != ITL_COLUMN and c not in skipped]


def _read_copy(copy: requests_copy.CopySource, header: list[str], ids: bool, spill_to: str | None) -> StreamedRequests:
    """The table from the run's columnar copy: the same batches the CSV reader would give, no text split."""
    wanted = _wanted(header, ids)
    types = _types(header)
    frame = _assembled(copy.read(wanted, {name: types[name] for name in wanted if name in types}), wanted, spill_to)
    if ITL_COLUMN in header:
        gaps = GapColumn(lambda: _gaps_of_copy(copy), len(frame))
    else:
        gaps = GapColumn.in_memory(np.full(len(frame), "", dtype=object))
    return StreamedRequests(frame, gaps, "copy")


def _streamed(handle, header: list[str], parse: pacsv.ParseOptions, convert: pacsv.ConvertOptions):
    """The file's blocks parsed one after another on this thread (quote-aware: a value may hold a newline)."""
    reader = pacsv.open_csv(
        handle,
        read_options=pacsv.ReadOptions(block_size=BATCH_BYTES),
        parse_options=parse,
        convert_options=convert,
        memory_pool=pa.system_memory_pool(),  # glibc: analysis/data/memory.py decides what is kept
    )
    yield from reader


def _chunked(handle, header: list[str], parse: pacsv.ParseOptions, convert: pacsv.ConvertOptions):
    """The file's blocks, parsed CHUNK_BYTES of whole lines at a time by pyarrow's multi-threaded reader
    (every core; its streaming reader parses on one) while the next chunk is read. Only where a
    newline always ends a row: each chunk is then a CSV of its own, read with the header's names."""
    options = pacsv.ReadOptions(column_names=header, block_size=BATCH_BYTES, use_threads=True)
    schema = None
    for chunk in _line_chunks(handle):
        table = pacsv.read_csv(
            pa.BufferReader(chunk),
            read_options=options,
            parse_options=parse,
            convert_options=convert,
            memory_pool=pa.system_memory_pool(),
        )
        if schema is None:
            schema = table.schema
        elif not table.schema.equals(schema):  # a column without a declared type read apart: read it whole
            raise Refused(f"the columns' types changed within the file: {schema} then {table.schema}")
        yield from table.to_batches()
        del table


def _line_chunks(handle):
    """The rows after the header line, CHUNK_BYTES at a time cut after a newline, the next read ahead."""
    first = handle.readline()
    if not first.endswith(b"\n"):
        raise Refused("no complete line")
    try:  # as pyarrow reads a header: names in UTF-8
        first.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(f"the header is not UTF-8: {exc}") from None
    rest = b""
    with ThreadPoolExecutor(max_workers=1) as pool:
        ahead = pool.submit(handle.read, CHUNK_BYTES)
        while True:
            block = ahead.result()
            if not block:
                break
            ahead = pool.submit(handle.read, CHUNK_BYTES)
            data = rest + block if rest else block
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            if cut:
                yield memoryview(data)[:cut]
    if rest:  # no newline after it: the reader stopped at the file's last complete line already
        yield memoryview(rest)


def _gaps_of_copy(copy: requests_copy.CopySource) -> Iterator[pa.Array]:
    try:
        yield from copy.column(ITL_COLUMN)
    except requests_copy.StaleCopy as exc:  # it held the CSV's rows when the table was read from it
        raise UsageError(f"{copy.path} changed while the report read it ({exc}): run the report again") from None


def _read_streamed(
    path: Path, open_limited, header: list[str], newlines_in_values: bool, ids: bool, spill_to: str | None
) -> StreamedRequests:
    wanted = _wanted(header, ids)
    convert = pacsv.ConvertOptions(
        include_columns=wanted,
        column_types=_types(header),
        null_values=[""],
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
    )
    parse = pacsv.ParseOptions(newlines_in_values=newlines_in_values)
    with open_limited(path) as handle:
        try:
            frame = _assembled(
                (_chunked if not newlines_in_values else _streamed)(handle, header, parse, convert), wanted, spill_to
            )
        except (pa.ArrowException, UnicodeDecodeError, ValueError) as exc:
            raise Refused(str(exc)) from None
    if ITL_COLUMN in header:
        gaps = csv_gap_batches(path, open_limited, GAP_BATCH_BYTES, newlines_in_values)
        gaps = GapColumn(gaps.batches_of_source, len(frame))
    else:
        gaps = GapColumn.in_memory(np.full(len(frame), "", dtype=object))
    return StreamedRequests(frame, gaps)


def _assembled(batches, wanted: list[str], spill_to: str | None = None) -> pd.DataFrame:
    """The table of these batches (each with the `wanted` columns, in that order), converted block by
    block: never the whole table in its wide form. Past spill.MEMORY_BYTES of converted blocks, and
    when `spill_to` names a directory, every block after is written to disk (analysis/data/spill.py)."""
    pieces: dict[str, list] = {name: [] for name in wanted}
    sizes: list[int] = []
    held = 0
    columns: dict[str, _Spilled] | None = None
    for batch in batches:
        rows = batch.num_rows
        compact = _compact_batch(batch)
        del batch
        sizes.append(rows)
        if columns is not None:
            for name, piece in compact.items():
                columns[name].append(piece, rows)
            continue
        for name, piece in compact.items():
            pieces[name].append(piece)
        held += sum(_bytes(piece) for piece in compact.values())
        if spill_to is not None and held > spill.MEMORY_BYTES:  # from here on, the table is on disk
            columns = {name: _Spilled(spill_to) for name in wanted}
            for name in wanted:
                for piece, n in zip(pieces.pop(name), sizes):
                    columns[name].append(piece, n)
            return_freed_memory()
    frame = pd.DataFrame(index=pd.RangeIndex(sum(sizes)))
    # One column at a time, each column's Arrow chunks freed once converted. Inserted one by one, not
    # through DataFrame(dict): that copies every float column into one 2-D block (twice the memory).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pd.errors.PerformanceWarning)  # "fragmented": on purpose
        for name in wanted:
            if columns is not None:
                frame[name] = pd.Series(columns.pop(name).finish(), copy=False)  # a Series: not copied in
            else:
                frame[name] = _column(name, pieces.pop(name), sizes)
            # a column's block-sized pieces were small heap blocks spread over the heap: hand their pages
            # back before the next column arrives, or the table is held twice at its end
            return_freed_memory()
    if columns is not None:
        frame.attrs["spilled_to"] = spill_to
    return frame


def _bytes(piece: object) -> int:
    return 0 if piece is None else int(getattr(piece, "nbytes", 0))


class _Spilled:
    """One column of a spilled table: numbers and categories on disk, request ids (a truth log's join
    key, only in the simulator's test runs) held."""

    def __init__(self, directory: str):
        self._directory = directory
        self._column: spill.NumberColumn | spill.CategoryColumn | None = None
        self._held: list = []
        self._sizes: list[int] = []

    def append(self, piece: object, rows: int) -> None:
        if self._column is None and not self._held:
            if isinstance(piece, pd.Categorical):
                self._column = spill.CategoryColumn(self._directory)
            elif piece is None or isinstance(piece, np.ndarray):
                self._column = spill.NumberColumn(self._directory)
        if isinstance(self._column, spill.CategoryColumn):
            self._column.append(cast(pd.Categorical, piece), rows)
        elif self._column is not None:
            self._column.append(cast(np.ndarray | None, piece), rows)
        else:
            self._held.append(piece)
            self._sizes.append(rows)

    def finish(self) -> object:
        if self._column is not None:
            return self._column.finish()
        return _column("", self._held, self._sizes)
