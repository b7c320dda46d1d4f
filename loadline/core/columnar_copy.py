"""requests.arrows: the rows of requests.csv once more, typed, as an Arrow IPC stream.

Why a second copy: the report of a large run spent most of its time splitting the CSV's text, twice
(the table, then every inter-token gap; docs/benchmarks.md, "Report at scale"). The run already holds
each batch of rows as values when it writes them, so it writes them twice: the CSV stays what users
open, download and edit, and what the report falls back to; the copy is the same rows with each
column in its schema type (loadline/core/schema.py), which the report reads as bytes, not text.

The copy never overrides the CSV. Each batch carries, as metadata, the CSV's byte size right before
and right after that batch and a CRC-32 of the CSV's last bytes as written; a reader uses the copy
only when the batches' spans follow one another from the header to the CSV's last complete line and
the last one ends with the same bytes. A CSV cut, filtered, appended to or edited at its end
afterwards is read as text, never from a stale copy; so is one whose writer failed mid-batch (the
copy is given up then: the CSV holds an unknown part of that batch). The stream
format (not Arrow's file format) because it needs no footer: a run that dies leaves a copy readable
up to its last whole batch, like the CSV.

Uncompressed: the copy is about the CSV's size on disk, plus ~4 KB of framing per batch (a batch a
second: 1.4x the CSV of a slow demo run, 1.04x at 10 M rows). lz4 would save a third of it at six times
the master's cost of writing it (docs/benchmarks.md, "Report at scale"). A copy that cannot be written
(a value not of its column's type, a full disk) is deleted and the run goes on with the CSV alone.
pyarrow is imported only when the first batch is written: workers never write a run folder.
"""

from __future__ import annotations

import logging
import zlib
from pathlib import Path
from typing import Any

from loadline.core import schema

log = logging.getLogger(__name__)

SUFFIX = ".arrows"  # Arrow's registered extension for its IPC stream format
CSV_START = "csv_start"  # batch metadata: the CSV's size in bytes right before this batch (or table)
CSV_END = "csv_end"  # batch metadata: the CSV's size in bytes right after this batch
TAIL_CRC = "csv_tail_crc32"  # CRC-32 of the CSV's last TAIL_BYTES (or fewer) bytes at that point
TAIL_LENGTH = "csv_tail_bytes"  # how many bytes that CRC covers
TAIL_BYTES = 4096
TABLE_BATCH_ROWS = 16_384  # ~16 MB of chat-sized rows


def copy_path(csv_path: Path) -> Path:
    """requests.csv -> requests.arrows beside it."""
    return Path(csv_path).with_suffix(SUFFIX)


def arrow_schema(kinds: schema.Schema) -> Any:
    """The copy's columns: FLOAT float64, INT int64, STR string, all nullable (an absent value stays
    absent; the reader gives each the CSV's reading of an empty cell)."""
    import pyarrow as pa

    types = {schema.FLOAT: pa.float64(), schema.INT: pa.int64(), schema.STR: pa.string()}
    return pa.schema([(name, types[kind]) for name, kind in kinds.items()])


def tail_metadata(csv_start: int, csv_end: int, written: bytes) -> dict[str, str]:
    """The metadata of a batch whose CSV text, ending with `written`, took the CSV from `csv_start` to
    `csv_end` bytes: a reader checks that consecutive batches' spans meet (nothing written between)."""
    tail = written[-TAIL_BYTES:]
    return {
        CSV_START: str(csv_start),
        CSV_END: str(csv_end),
        TAIL_CRC: str(zlib.crc32(tail)),
        TAIL_LENGTH: str(len(tail)),
    }


def tail_matches(csv_path: Path, metadata: dict[bytes, bytes]) -> bool:
    """Whether the CSV's bytes before a batch's `csv_end` are the ones that batch wrote."""
    end, length = int(metadata[CSV_END.encode()]), int(metadata[TAIL_LENGTH.encode()])
    with open(csv_path, "rb") as handle:
        handle.seek(end - length)
        tail = handle.read(length)
    return len(tail) == length and zlib.crc32(tail) == int(metadata[TAIL_CRC.encode()])


