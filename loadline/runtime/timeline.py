"""The phase timeline: which phase ran when, at what target, with how many users really running.

The shape (master only) opens a phase when it enters it and finishes it when it leaves; every
finished phase becomes one `PhaseRow` (loadline/core/schema.py) in `<run folder>/phases.csv`. Rows
are kept in memory too, and any row written while no run folder was active is written as soon as
one is, so analysis never sees holes. `current_phase()` is what the console, the web UI tab and the exporter show.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from loadline.core import runfolder
from loadline.core.schema import PhaseRow  # the phases.csv row, declared once in core

logger = logging.getLogger(__name__)

# A phase shorter than this fraction of its plan was cut short (test stopped, stop rule).
_CUT_SHORT = 0.98


def append_to_run_folder(rows: list[PhaseRow]) -> bool:
    """Append rows to the active run folder's phases.csv; False when there is no run folder."""
    return runfolder.append_to_active(runfolder.PHASES, runfolder.PHASE_COLUMNS, [row.as_csv() for row in rows])


class Timeline:
    """The phases of one test run, in order. Not thread-safe: only the shape greenlet writes."""

    def __init__(
        self,
        planned_phases: int,
        write: Callable[[list[PhaseRow]], bool] = append_to_run_folder,
        wall: Callable[[], float] = time.time,
    ):
        self.planned_phases = planned_phases
        self.wall = wall  # the shape's clock, so a stop from outside is timed like every other change
        self.rows: list[PhaseRow] = []  # finished phases
        self.open: PhaseRow | None = None
        self.closed = False
        self._open_planned_s = 0.0
        self._write = write
        self._written = 0

    def begin(
        self,
        index: int,
        label: str,
        kind: str,
        target_users: int,
        spawn_rate: float,
        users_now: int,
        wall: float,
        planned_s: float,
        target_rate: float | None = None,
    ) -> PhaseRow:
        if self.open is not None:
            self.finish(users_now, wall)
        self.open = PhaseRow(
            index, label, kind, wall, None, target_users, spawn_rate, users_now, None, target_rate=target_rate
        )
        self._open_planned_s = planned_s
        logger.info(
            "Phase %d/%d: %s (target %d users, spawn rate %.2f/s, %.0f s)",
            index + 1,
            self.planned_phases,
            label,
            target_users,
            spawn_rate,
            planned_s,
        )
        return self.open

    def finish(self, users_now: int, wall: float, note: str = "") -> PhaseRow | None:
        """End the open phase (if any) at `wall` and write it out."""
        row, self.open = self.open, None
        if row is None:
            return None
        row.end_wall, row.users_end = wall, users_now
        if not note and wall - row.start_wall < _CUT_SHORT * self._open_planned_s:
            note = "cut short"
        row.note = "; ".join(text for text in (row.note, note) if text)
        self.rows.append(row)
        self.flush()
        return row

    def annotate(self, row: PhaseRow, text: str) -> None:
        """Add human-readable `text` to a phase's note; too late once the row is written. Facts that
        analysis reads have tables of their own (drill fault actions: faults.csv)."""
        if any(row is written for written in self.rows[: self._written]):
            logger.warning("phase %s was already written; its note misses: %s", row.label, text)
            return
        row.note = "; ".join(part for part in (row.note, text) if part)

    def close(self, users_now: int, wall: float, note: str = "") -> None:
        """End the run's timeline; safe to call more than once."""
        if self.closed:
            return
        self.finish(users_now, wall, note)
        self.closed = True
        self.flush()

    def flush(self) -> None:
        pending = self.rows[self._written :]
        if not pending:
            return
        try:
            if self._write(pending):
                self._written = len(self.rows)
        except OSError as exc:  # a full disk must not kill the shape greenlet; rows stay in memory
            logger.warning("could not write phases.csv: %s", exc)

    def current(self) -> dict[str, Any] | None:
        if self.open is None:
            return None
        return {
            "index": self.open.index,
            "label": self.open.label,
            "kind": self.open.kind,
            "target_users": self.open.target_users,
            "start_wall": self.open.start_wall,
            "planned_s": self._open_planned_s,
            "phases": self.planned_phases,
        }


_active: Timeline | None = None


def activate(timeline: Timeline | None) -> None:
    """Make `timeline` the one current_phase() and close_timeline() see (one shape runs at a time)."""
    global _active
    _active = timeline


def active_timeline() -> Timeline | None:
    return _active


def current_phase() -> dict[str, Any] | None:
    """The phase running now: label, kind, target_users, start_wall (and index, planned_s, phases)."""
    return _active.current() if _active is not None else None


def close_timeline(environment: Any, note: str = "") -> None:
    """Flush the last phase when the test stops (called from loadline.runtime.plugin's test_stop on the master).

    Idempotent, and a no-op when no shape ran.
    """
    timeline = _active
    if timeline is None or timeline.closed:
        return
    runner = getattr(environment, "runner", None)
    users = int(getattr(runner, "user_count", 0) or 0)
    timeline.close(users, timeline.wall(), note)
