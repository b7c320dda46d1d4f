"""The embedded simulator's truth log (truth.jsonl, docs/architecture.md) as a table.

Only runs against the embedded simulator have one. Its times are the server's own wall clock
(`time.time()` on the same machine as the client), so records minus truth is what the client side
(sockets, event loop, stamping) adds to what it measures: the measurement floor
(analysis/verdict/validity.py). Tolerant like the other readers: a half-written last line or a
malformed one is skipped, an absent file gives None.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from loadline.core import runfolder

TRUTH_COLUMNS = ("request_id", "arrival", "first_token", "last_token", "status", "outcome")


def read_truth(run_dir: str | Path) -> pd.DataFrame | None:
    """request_id, arrival, first_token, last_token (wall seconds), status, outcome; None without a log."""
    path = Path(run_dir) / runfolder.TRUTH
    if not path.is_file():
        return None
    rows = []
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    item = json.loads(line)
                except ValueError:
                    continue  # the simulator may have been killed mid-line
                if isinstance(item, dict):
                    rows.append({c: item.get(c) for c in TRUTH_COLUMNS})
    except OSError:
        return None
    table = pd.DataFrame(rows, columns=list(TRUTH_COLUMNS))
    for column in ("arrival", "first_token", "last_token"):
        table[column] = pd.to_numeric(table[column], errors="coerce")
    table["request_id"] = table["request_id"].astype(str)
    return table.drop_duplicates("request_id", keep="last").reset_index(drop=True)
