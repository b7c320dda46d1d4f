"""The run's columnar copy of requests.csv (loadline/core/columnar_copy.py), read as the CSV reader would.

The copy is used only when its batches' byte spans follow one another from the CSV's header to the
CSV's last complete line, the last one ending with the CSV's own bytes: a CSV changed after the run
(cut, filtered, appended to, edited at its end, a batch the run failed to write whole) makes the copy
stale, and the table is read from the CSV's text as before. Found before anything is converted:
only the batches' metadata is read to decide. Batches come out in the types pyarrow's CSV
reader gives the same cells (analysis/data/requests_csv.py): numbers float64 with null for an empty
cell, texts "" when empty (dictionaries, but for the request ids), so every later step is the CSV's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from loadline.analysis.data.lines import last_newline_end
from loadline.core import columnar_copy

REGROUP_ROWS = 1 << 16  # a slow run's copy holds many small batches: converted ~64 k rows at a time


class StaleCopy(Exception):
    """The copy does not hold exactly the CSV's rows: read the CSV."""


@dataclass(frozen=True)
class CopySource:
    """A run's copy beside its CSV, whose first `batches` batches hold exactly the CSV's rows up to its
    last complete line when the report began (a run still writing both is read up to there)."""

    path: Path
    batches: int

    def read(self, columns: list[str], types: dict[str, pa.DataType]) -> Iterator[pa.RecordBatch]:
        """The rows' `columns` in the CSV reader's `types`, ~REGROUP_ROWS rows a batch."""
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
        """The first `batches` batches, read (not mapped: mapped pages would count as the report's
        memory until unmapped). StaleCopy if the file no longer holds them."""
        try:
            with pa.OSFile(str(self.path)) as source:
                reader = pa.ipc.open_stream(source, memory_pool=pa.system_memory_pool())
                for _ in range(self.batches):
                    yield reader.read_next_batch()
        except StopIteration:
            raise StaleCopy("the copy ends before the CSV") from None
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise StaleCopy(f"the copy is unreadable: {exc}") from None


def find_copy(csv_path: Path, header: list[str]) -> CopySource | None:
    """The copy beside a CSV (whose columns are `header`) when it holds exactly the CSV's complete lines,
    else None. Reads only its batches' metadata (memory-mapped: their bodies are not touched) and the
    CSV's first line and tail."""
    path = columnar_copy.copy_path(csv_path)
    try:
        if not path.is_file() or path.stat().st_size == 0:
            return None
        return CopySource(path, _batches_to_csv_end(csv_path, header, path))
    except (StaleCopy, pa.ArrowException, OSError, ValueError, KeyError):  # stale, unreadable, or gone meanwhile
        return None


def _batches_to_csv_end(csv_path: Path, header: list[str], path: Path) -> int:
    """How many of the copy's batches hold the CSV's rows: their byte spans must follow one another from
    the header's end to the CSV's last complete line, and the last one end with the CSV's own bytes."""
    header_bytes, size = _header_bytes_and_complete_size(csv_path)
    with pa.memory_map(str(path)) as source:
        reader = pa.ipc.open_stream(source)
        if reader.schema.names != header:
            raise StaleCopy("the copy's columns are not the CSV's")
        expected, count = header_bytes, 0
        while True:
            try:
                _, metadata = reader.read_next_batch_with_custom_metadata()
            except StopIteration:
                raise StaleCopy("the copy ends before the CSV") from None
            count += 1
            if metadata is None:  # a table's batch before its last: its span is on that last one
                continue
            start = int(metadata[columnar_copy.CSV_START.encode()])
            end = int(metadata[columnar_copy.CSV_END.encode()])
            if start != expected or end > size:
                raise StaleCopy("the copy's batches do not follow the CSV's bytes")
            if end == size:
                if not columnar_copy.tail_matches(csv_path, dict(metadata)):
                    raise StaleCopy("the CSV's last bytes are not the ones the run wrote")
                return count
            expected = end


def _header_bytes_and_complete_size(csv_path: Path) -> tuple[int, int]:
    """(the header line's length in bytes, the CSV's size up to its last newline: a line still being
    written, or cut by a crash, is not read by the CSV path either)."""
    with open(csv_path, "rb") as handle:
        header_bytes = len(handle.readline())
        return header_bytes, last_newline_end(handle, handle.seek(0, 2))


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
