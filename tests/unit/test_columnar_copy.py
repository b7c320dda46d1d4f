"""The run's columnar copy (requests.arrows): the report reads it only when it holds exactly the CSV's rows.

Every case compares the table and the gaps read with the copy against the same CSV read without
one, and says which path was taken: a stale copy must never win over the CSV a user edited.
"""

from __future__ import annotations

import logging
import shutil

import numpy as np
import pandas as pd
import pytest

from loadline.analysis.data.load import open_up_to_last_newline
from loadline.analysis.data.requests_csv import read_streamed
from loadline.core import columnar_copy, runfolder
from loadline.core.records import RequestRecord


def _rows(rng: np.random.Generator, batch: int, n: int) -> list[list]:
    rows = []
    for i in range(n):
        rec = RequestRecord(
            f"r{batch}-{i}",
            f"w{i % 3}",
            "u1",
            "ChatUser",
            "s1",
            i % 4,
            "/v1/chat/completions",
            "m",
            1.7e9 + batch + i / 1000,
        )
        rec.ttft_ms = None if i % 11 == 5 else float(rng.random() * 100)
        rec.e2e_ms, rec.output_tokens = float(rng.random() * 900), int(rng.integers(0, 64))
        rec.itl_us = " ".join(str(int(g)) for g in rng.integers(0, 40_000, size=int(rng.integers(0, 30))))
        rec.prompt_tokens = None if i % 3 else int(rng.integers(1, 4000))
        if i % 37 == 7:  # a text the CSV must quote: that batch goes through the csv module
            rec.status, rec.error_class, rec.error_message = "error", "http", 'upstream said "no", then\nclosed'
        if i % 41 == 3:
            rec.finish_reason = "längd"  # not ASCII
        rows.append(rec.to_row())
    return rows


def _write_run(run_dir, sizes: list[int], seed: int = 1):
    run_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    appender = runfolder.requests_appender(run_dir)
    for batch, n in enumerate(sizes):
        appender.write_rows(_rows(rng, batch, n))
    appender.close()
    return run_dir / runfolder.REQUESTS


def _read(csv_path):
    streamed = read_streamed(csv_path, open_up_to_last_newline)
    keys = np.zeros(len(streamed.frame), dtype=np.int32)
    histogram = streamed.gaps.histograms(keys).get(0)
    return streamed.source, streamed.frame, (None if histogram is None else histogram.sorted_counts())


