"""The master writes a large batch of records through pyarrow: the same cells as the csv module, from
columns inferred or typed for the columnar copy (a FLOAT column's ints print as ints either way)."""

from __future__ import annotations

import csv

import pandas as pd
import pytest

from loadline.core import runfolder, schema
from loadline.core.records import COLUMNS, RequestRecord


def _rows(n: int) -> list[list]:
    rows = []
    for i in range(n):
        rec = RequestRecord(f"r{i}", "w1", "u1", "ChatUser", "s1", i % 4, "/v1/chat/completions", "m", 1.7e9 + i / 7)
        rec.ttft_ms, rec.e2e_ms, rec.output_tokens = 100.0 + i / 3, 1e-05 if i == 3 else 900.5, 64
        rec.itl_us = " ".join(str(10_000 + k) for k in range(i % 5))
        rec.prompt_tokens = None if i % 2 else 512
        rows.append(rec.to_row())
    return rows


def _numeric_or_text(column: pd.Series) -> pd.Series:
    try:
        return pd.to_numeric(column.replace("", None)).astype(float)  # 30 and 30.0 are one number
    except (ValueError, TypeError):
        return column


def _read(path) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=False, dtype=str).apply(_numeric_or_text)


def _by_csv_module(path, rows) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        writer.writerows(rows)


@pytest.mark.parametrize("copy", [False, True], ids=["inferred", "typed-for-the-copy"])
def test_a_large_batch_reads_back_as_the_csv_module_wrote_it(tmp_path, copy):
    rows = _rows(600)
    appender = runfolder.CsvAppender(tmp_path / "fast.csv", COLUMNS, copy=schema.REQUESTS if copy else None)
    assert appender._columnar_text(rows) is not None  # the large-batch path is the one under test
    assert (appender.copy is not None) == copy
    assert appender.write_rows(rows) == 600
    appender.close()
    _by_csv_module(tmp_path / "slow.csv", rows)
    fast, slow = _read(tmp_path / "fast.csv"), _read(tmp_path / "slow.csv")
    pd.testing.assert_frame_equal(fast, slow)
    assert (tmp_path / "fast.csv").read_bytes().count(b"\r\n") == 601  # csv's line ends, header included


def test_a_batch_with_a_comma_or_quote_in_a_text_goes_through_the_csv_module(tmp_path):
    rows = _rows(400)
    rows[7][COLUMNS.index("error_message")] = 'upstream said "no", then\nclosed'
    appender = runfolder.CsvAppender(tmp_path / "mixed.csv", COLUMNS)
    assert appender._columnar_text(rows) is None
    assert appender.write_rows(rows) == 400
    appender.close()
    _by_csv_module(tmp_path / "slow.csv", rows)
    assert (tmp_path / "mixed.csv").read_bytes() == (tmp_path / "slow.csv").read_bytes()
