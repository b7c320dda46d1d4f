"""The inter-token gaps (`itl_us`) of a run, streamed instead of held.

A request row carries every gap of its reply as space-separated integer microseconds: 8-10 bytes per
token, 80 % of requests.csv. The table the analyses get has no such column; a `GapColumn` reads the
gaps again when a figure needs them, in bounded batches, either from the CSV (only that column: the
CSV parser skips the others' conversion) or from a table in memory (tests, small runs).

Per-phase ITL percentiles are exact over every gap, as before: gaps are integers, so a histogram with
one bin per microsecond (`GapHistogram`) holds the whole sorted sample, and its order statistics are
numpy's default (linear, Hyndman-Fan type 7) percentiles, to the last bit. Memory is the range of the
gaps, not their number (one counter per microsecond up to 4.2 s, a sorted list of the rarer longer
ones), so a 50 M-row run fits like a 50 k-row one.

In model time (a time-scaled run) each gap is x scale, rounded to an integer microsecond, as
analysis/data/timescale.py converts a table's `itl_us`.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from loadline.analysis.data.memory import return_freed_memory

ITL_COLUMN = "itl_us"
DENSE_LIMIT_US = 1 << 22  # one counter per microsecond below 4.2 s; longer gaps are kept sorted, sparse
_PARSE_ROWS = 16_384  # rows joined and parsed at once: ~12 MB of text at 100 gaps a row, under the
# 32 MB above which glibc maps each block fresh (and the kernel zeroes it) instead of reusing the heap
_GROUP_ROWS = 8_192  # rows per task of a histogram pass: ~8 MB of text; three in flight


def parse_gaps(strings: np.ndarray | pd.Series | list) -> np.ndarray:
    """Every gap of these rows, in row order, as one int32 array (microseconds), parsed by numpy in C."""
    values = np.asarray(strings, dtype=object)
    return parse_arrow(pa.array([v if isinstance(v, str) else None for v in values], type=pa.string()))


def parse_arrow(strings: pa.Array) -> np.ndarray:
    """parse_gaps of an Arrow string array: each row's text and a space, end to end in one buffer
    (Arrow's C++, no Python string per row), read by numpy's C parser. Both release the GIL."""
    parts: list[np.ndarray] = []
    separators = [pa.scalar(text, type=strings.type) for text in (b" ", b"")]  # binary or string, as the rows
    for start in range(0, len(strings), _PARSE_ROWS):
        joined = pc.binary_join_element_wise(strings[start : start + _PARSE_ROWS], *separators)
        offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32)[joined.offset : joined.offset + len(joined) + 1]
        text = joined.buffers()[2]
        if text is not None and offsets[-1] > offsets[0]:
            parts.append(_parse_window(text.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))))
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int32)


def _parse_window(window: pa.Buffer) -> np.ndarray:
    """The integers of a space-separated text, sized first: without a count numpy grows its output
    4,096 items at a time, and a grown block that cannot extend in place is copied whole each time
    (most of a 10 M-row report's parsing went to those copies)."""
    spaces = np.frombuffer(window, dtype=np.uint8) <= 32  # every byte numpy's parser may skip as a separator
    count = int(np.count_nonzero(spaces[:-1] & ~spaces[1:])) + int(not spaces[0])  # token starts
    try:
        return np.fromstring(window, dtype=np.int32, sep=" ", count=count)
    except ValueError:  # text that is not all numbers: numpy's own message, as without a count
        return np.fromstring(window, dtype=np.int64, sep=" ").astype(np.int32)


def to_model(gaps: np.ndarray, scale: float) -> np.ndarray:
    """Gaps x scale, as integer microseconds (analysis/data/timescale.py's rule for `itl_us`)."""
    if scale == 1.0:
        return gaps
    return np.rint(gaps.astype(np.int64) * scale).astype(np.int64).astype(np.int32)


def count_gaps(gaps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(counts per microsecond 0..max below DENSE_LIMIT_US, the gaps outside that range as int64)."""
    if gaps.size == 0:
        return np.zeros(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    if int(gaps.min()) >= 0 and int(gaps.max()) < DENSE_LIMIT_US:
        return np.bincount(gaps), np.empty(0, dtype=np.int64)
    inside = (gaps >= 0) & (gaps < DENSE_LIMIT_US)
    return np.bincount(gaps[inside]), gaps[~inside].astype(np.int64)


def _count_group(group: list[pa.Array], keys: np.ndarray, scale: float) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """count_gaps of each key's rows in consecutive batches (`keys`: one per row of them, -1: skip)."""
    return {
        int(key): count_gaps(to_model(parse_arrow(_rows_with_key(group, keys, key)), scale))
        for key in np.unique(keys[keys >= 0])
    }


def _rows_with_key(group: list[pa.Array], keys: np.ndarray, key: int) -> pa.Array:
    """The gap strings of the rows of consecutive batches whose key is `key`, in row order."""
    return pa.chunked_array(group, type=group[0].type).filter(pa.array(keys == key)).combine_chunks()


class GapHistogram:
    """Exact counts of integer gaps: a dense counter per microsecond, sparse (value, count) beyond."""

    def __init__(self) -> None:
        self.dense = np.zeros(0, dtype=np.int64)
        self._sparse: list[np.ndarray] = []
        self._sparse_size = 0

    def add(self, gaps: np.ndarray) -> None:
        self.add_counts(*count_gaps(gaps))

    def add_counts(self, counts: np.ndarray, sparse: np.ndarray) -> None:
        """Counts per microsecond from 0 (count_gaps), and the gaps outside that range."""
        if counts.size > self.dense.size:
            counts = counts.copy()
            counts[: self.dense.size] += self.dense
            self.dense = counts
        elif counts.size:
            self.dense[: counts.size] += counts
        if sparse.size:
            self._sparse.append(sparse)
            self._sparse_size += int(sparse.size)
            if self._sparse_size > 4 * _PARSE_ROWS:
                self._sparse = [np.repeat(*self._sparse_counts())]  # bound the list, not the values

    def _sparse_counts(self) -> tuple[np.ndarray, np.ndarray]:
        if not self._sparse:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        return np.unique(np.concatenate(self._sparse), return_counts=True)

    def merge(self, other: GapHistogram) -> None:
        self.add_counts(other.dense, np.concatenate(other._sparse) if other._sparse else np.empty(0, dtype=np.int64))

    def positive(self) -> GapHistogram:
        """The gaps above zero only (what a log-scale chart can draw)."""
        out = GapHistogram()
        out.merge(self)
        if out.dense.size:
            out.dense = out.dense.copy()
            out.dense[0] = 0
        out._sparse = [part[part > 0] for part in out._sparse]
        return out

    def sorted_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """(distinct values ascending, how many gaps of each)."""
        dense_values = np.flatnonzero(self.dense)
        sparse_values, sparse_counts = self._sparse_counts()
        below = sparse_values < 0
        values = np.concatenate([sparse_values[below], dense_values, sparse_values[~below]])
        counts = np.concatenate([sparse_counts[below], self.dense[dense_values], sparse_counts[~below]])
        return values, counts

    @property
    def count(self) -> int:
        return int(self.dense.sum()) + sum(int(part.size) for part in self._sparse)

    def percentiles(self, qs: tuple[float, ...]) -> np.ndarray:
        """np.percentile(all gaps as int32, qs) exactly (linear interpolation, Hyndman-Fan type 7): the
        same virtual index (n - 1) * q, neighbours and lerp as numpy's, on the sorted sample's ranks."""
        return self.quantiles(np.true_divide(np.asarray(qs, dtype=float), 100))

    def quantiles(self, quantiles: np.ndarray) -> np.ndarray:
        """np.quantile(all gaps as int32, quantiles), exactly (see percentiles)."""
        values, counts = self.sorted_counts()
        n = int(counts.sum())
        if n == 0:
            return np.full(len(quantiles), np.nan)
        ends = np.cumsum(counts)  # rank r (0-based) holds values[searchsorted(ends, r, "right")]
        virtual = (n - 1) * quantiles
        previous = np.floor(virtual)
        following = previous + 1
        above = virtual >= n - 1
        previous[above] = n - 1
        following[above] = n - 1
        at = values.astype(np.int32)
        a = at[np.searchsorted(ends, previous.astype(np.int64), side="right")]
        b = at[np.searchsorted(ends, following.astype(np.int64), side="right")]
        gamma = np.where(above, 0.0, virtual - np.floor(virtual))
        diff = b - a
        out = np.add(a, diff * gamma)
        np.subtract(b, diff * (1 - gamma), out=out, where=gamma >= 0.5, casting="unsafe")
        return out


@dataclass(frozen=True)
class GapColumn:
    """Where a run's gaps are, aligned with its requests table's rows.

    `batches_of_source()` yields the gap strings of consecutive rows of the source as Arrow string
    arrays; `rows` maps a table row to its source row when the loader dropped some. `scale` is
    applied to each gap parsed (the model-time view)."""

    batches_of_source: Callable[[], Iterator[pa.Array]]
    source_rows: int
    rows: np.ndarray | None = None  # table row -> source row; None when they are the same
    scale: float = 1.0

    @staticmethod
    def in_memory(strings: pd.Series | np.ndarray | list) -> GapColumn:
        values = np.asarray(strings, dtype=object)
        array = pa.array([v if isinstance(v, str) else None for v in values], type=pa.string())
        return GapColumn(lambda: iter([array]), len(values))

    def scaled(self, scale: float) -> GapColumn:
        return dataclasses.replace(self, scale=self.scale * scale)

    def _source_keys(self, keys: np.ndarray) -> np.ndarray:
        """Per-table-row group keys (-1: skip) spread onto the source's rows."""
        if self.rows is None:
            return keys
        spread = np.full(self.source_rows, -1, dtype=keys.dtype)
        spread[self.rows] = keys
        return spread

    def _grouped_batches(self, keys: np.ndarray) -> Iterator[tuple[list[pa.Array], np.ndarray]]:
        """(consecutive source batches, their rows' keys), about _GROUP_ROWS rows at a time."""
        keys = self._source_keys(np.asarray(keys))
        offset, group, rows = 0, [], 0
        for strings in self.batches_of_source():
            group.append(strings)
            rows += len(strings)
            if rows >= _GROUP_ROWS:
                yield group, keys[offset : offset + rows]
                offset, group, rows = offset + rows, [], 0
        if group:
            yield group, keys[offset : offset + rows]

    def histograms(self, keys: np.ndarray) -> dict[int, GapHistogram]:
        """One exact histogram per key of the gaps of the rows with that key (keys: one per table row,
        -1 for rows left out). One pass: the reader splits the file on this thread while two others
        sort each group of batches' rows by key, parse and count them (Arrow, numpy's parser and
        bincount release the GIL). A group is ~_GROUP_ROWS rows, so this thread merges counts ~1,200
        times for a 10 M-row run, not once per 1 MB block (10,000 merges: a sixth of its time)."""
        out: dict[int, GapHistogram] = {}

        def merge(counted: Future) -> None:
            for key, (counts, sparse) in counted.result().items():
                out.setdefault(key, GapHistogram()).add_counts(counts, sparse)

        with ThreadPoolExecutor(max_workers=2) as pool:
            pending: list[Future] = []
            for group, mine in self._grouped_batches(keys):
                pending.append(pool.submit(_count_group, group, mine, self.scale))
                if len(pending) > 2:  # at most three groups' gaps in memory
                    merge(pending.pop(0))
            for counted in pending:
                merge(counted)
        return_freed_memory()  # the blocks of text and gaps this pass parsed
        return out

    def pooled(self, mask: np.ndarray) -> np.ndarray:
        """Every gap of the table rows in `mask` (a boolean per row), in row order, as int32 microseconds.
        Materialised: for one phase or a sample of rows, not for a whole large run."""
        keys = np.where(np.asarray(mask, dtype=bool), 0, -1)
        parts = [
            to_model(parse_arrow(_rows_with_key(group, mine, 0)), self.scale)
            for group, mine in self._grouped_batches(keys)
            if (mine == 0).any()
        ]
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int32)

    def per_row(self, mask: np.ndarray) -> list[np.ndarray]:
        """The gaps of each table row in `mask`, one array per row in row order (int32 microseconds, empty
        when a row has none). A Python object per row: for a fit's few thousand rows, not a whole large run."""
        keys = np.where(np.asarray(mask, dtype=bool), 0, -1)
        out: list[np.ndarray] = []
        for group, mine in self._grouped_batches(keys):
            if (mine == 0).any():
                for text in _rows_with_key(group, mine, 0).to_pylist():
                    gaps = np.array(text.split(), dtype=np.int32) if text else np.empty(0, dtype=np.int32)
                    out.append(to_model(gaps, self.scale))
        return out


def csv_gap_batches(
    path: Path, open_limited: Callable[[Path], io.BufferedIOBase], batch_bytes: int, newlines_in_values: bool
) -> GapColumn:
    """A GapColumn over requests.csv's `itl_us`, read again by pyarrow at every use (the other columns
    are split but never converted). `open_limited` opens the file up to its last complete line, as the
    table's reader did, so both see the same rows."""

    def batches() -> Iterator[pa.Array]:
        with open_limited(path) as handle:
            reader = pacsv.open_csv(
                handle,
                read_options=pacsv.ReadOptions(block_size=batch_bytes),
                parse_options=pacsv.ParseOptions(newlines_in_values=newlines_in_values),  # as the table's reader
                convert_options=pacsv.ConvertOptions(
                    include_columns=[ITL_COLUMN],
                    column_types={ITL_COLUMN: pa.binary()},  # digits and spaces: no UTF-8 check needed
                    strings_can_be_null=True,
                ),
                memory_pool=pa.system_memory_pool(),
            )
            for batch in reader:
                yield batch.column(0)

    return GapColumn(batches, 0)
