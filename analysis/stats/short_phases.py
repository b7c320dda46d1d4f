"""Phases that ran below their planned users because of a worker, from the manifest the master wrote
(loadline/runtime/fleet.py): a worker lost during the phase (`workers_lost`), missing for a while and
back (`workers_back`: Locust took its users away meanwhile), or short of its users with
--allow-partial-workers (`worker_shortfalls`: that phase and every later one). A run without a
shape has one phase, the whole run: every such event meets it.

Such a phase's row says a load it did not carry for all its time (a lost worker's users are not
given to the others until the next phase starts). Its row carries why (`workers_short`), and it is
set aside when the knee, the break point and the max compliant load are chosen
(analysis/report/build.py); the answer names it, and says when it would have been one of them.
"""

from __future__ import annotations

import time
from typing import Any

import pandas as pd

from loadline.analysis.data.load import WHOLE_RUN

COLUMN = "workers_short"
POINTS = ("knee", "break point", "max compliant load")


def _clock(ts: Any) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(ts)) + " UTC" if isinstance(ts, (int, float)) else "?"


def events(manifest: dict[str, Any] | None) -> list[tuple[list[str], str]]:
    """(phases, why) of every worker that left phases short, as the master wrote them."""
    manifest = manifest or {}
    out: list[tuple[list[str], str]] = []
    for entry in manifest.get("workers_lost") or []:
        if isinstance(entry, dict):  # older manifests list bare ids, without phases
            out.append(
                (entry.get("phases") or [], f"worker {entry.get('worker')} lost at {_clock(entry.get('lost_at'))}")
            )
    for entry in manifest.get("workers_back") or []:
        if isinstance(entry, dict):
            why = (
                f"worker {entry.get('worker')} missing from {_clock(entry.get('lost_at'))} "
                f"to {_clock(entry.get('rejoined_at'))}"
            )
            out.append((entry.get("phases") or [], why))
    for entry in manifest.get("worker_shortfalls") or []:
        if isinstance(entry, dict):
            share = entry.get("share_ran")
            ran = f": {share:.0%} of the planned users ran" if isinstance(share, (int, float)) else ""
            out.append((entry.get("phases") or [], f"worker {entry.get('worker')} {entry.get('kind')}{ran}"))
    return out


def reasons(manifest: dict[str, Any] | None, whole_run: str | None = None) -> dict[str, list[str]]:
    """{"<phase index>:<label>": [why, ...]} for every phase a worker left short. `whole_run`: the key
    of the one phase of a run without a shape (no phases.csv), which every such event meets."""
    out: dict[str, list[str]] = {}
    for phases, why in events(manifest):
        for key in [whole_run] if whole_run else phases:
            out.setdefault(str(key), []).append(why)
    return out


def _key(row: pd.Series) -> str:
    return f"{int(row['phase_index'])}:{row['label']}"


def mark(table: pd.DataFrame, manifest: dict[str, Any] | None) -> pd.DataFrame:
    """The phase table with COLUMN ("" for a phase that ran its planned users) when any phase ran short."""
    if table.empty or "phase_index" not in table:
        return table
    whole = _key(table.iloc[0]) if len(table) == 1 and table.iloc[0].get("kind") == WHOLE_RUN else None
    why = reasons(manifest, whole)
    if not why:
        return table
    flags = ["; ".join(why.get(_key(row), [])) for _, row in table.iterrows()]
    if not any(flags):
        return table
    return table.assign(**{COLUMN: flags})


def judged(table: pd.DataFrame) -> pd.DataFrame:
    """The phases that may be a knee, break point or max compliant load: those that ran their users."""
    if COLUMN not in table:
        return table
    return table[table[COLUMN].fillna("").astype(str) == ""]


def _phase_of(point: dict[str, Any] | None) -> int | None:
    if not point or not point.get("found") or point.get("phase_index") is None:
        return None
    return int(point["phase_index"])


def set_aside(table: pd.DataFrame, full: dict[str, dict], chosen: dict[str, dict]) -> list[dict[str, Any]]:
    """The phases set aside: [{"phase", "reason", "would_be": [point names]}], in phase order.

    `full` and `chosen`: the knee, break point and max compliant load (POINTS) found on the whole
    table and on the judged one; a set-aside phase that the whole table would have chosen says so."""
    if COLUMN not in table:
        return []
    out = []
    for _, row in table[table[COLUMN].fillna("").astype(str) != ""].iterrows():
        index = int(row["phase_index"])
        would = [name for name in POINTS if _phase_of(full.get(name)) == index and _phase_of(chosen.get(name)) != index]
        out.append({"phase": _key(row), "reason": str(row[COLUMN]), "would_be": would})
    return out
