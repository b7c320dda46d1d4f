"""A table larger than memory: its columns written to unnamed files on disk and memory-mapped.

A day's soak at 100 requests/s is 8.6 M rows, a week's 60 M; the compact table takes ~125 bytes a
row (12 float64 columns are 96 of them), 6 GB at 50 M rows. Past a budget the reader writes each
block's columns to disk as it converts them and maps them back read-only: pages the kernel reads in
when a figure touches them and drops again when memory is short (clean file pages are reclaimed,
not swapped), so the report's own memory is its working set, not the table. The values are the same
float64, int and category codes the in-memory table holds: every figure is the same.

The files are unnamed (O_TMPFILE where the file system has it): nothing is left on disk when the
report ends or is killed, and a file's space is freed when its column is.
"""

from __future__ import annotations

import mmap
import os
import tempfile
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from loadline.core.errors import UsageError

# The table held in memory up to this many bytes (~8.6 M rows, a day at 100 requests/s), on disk past
# it: about half of the 2 GB an ordinary machine gives a report, the rest for the figures' working set.
MEMORY_BYTES = 1 << 30
CHUNK_ROWS = 1 << 20  # a derived or recoded column is computed this many rows at a time (8 MB of float64)
_MAPPED: weakref.WeakSet[mmap.mmap] = weakref.WeakSet()  # the live columns' mappings


def release_pages() -> None:
    """Take the columns' pages out of this process's resident memory; the next read maps them again
    from the page cache (or the disk). Between the report's parts: each part's resident pages are then
    the columns it reads, not every column read so far."""
    advice = getattr(mmap, "MADV_DONTNEED", None)  # Linux and the BSDs; elsewhere pages stay mapped
    if advice is None:
        return
    for mapping in list(_MAPPED):
        mapping.madvise(advice)


def spill_directory(near: Path) -> str:
    """Where the files go: beside the run (its disk holds the CSV, ~8x the table), else the temp dir."""
    return str(near) if os.access(near, os.W_OK) else tempfile.gettempdir()


class _File:
    """One unnamed file of one dtype's values, appended to, then mapped read-only."""

    def __init__(self, directory: str, dtype: np.dtype):
        self.directory, self.dtype, self.rows = directory, np.dtype(dtype), 0
        try:
            self._handle = tempfile.TemporaryFile(dir=directory)
        except OSError as exc:
            raise self._failed(exc) from None

    def write(self, values: np.ndarray) -> None:
        try:
            self._handle.write(np.ascontiguousarray(values, dtype=self.dtype).data)
        except OSError as exc:  # a full disk: one line that says where, not a traceback
            raise self._failed(exc) from None
        self.rows += len(values)

    def write_nan(self, rows: int) -> None:
        for start in range(0, rows, CHUNK_ROWS):
            self.write(np.full(min(CHUNK_ROWS, rows - start), np.nan))

    def mapped(self) -> np.ndarray:
        """The values written, read-only; the mapping holds the file open, and its space until freed."""
        try:
            self._handle.flush()
            if self.rows == 0:
                return np.empty(0, dtype=self.dtype)
            mapping = mmap.mmap(self._handle.fileno(), 0, access=mmap.ACCESS_READ)
            _MAPPED.add(mapping)
            return np.frombuffer(mapping, dtype=self.dtype)
        except OSError as exc:
            raise self._failed(exc) from None
        finally:
            self._handle.close()

    def _failed(self, exc: OSError) -> UsageError:
        return UsageError(f"cannot write the requests table to disk in {self.directory}: {exc.strerror or exc}")


class NumberColumn:
    """One number column written block by block; a block empty in every row (None) is NaN."""

    def __init__(self, directory: str):
        self._directory = directory
        self._file: _File | None = None
        self._rows = 0

    def append(self, piece: np.ndarray | None, rows: int) -> None:
        if piece is not None and self._file is None:  # the first values: the empty blocks before are NaN
            self._file = _File(self._directory, piece.dtype)
            self._file.write_nan(self._rows)
        self._rows += rows
        if self._file is None:
            return
        if piece is None:
            self._file.write_nan(rows)
        else:
            self._file.write(piece)

    def finish(self) -> np.ndarray | pd.arrays.SparseArray:
        if self._file is None:  # empty in every row: no bytes a row, as in memory
            return pd.arrays.SparseArray(np.full(self._rows, np.nan), fill_value=np.nan)
        return self._file.mapped()


class CategoryColumn:
    """One text column with few distinct values, written as codes into the categories seen so far; at
    the end recoded to the categories sorted (as `union_categoricals(..., sort_categories=True)`) in
    the code type pandas gives that many categories."""

    def __init__(self, directory: str):
        self._directory = directory
        self._file = _File(directory, np.dtype(np.int32))
        self._codes: dict[Any, int] = {}  # texts, as the reader's categories hold them

    def append(self, piece: pd.Categorical, rows: int) -> None:
        known = [self._codes.setdefault(value, len(self._codes)) for value in piece.categories]
        self._file.write(np.array([*known, -1], dtype=np.int32)[piece.codes])  # code -1 (missing) stays -1

    def finish(self) -> pd.Categorical:
        seen = self._file.mapped()
        categories = sorted(self._codes)
        rank = np.full(len(categories) + 1, -1, dtype=np.int64)  # the last: a missing value's -1
        rank[[self._codes[value] for value in categories]] = np.arange(len(categories))
        dtype = pd.Categorical.from_codes([], categories=categories).codes.dtype
        codes = _File(self._directory, dtype)
        for start in range(0, len(seen), CHUNK_ROWS):
            codes.write(rank[seen[start : start + CHUNK_ROWS]])
        return pd.Categorical.from_codes(codes.mapped(), categories=categories, validate=False)


def derived(directory: str, rows: int, compute: Callable[[int, int], np.ndarray]) -> np.ndarray:
    """A new float64 column of `rows` values on disk, `compute(start, stop)` giving each chunk's."""
    column = _File(directory, np.dtype(np.float64))
    for start in range(0, rows, CHUNK_ROWS):
        column.write(compute(start, min(start + CHUNK_ROWS, rows)))
    return column.mapped()
