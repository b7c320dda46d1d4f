"""A requests table written to disk past its memory budget is the table held in memory: every column,
its dtype, a category's order and codes, the derived end_wall; nothing is left on disk."""

from __future__ import annotations

import gc
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from synthetic_wide import wide_run

from loadline.analysis.data import requests_csv, spill
from loadline.analysis.data.load import load_run, open_up_to_last_newline
from loadline.core import runfolder
from loadline.core.errors import UsageError


def _crafted_run(folder: Path, rows: int) -> Path:
    """Categories met out of their sorted order, a number column empty in the first blocks, a text column
    with hundreds of distinct values (int16 codes), and counts."""
    folder.mkdir()
    rng = np.random.default_rng(rows)
    late = np.where(np.arange(rows) < rows // 3, "", np.round(rng.uniform(5, 500, rows), 3).astype(str))
    table = pd.DataFrame(
        {
            "start_wall": 1.7e9 + np.arange(rows) * 0.013,
            "status": np.where(rng.random(rows) < 0.1, "error", "ok"),
            "e2e_ms": np.round(rng.uniform(10, 900, rows), 3),
            "error_class": np.array(["zeta", "", "alpha", "mu"])[np.arange(rows) * 7 // rows % 4],
            "session_id": [f"s{i % 300:03d}-{(i * 37) % 11}" for i in range(rows)][::-1],
            "ttft_ms": late,
            "output_tokens": rng.integers(0, 4_000, rows),
        }
    )
    table.to_csv(folder / runfolder.REQUESTS, index=False)
    return folder


RUNS = {"wide": lambda folder, rows: wide_run(folder, rows, seed=rows), "crafted": _crafted_run}


def _mapped_under(directory: Path) -> list[str]:
    return [line for line in Path("/proc/self/maps").read_text().splitlines() if f" {directory}/" in line]


# bytes: at once, after the first block (each ~16 KB converted), after several (the smallest table: ~80 KB)
@pytest.mark.parametrize("budget", [0, 5_000, 60_000])
@pytest.mark.parametrize("rows", [1_700, 6_000])
@pytest.mark.parametrize("run", sorted(RUNS))
def test_a_spilled_table_is_the_held_table(tmp_path, monkeypatch, run, rows, budget):
    folder = RUNS[run](tmp_path / "run", rows)
    monkeypatch.setattr(requests_csv, "CHUNK_BYTES", 64 << 10)  # many blocks, as a large file has
    monkeypatch.setattr(requests_csv, "BATCH_BYTES", 16 << 10)
    held = load_run(folder).requests
    assert not _mapped_under(folder)
    monkeypatch.setattr(spill, "MEMORY_BYTES", budget)
    spilled = load_run(folder).requests
    assert _mapped_under(folder)  # the columns are the files beside the run, mapped
    pd.testing.assert_frame_equal(spilled, held)
    for name in held.columns:
        if isinstance(held[name].dtype, pd.CategoricalDtype):  # == ignores an unordered category's order
            assert list(spilled[name].cat.categories) == list(held[name].cat.categories), name
            assert np.array_equal(spilled[name].cat.codes, held[name].cat.codes), name
            assert spilled[name].cat.codes.dtype == held[name].cat.codes.dtype, name
    before = sorted(p.name for p in folder.iterdir())
    del spilled
    gc.collect()
    assert not _mapped_under(folder)  # freed with the table
    assert sorted(p.name for p in folder.iterdir()) == before == sorted(p.name for p in folder.iterdir())


def test_the_budget_decides(tmp_path, monkeypatch):
    """Under the budget the table is held (no file), over it on disk."""
    folder = _crafted_run(tmp_path / "run", 2_000)
    path = folder / runfolder.REQUESTS
    monkeypatch.setattr(spill, "MEMORY_BYTES", 1 << 30)
    assert (
        "spilled_to" not in requests_csv.read_streamed(path, open_up_to_last_newline, spill_to=str(folder)).frame.attrs
    )
    monkeypatch.setattr(spill, "MEMORY_BYTES", 1_000)
    frame = requests_csv.read_streamed(path, open_up_to_last_newline, spill_to=str(folder)).frame
    assert frame.attrs["spilled_to"] == str(folder)
    assert not requests_csv.read_streamed(path, open_up_to_last_newline, spill_to=None).frame.attrs  # never: held


def test_a_place_that_cannot_take_the_table_is_one_line(tmp_path, monkeypatch):
    folder = _crafted_run(tmp_path / "run", 500)
    monkeypatch.setattr(spill, "MEMORY_BYTES", 0)
    not_a_folder = folder / runfolder.REQUESTS
    with pytest.raises(UsageError, match=re.escape(f"cannot write the requests table to disk in {not_a_folder}: ")):
        requests_csv.read_streamed(not_a_folder, open_up_to_last_newline, spill_to=str(not_a_folder))


def test_the_spill_goes_beside_the_run_else_to_the_temp_dir(tmp_path):
    assert spill.spill_directory(tmp_path) == str(tmp_path)
    assert spill.spill_directory(tmp_path / "absent") == __import__("tempfile").gettempdir()


def _resident_kb(directory: Path) -> int:
    """The resident kB of this process's mappings of files in `directory` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            inside = f" {directory}/" in line
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


def test_released_pages_leave_the_process_and_read_again(tmp_path, monkeypatch):
    folder = _crafted_run(tmp_path / "run", 40_000)
    held = load_run(folder).requests["e2e_ms"].sum()
    monkeypatch.setattr(spill, "MEMORY_BYTES", 0)
    frame = load_run(folder).requests
    spill.release_pages()
    assert _resident_kb(folder) == 0
    assert frame["e2e_ms"].sum() == held  # read: its pages come back
    assert _resident_kb(folder) >= 40_000 * 8 // 1024 - 4
    spill.release_pages()
    assert _resident_kb(folder) == 0
    assert frame["e2e_ms"].sum() == held
