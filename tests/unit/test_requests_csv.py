"""The requests table read in chunks of whole lines on every core is the table read block by block
on one thread: every row once, in order, every value the same, whatever the chunk size."""

from __future__ import annotations

import csv

import numpy as np
import pandas as pd
import pytest
from synthetic_wide import wide_run

from loadline.analysis.data import requests_csv
from loadline.analysis.data.load import load_run, open_up_to_last_newline
from loadline.core import runfolder


def _streamed_one_thread(path):
    header = requests_csv._header(path)
    return requests_csv._read_streamed(path, open_up_to_last_newline, header, True, True, None).frame


def _add_quoted_rows(path, every: int) -> int:
    """Give every `every`th row an error message with commas and quotes (quoted, as csv writes it)."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    column = rows[0].index("error_message")
    for row in rows[1::every]:
        row[column] = 'upstream said "no, not now", retry'
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    return len(rows) - 1


@pytest.mark.parametrize("chunk_bytes", [1_500, 64 << 10, 32 << 20])
@pytest.mark.parametrize("rows", [1, 37, 2_500])
def test_chunked_read_is_the_one_thread_read(tmp_path, monkeypatch, chunk_bytes, rows):
    run = wide_run(tmp_path / "run", rows, seed=rows)
    path = run / runfolder.REQUESTS
    _add_quoted_rows(path, every=7)
    with open(path, "a") as f:
        f.write("r-half,host-0,u1")  # a half-written last line: never read
    monkeypatch.setattr(requests_csv, "CHUNK_BYTES", chunk_bytes)
    chunked = requests_csv.read_streamed(path, open_up_to_last_newline).frame
    expected = _streamed_one_thread(path)
    assert len(chunked) == rows
    pd.testing.assert_frame_equal(chunked, expected)


def test_a_quoted_newline_is_read_whole(tmp_path, monkeypatch):
    """A newline inside a quoted value breaks the chunked read's rows: the table is read quote-aware."""
    run = wide_run(tmp_path / "run", 300)
    path = run / runfolder.REQUESTS
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    column = rows[0].index("error_message")
    rows[150][column] = "line one\nline two"
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    monkeypatch.setattr(requests_csv, "CHUNK_BYTES", 4_096)
    table = load_run(run).requests
    assert len(table) == 300
    assert (table["error_message"] == "line one\nline two").sum() == 1
    assert np.array_equal(
        table["start_wall"].to_numpy(), pd.to_numeric([r[rows[0].index("start_wall")] for r in rows[1:]])
    )
