"""The run folder's tables, declared once: each column's name and type, in file order.

Writers (the collector, the phase timeline, the scraper, the self-check, the drill's fault log) and
the reader (analysis/data/load.py) both take the columns from here, so a new column needs one edit.
A row type declared as a dataclass (RequestRecord, PhaseRow, FaultRow) *is* the schema: its fields
give the names and their annotations the types.

Types (how a CSV cell is read back):
    FLOAT  a number that may be empty (NaN when empty); `int | None` fields are FLOAT too
    INT    a whole number, never empty (0 when a cell is missing)
    STR    text ("" when empty)
"""

from __future__ import annotations

import dataclasses
from dataclasses import astuple, dataclass

from loadline.core.records import RequestRecord

FLOAT, INT, STR = "float", "int", "str"
Schema = dict[str, str]  # column name -> FLOAT | INT | STR, in file order

_ANNOTATION_KINDS = {"float": FLOAT, "float | None": FLOAT, "int | None": FLOAT, "int": INT, "str": STR}


def schema_of(row_type: type) -> Schema:
    """The schema of a dataclass row type; TypeError (at import) for a field of an undeclared type."""
    schema: Schema = {}
    for f in dataclasses.fields(row_type):
        annotation = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        if annotation not in _ANNOTATION_KINDS:
            raise TypeError(
                f"{row_type.__name__}.{f.name}: type {annotation!r} has no CSV kind in loadline.core.schema"
            )
        schema[f.name] = _ANNOTATION_KINDS[annotation]
    return schema


def _csv_cell(value: object) -> object:
    return "" if value is None else (round(value, 3) if isinstance(value, float) else value)


@dataclass
class PhaseRow:
    """One row of phases.csv, written by the phase timeline (loadline/runtime/timeline.py) on the master."""

    index: int  # 0-based order
    label: str  # e.g. "baseline", "step-3 (40 users)", "burst-2", "soak-window-5"
    kind: str  # baseline | step | ramp | burst | recover | hold | soak-window | stage
    start_wall: float  # time.time() on the master
    end_wall: float | None
    target_users: int
    spawn_rate: float
    users_start: int  # users actually running when the phase began (Locust runner.user_count)
    users_end: int | None  # users actually running when the phase ended
    note: str = ""  # human-readable only: e.g. the stop rule's reason; machine-read facts have tables
    target_rate: float | None = None  # rate shapes: the arrival rate offered (model requests/s); empty otherwise
    # Phases the stop rule judges: the end of the window it judged, --step-settle before the phase's end.
    # Requests started later ran into the next phase's load; the report's row leaves them out as the rule
    # did (analysis/stats/phases.py). Empty: the whole phase is its window.
    judged_until_wall: float | None = None

    def as_csv(self) -> tuple[object, ...]:
        return tuple(_csv_cell(v) for v in astuple(self))


@dataclass(frozen=True)
class FaultRow:
    """One row of faults.csv: a drill's fault action and its outcome (shapes/drill.py, on the master)."""

    ts: float  # time.time() when the action was sent (or skipped)
    phase_index: int  # the phase (phases.csv `index`) whose stage carried the action
    phase: str  # that phase's label
    method: str  # "POST"
    path: str  # e.g. "/admin/replicas/0/kill"
    body: str  # JSON text sent
    outcome: str  # FAULT_OK | FAULT_FAILED | FAULT_SKIPPED
    detail: str = ""  # why it failed or was skipped

    def as_csv(self) -> tuple[object, ...]:
        return tuple(_csv_cell(v) for v in astuple(self))


FAULT_OK, FAULT_FAILED, FAULT_SKIPPED = "ok", "failed", "skipped"

REQUESTS: Schema = schema_of(RequestRecord)
PHASES: Schema = schema_of(PhaseRow)
FAULTS: Schema = schema_of(FaultRow)
SERVER_METRICS: Schema = {"ts": FLOAT, "source": STR, "metric": STR, "labels": STR, "value": FLOAT}  # labels: JSON
# cpu_wait_percent: the share of the interval the worker was ready to run but waited for a core (Linux
# schedstat; empty elsewhere): with cpu_percent, its demand for the core (loadline/core/saturation.py).
# watch_resting: 1 while the first-bytes watch rested over its budget (loadline/client/watch_budget.py:
# first tokens read late then take a later token's stamp), 0 while it watched, empty without one
# (LOADLINE_FIRST_BYTES_WATCH=0, no plain-HTTP reply read yet, off Linux, folders from before it)
GENERATOR: Schema = {
    "ts": FLOAT,
    "worker_id": STR,
    "cpu_percent": FLOAT,
    "loop_lag_ms": FLOAT,
    "users": FLOAT,
    "inflight": FLOAT,
    "cpu_wait_percent": FLOAT,
    "watch_resting": FLOAT,
}


def columns(schema: Schema, kind: str | None = None) -> tuple[str, ...]:
    """The schema's column names in file order (only those of `kind` when given)."""
    return tuple(name for name, k in schema.items() if kind is None or k == kind)
