"""Helpers for end-to-end tests: run `loadline run`/`locust` as real processes and compare with truth."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from loadline.core.records import COLUMNS

REPO = Path(__file__).resolve().parent.parent
RUN_TIMEOUT_S = 120


@dataclass
class Finished:
    code: int
    stdout: str
    stderr: str

    @property
    def run_dir(self) -> Path:
        return Path(self.stdout.strip().splitlines()[-1])


def loadline(*args: str, env: dict | None = None, timeout: float = RUN_TIMEOUT_S) -> Finished:
    proc = subprocess.run(
        [sys.executable, "-m", "loadline", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**os.environ, **(env or {})},
    )
    return Finished(proc.returncode, proc.stdout, proc.stderr)


def requests_table(run_dir: Path) -> pd.DataFrame:
    return pd.read_csv(run_dir / "requests.csv")


def copy_source(run_dir: Path, tmp_dir: Path) -> str:
    """Which path the report reads this run's table from ("copy": requests.arrows), after checking that
    the table and every gap read that way are the CSV's alone (the CSV copied to a folder without one)."""
    import shutil

    import numpy as np

    from loadline.analysis.data.load import open_up_to_last_newline
    from loadline.analysis.data.requests_csv import read_streamed

    plain = Path(tmp_dir) / "csv-only"
    plain.mkdir(parents=True)
    shutil.copy(run_dir / "requests.csv", plain / "requests.csv")
    both = [read_streamed(folder / "requests.csv", open_up_to_last_newline) for folder in (run_dir, plain)]
    pd.testing.assert_frame_equal(both[0].frame, both[1].frame)
    keys = np.zeros(len(both[0].frame), dtype=np.int32)
    gaps = [read.gaps.histograms(keys)[0].sorted_counts() for read in both]
    for mine, theirs in zip(*gaps):
        np.testing.assert_array_equal(mine, theirs)
    assert both[1].source == "csv"
    return both[0].source


def requests_so_far(run_dir: Path) -> pd.DataFrame:
    """The records of a run still being written: none while requests.csv is absent or has no header
    yet (the master creates the file, then writes its header and rows)."""
    try:
        return pd.read_csv(run_dir / "requests.csv")
    except (FileNotFoundError, pd.errors.EmptyDataError):
        return pd.DataFrame(columns=list(COLUMNS))


def truth_table(path: Path) -> pd.DataFrame:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return pd.DataFrame(rows)


def assert_every_request_once(records: pd.DataFrame, truth: pd.DataFrame) -> None:
    """Rows and the simulator's log name the same requests, each exactly once."""
    assert records.request_id.is_unique, "a request was recorded twice"
    assert truth.request_id.is_unique, "the simulator logged a request twice"
    missing = set(truth.request_id) - set(records.request_id)
    assert not missing, f"{len(missing)} requests reached the simulator but have no record"
    extra = records[~records.request_id.isin(truth.request_id)]
    # A request cancelled before its bytes reached the server is recorded but never received.
    assert (extra.status == "cancelled").all() and extra.ttfb_ms.isna().all(), extra.to_string()


def locust_rows(run_dir: Path, prefix: str = "locust") -> pd.DataFrame:
    return pd.read_csv(run_dir / f"{prefix}_stats.csv")