class ColumnarCopy:
    """Appends batches of rows to requests.arrows beside the CSV that holds the same rows."""

    def __init__(self, path: Path, kinds: schema.Schema):
        self.path = Path(path)
        self.kinds = kinds
        self._schema: Any = None
        self._writer: Any = None
        self._sink: Any = None
        self.abandoned: str | None = None  # why the copy was given up (then deleted), or None

    def arrays(self, rows: list[Any]) -> list[Any] | None:
        """The rows' columns as Arrow arrays of the copy's types (one value per column, in schema order,
        as the CSV writer has them), or None when the copy is given up: a value does not fit its type.
        The CSV's own writer may reuse them: typed float64 prints as the int it holds (512, not 512.0)."""
        if self.abandoned is not None:
            return None
        try:
            import pyarrow as pa

            schema_ = self._arrow_schema()
            if any(len(row) != len(schema_) for row in rows):  # the CSV gets every field; the copy could not
                raise ValueError(f"a row without exactly {len(schema_)} fields")
            return [pa.array(values, type=field.type) for values, field in zip(zip(*rows), schema_)]
        except Exception as exc:  # noqa: BLE001 - any failure costs the copy, never the run or the CSV
            self.abandon(exc)
            return None

    def append_arrays(self, arrays: list[Any] | None, csv_start: int, csv_end: int, written: bytes) -> None:
        """A batch of `arrays` (from arrays()) whose CSV text, ending with `written`, took the CSV from
        `csv_start` to `csv_end` bytes."""
        if self.abandoned is not None or arrays is None:
            return
        try:
            import pyarrow as pa

            self._write(
                pa.record_batch(arrays, schema=self._arrow_schema()), tail_metadata(csv_start, csv_end, written)
            )
        except Exception as exc:  # noqa: BLE001 - as arrays()
            self.abandon(exc)

    def append_table(self, table: Any, csv_start: int, csv_end: int, written: bytes) -> None:
        """An Arrow table of the same rows (a generator that builds tables, not rows), cast to the copy's
        types, in batches of at most TABLE_BATCH_ROWS (what a reader holds at once); the last one
        carries the CSV's end."""
        if self.abandoned is not None:
            return
        try:
            schema_ = self._arrow_schema()
            batches = table.select(schema_.names).cast(schema_).to_batches(max_chunksize=TABLE_BATCH_ROWS)
            for position, batch in enumerate(batches, start=1):
                last = position == len(batches)
                self._write(batch, tail_metadata(csv_start, csv_end, written) if last else None)
        except Exception as exc:  # noqa: BLE001 - as arrays()
            self.abandon(exc)

    def _arrow_schema(self) -> Any:
        if self._schema is None:
            self._schema = arrow_schema(self.kinds)
        return self._schema

    def _write(self, batch: Any, metadata: dict[str, str] | None) -> None:
        import pyarrow as pa

        if self._writer is None:
            self._sink = pa.OSFile(str(self.path), "wb")
            self._writer = pa.ipc.new_stream(self._sink, self._schema)
        if metadata is None:  # a table's batch before its last: the CSV's end is not known there
            self._writer.write_batch(batch)
        else:
            self._writer.write_batch(batch, custom_metadata=metadata)
        self._sink.flush()  # after the CSV's: a crash between leaves a copy that ends early, read as text

    def abandon(self, exc: BaseException) -> None:
        """Give the copy up (the CSV's writer failed mid-batch, or the copy's own write did): once."""
        if self.abandoned is not None:
            return
        self.abandoned = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
        log.warning("loadline: %s not kept (%s); the report reads the CSV", self.path.name, self.abandoned)
        self._close_quietly()
        self.path.unlink(missing_ok=True)

    def _close_quietly(self) -> None:
        for part in (self._writer, self._sink):
            try:
                if part is not None:
                    part.close()
            except Exception:  # noqa: BLE001, S110 - closing what is already broken
                pass
        self._writer = self._sink = None

    def close(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()  # the end-of-stream marker
                self._sink.close()
            except Exception as exc:  # noqa: BLE001 - as arrays()
                self.abandon(exc)
        self._writer = self._sink = None
