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