def _without_copy(csv_path, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    shutil.copy(csv_path, plain / runfolder.REQUESTS)
    return _read(plain / runfolder.REQUESTS)


def _same(a, b) -> None:
    pd.testing.assert_frame_equal(a[1], b[1])
    if a[2] is None or b[2] is None:
        assert a[2] is None and b[2] is None
    else:
        for x, y in zip(a[2], b[2]):
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize(
    "sizes",
    [[1] * 40, [700, 300, 256, 1200], [3, 500, 1, 999, 2, 260]],
    ids=["one-row-batches", "large-batches", "mixed"],
)
def test_the_copy_reads_as_the_csv(tmp_path, sizes):
    csv_path = _write_run(tmp_path / "run", sizes)
    assert columnar_copy.copy_path(csv_path).exists()
    from_copy = _read(csv_path)
    assert from_copy[0] == "copy"
    assert len(from_copy[1]) == sum(sizes)
    text = _without_copy(csv_path, tmp_path)
    assert text[0] == "csv"
    _same(from_copy, text)


def _append_row(csv_path):
    with open(csv_path, "a", encoding="utf-8", newline="") as handle:
        handle.write(open(csv_path, encoding="utf-8", newline="").read().splitlines(keepends=True)[-1])


def _drop_last_row(csv_path):
    data = csv_path.read_bytes()
    csv_path.write_bytes(data[: data.rstrip(b"\r\n").rfind(b"\n") + 1])


def _edit_last_row_same_size(csv_path):
    data = bytearray(csv_path.read_bytes())
    last = data.rstrip(b"\r\n").rfind(b"\n") + 1
    at = data.index(b"1700", last)  # the start_wall of the last row: another second, same length
    data[at : at + 4] = b"1800"
    csv_path.write_bytes(bytes(data))


def _cut_copy_mid_batch(csv_path):
    copy = columnar_copy.copy_path(csv_path)
    copy.write_bytes(copy.read_bytes()[: copy.stat().st_size - 200])


def _garble_copy(csv_path):
    columnar_copy.copy_path(csv_path).write_bytes(b"not an arrow stream" * 10)


def _copy_of_another_run(csv_path):
    other = _write_run(csv_path.parent.parent / "other", [300, 300], seed=9)
    shutil.copy(columnar_copy.copy_path(other), columnar_copy.copy_path(csv_path))


@pytest.mark.parametrize(
    "change",
    [_append_row, _drop_last_row, _edit_last_row_same_size, _cut_copy_mid_batch, _garble_copy, _copy_of_another_run],
)
def test_a_csv_changed_after_the_run_is_read_from_its_text(tmp_path, change):
    csv_path = _write_run(tmp_path / "run", [5, 400, 300])
    change(csv_path)
    got = _read(csv_path)
    assert got[0] == "csv"
    _same(got, _without_copy(csv_path, tmp_path))


def test_a_line_still_being_written_is_read_from_the_copy_up_to_the_last_whole_batch(tmp_path):
    csv_path = _write_run(tmp_path / "run", [5, 400, 300])
    with open(csv_path, "ab") as handle:
        handle.write(b"r9-0,w1,u1,ChatUser,s1,0,/v1/chat")  # a crash, or the next batch half-written
    got = _read(csv_path)
    assert got[0] == "copy" and len(got[1]) == 705  # the CSV's text reads the same complete lines
    _same(got, _without_copy(csv_path, tmp_path))


class _FailsOnce:
    """A file whose next flush fails after part of the batch reached the disk (ENOSPC)."""

    def __init__(self, file):
        self.file, self.armed = file, True

    def write(self, text):
        return self.file.write(text)

    def flush(self):
        if self.armed:
            self.armed = False
            raise OSError(28, "No space left on device")
        self.file.flush()

    def __getattr__(self, name):
        return getattr(self.file, name)


def _started_run(tmp_path, seed: int):
    """A run folder whose requests appender (with its copy) has written one batch of five rows."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    rng = np.random.default_rng(seed)
    appender = runfolder.requests_appender(run_dir)
    appender.write_rows(_rows(rng, 0, 5))
    return run_dir, rng, appender


def test_a_batch_the_csv_could_not_take_whole_drops_the_copy(tmp_path):
    run_dir, rng, appender = _started_run(tmp_path, 6)
    real = appender._file
    appender._file = _FailsOnce(real)
    with pytest.raises(OSError):
        appender.write_rows(_rows(rng, 1, 7))
    appender.write_rows(_rows(rng, 2, 5))  # the run goes on; the failed batch's bytes land with this one
    appender._file = real
    appender.close()
    assert appender.copy.abandoned and not columnar_copy.copy_path(run_dir / runfolder.REQUESTS).exists()
    assert _read(run_dir / runfolder.REQUESTS)[0] == "csv"


def test_rows_of_another_width_drop_the_copy(tmp_path):
    """A worker of another version may send longer rows: the CSV takes them (its reader then decides)."""
    run_dir, rng, appender = _started_run(tmp_path, 7)
    appender.write_rows([[*row, "extra"] for row in _rows(rng, 1, 5)])
    appender.write_rows(_rows(rng, 2, 5))
    appender.close()
    assert appender.copy.abandoned and not columnar_copy.copy_path(run_dir / runfolder.REQUESTS).exists()


def test_a_same_size_edit_is_the_value_read(tmp_path):
    csv_path = _write_run(tmp_path / "run", [300, 300])
    _edit_last_row_same_size(csv_path)
    frame = _read(csv_path)[1]
    assert frame["start_wall"].iloc[-1] > 1.8e9  # the edited cell, not the copy's 1.7e9


def test_a_copy_that_cannot_hold_a_value_is_dropped_and_the_run_goes_on(tmp_path, caplog):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    appender = runfolder.requests_appender(run_dir)
    rows = _rows(np.random.default_rng(2), 0, 300)
    appender.write_rows(rows)
    bad = _rows(np.random.default_rng(3), 1, 2)
    bad[0][runfolder.COLUMNS.index("ttft_ms")] = "fast"  # not a number: the CSV takes it, the copy cannot
    with caplog.at_level(logging.WARNING):
        assert appender.write_rows(bad) == 2
        assert appender.write_rows(rows[:5]) == 5
    appender.close()
    assert appender.copy.abandoned and "requests.arrows not kept" in caplog.text
    assert not columnar_copy.copy_path(run_dir / runfolder.REQUESTS).exists()
    assert sum(1 for _ in open(run_dir / runfolder.REQUESTS, encoding="utf-8", newline="")) > 307  # header + rows


def test_an_appended_csv_gets_no_copy_and_loses_an_old_one(tmp_path):
    csv_path = _write_run(tmp_path / "run", [300])
    appender = runfolder.requests_appender(csv_path.parent)  # a second writer on the same file
    appender.write_rows(_rows(np.random.default_rng(4), 5, 300))
    appender.close()
    assert appender.copy is None and not columnar_copy.copy_path(csv_path).exists()
    source, frame, _ = _read(csv_path)
    assert source == "csv" and len(frame) == 600


def test_a_live_run_is_read_from_the_copy_up_to_the_csv_it_was_given(tmp_path):
    """The copy trails the CSV by a batch while a run writes: the report reads what both hold."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    appender = runfolder.requests_appender(run_dir)
    rng = np.random.default_rng(5)
    appender.write_rows(_rows(rng, 0, 400))
    appender.write_rows(_rows(rng, 1, 300))  # still open: no end-of-stream marker yet
    got = _read(run_dir / runfolder.REQUESTS)
    assert got[0] == "copy" and len(got[1]) == 700
    _same(got, _without_copy(run_dir / runfolder.REQUESTS, tmp_path))
    appender.close()
