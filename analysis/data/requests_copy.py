"""The run's columnar copy of requests.csv (loadline/core/columnar_copy.py), read as the CSV reader would.

The copy is used only up to the batch that ends where the CSV ends, byte for byte at its tail: a CSV
changed after the run (cut, filtered, appended to, edited at its end) makes the copy stale, and the
table is read from the CSV's text as before (StaleCopy). Batches come out in the types pyarrow's CSV
reader gives the same cells (analysis/data/requests_csv.py): numbers float64 with null for an empty
cell, texts "" when empty (dictionaries, but for the request ids), so every later step is the CSV's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from loadline.core import columnar_copy

REGROUP_ROWS = 1 << 16  # a slow run's copy holds many small batches: converted ~64 k rows at a time


class StaleCopy(Exception):
    """The copy does not hold exactly the CSV's rows: read the CSV."""


@dataclass(frozen=True)
class CopySource:
    """A run's copy beside its CSV of `csv_size` bytes (its size when the report began: a run still
    writing both is read up to there)."""

    csv_path: Path
    path: Path
    csv_size: int

    def read(self, columns: list[str], types: dict[str, pa.DataType]) -> Iterator[pa.RecordBatch]:
        """The rows' `columns` in the CSV reader's `types`, ~REGROUP_ROWS rows a batch. Raises
        StaleCopy, possibly after some batches, when the copy does not end with the CSV."""
        group: list[pa.RecordBatch] = []
        rows = 0
        for batch in self._whole_batches():
            group.append(batch.select(columns))
            rows += batch.num_rows
            if rows >= REGROUP_ROWS:
                yield _as_csv_reader(group, types)
                group, rows = [], 0
        if group:
            yield _as_csv_reader(group, types)

    def column(self, name: str) -> Iterator[pa.Array]:
        """One column's values, batch by batch as the run wrote them (no regrouping: the gaps' pass
        groups rows itself). A null is a value the run had as None: the CSV's empty cell."""
        for batch in self._whole_batches():
            yield batch.column(name)

    def _whole_batches(self) -> Iterator[pa.RecordBatch]:
        try:
            with pa.OSFile(str(self.path)) as source:
                reader = pa.ipc.open_stream(source, memory_pool=pa.system_memory_pool())
                if reader.schema.names != _header(self.csv_path):
                    raise StaleCopy("the copy's columns are not the CSV's")
                while True:
                    batch, metadata = reader.read_next_batch_with_custom_metadata()
                    last = metadata is not None and _ends_csv(self, dict(metadata))
                    yield batch
                    if last:
                        return
        except StopIteration:
            raise StaleCopy("the copy ends before the CSV") from None
        except (pa.ArrowException, OSError, ValueError, KeyError) as exc:
            raise StaleCopy(f"the copy is unreadable: {exc}") from None


def find_copy(csv_path: Path, csv_size: int) -> CopySource | None:
    """The copy beside a CSV of `csv_size` bytes (its complete lines), or None."""
    path = columnar_copy.copy_path(csv_path)
    return CopySource(csv_path, path, csv_size) if path.is_file() and path.stat().st_size > 0 else None


def _ends_csv(source: CopySource, metadata: dict[bytes, bytes]) -> bool:
    """True when this batch ends the CSV; StaleCopy when it ends past the CSV, or at its end with other bytes."""
    end = int(metadata[columnar_copy.CSV_END.encode()])
    if end > source.csv_size:
        raise StaleCopy("the copy holds rows the CSV does not")
    if end < source.csv_size:
        return False
    if not columnar_copy.tail_matches(source.csv_path, metadata):
        raise StaleCopy("the CSV's last bytes are not the ones the run wrote")
    return True


def _header(csv_path: Path) -> list[str]:
    import csv

    with open(csv_path, encoding="utf-8", errors="replace", newline="") as handle:
        return next(csv.reader([handle.readline()]), [])


def _as_csv_reader(group: list[pa.RecordBatch], types: dict[str, pa.DataType]) -> pa.RecordBatch:
    """One batch of these rows, each column as pyarrow's CSV reader types the same cells."""
    table = pa.Table.from_batches(group).combine_chunks()
    columns = []
    for name, column in zip(table.column_names, table.columns):
        array = column.chunk(0) if column.num_chunks else pa.array([], type=column.type)
        wanted = types.get(name)
        if pa.types.is_string(array.type):
            if array.null_count:
                array = pc.fill_null(array, "")  # the CSV reader keeps an empty text cell as ""
            if wanted is not None and pa.types.is_dictionary(wanted):
                array = pc.dictionary_encode(array)
            elif wanted is not None and wanted != array.type:
                array = array.cast(wanted)
        elif wanted is not None and wanted != array.type:
            array = array.cast(wanted)  # counts: float64 with null for empty, as the CSV reader's
        columns.append(array)
    return pa.RecordBatch.from_arrays(columns, names=table.column_names)
