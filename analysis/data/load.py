"""Read a run folder (or a folder of plain `locust --csv` exports) into one `RunData`.

Tolerant by design: the requests table is appended live, so a truncated last line is dropped
silently; every other missing or unreadable file is listed in `RunData.missing` so the report can
say what it could not judge. Only "nothing usable at all" raises `UsageError` (exit 2).
"""

from __future__ import annotations

import io
import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from loadline.analysis.data import memory, requests_csv, spill
from loadline.analysis.data.gaps import ITL_COLUMN, GapColumn
from loadline.analysis.data.lines import last_newline_end
from loadline.core import runfolder, schema
from loadline.core.errors import UsageError
from loadline.core.records import COLUMNS

# Column types are loadline/core/schema.py's; only the storage is decided here.
_FLOAT_COLUMNS = schema.columns(schema.REQUESTS, schema.FLOAT)
_INT_COLUMNS = schema.columns(schema.REQUESTS, schema.INT)
# Text with few distinct values: categories keep a 1M-row table small; unique-per-row texts stay objects.
_UNIQUE_TEXT = ("request_id", "itl_us")
_CATEGORY_COLUMNS = tuple(c for c in schema.columns(schema.REQUESTS, schema.STR) if c not in _UNIQUE_TEXT)
WHOLE_RUN = "whole-run"


@dataclass
class RunData:
    path: Path
    manifest: dict
    requests: pd.DataFrame  # COLUMNS + end_wall, one row per HTTP attempt
    phases: pd.DataFrame  # schema.PHASES; one "whole-run" row when phases.csv is absent
    server_metrics: pd.DataFrame  # schema.SERVER_METRICS
    generator: pd.DataFrame  # schema.GENERATOR
    locust_stats: pd.DataFrame | None
    missing: list[str] = field(default_factory=list)
    locust_history: pd.DataFrame | None = None
    faults: pd.DataFrame = field(default_factory=lambda: empty_table(schema.FAULTS))  # FAULT_COLUMNS; drills only
    # One wall-clock second in this run's times: 1 as read, the time scale in the model-time view
    # (loadline.analysis.data.timescale.model_run). For the generator's own wall-clock facts, e.g. a tick.
    wall_second: float = 1.0
    # The inter-token gaps of `requests`' rows, streamed when a figure needs them (analysis/data/gaps.py);
    # None: they are `requests["itl_us"]` (a table built in memory). Read them through `gap_column`.
    gaps: GapColumn | None = None

    @property
    def has_records(self) -> bool:
        return not self.requests.empty


def gap_column(run: RunData) -> GapColumn:
    """The run's inter-token gaps, aligned with `run.requests`' rows."""
    if run.gaps is not None:
        return run.gaps
    if ITL_COLUMN in run.requests.columns:
        return GapColumn.in_memory(run.requests[ITL_COLUMN])
    return GapColumn.in_memory(np.full(len(run.requests), "", dtype=object))


class _UpToLastNewline(io.RawIOBase):
    """A read-only view of a file that ends at its last newline (drops a half-written last line)."""

    def __init__(self, path: Path):
        self._file = open(path, "rb")  # noqa: SIM115 - owned by this reader, closed in close()
        size = self._file.seek(0, io.SEEK_END)
        self.limit = last_newline_end(self._file, size)  # bytes readable: up to the last complete line
        self._file.seek(0)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        left = self.limit - self._file.tell()
        if left <= 0:
            return 0
        view = memoryview(buffer)[: min(len(buffer), left)]
        return self._file.readinto(view)

    def close(self) -> None:
        self._file.close()
        super().close()


def open_up_to_last_newline(path: Path) -> io.BufferedReader:
    """The file as a buffered reader that ends at its last complete line."""
    return io.BufferedReader(_UpToLastNewline(path), buffer_size=1 << 20)


def read_csv_tolerant(path: Path, **kwargs) -> pd.DataFrame:
    """Read a CSV that may be being appended to: ignore a truncated last line, one-line errors."""
    try:
        raw = _UpToLastNewline(path)
        if raw.limit == 0 and path.stat().st_size > 0:
            raw.close()
            raise UsageError(
                f"{path} has no complete line ({path.stat().st_size} bytes): not a CSV, or still being written"
            )
        with io.BufferedReader(raw, buffer_size=1 << 20) as handle:
            return pd.read_csv(handle, **kwargs)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"{path} is not a readable CSV: {reason}") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None


def _read_requests(path: Path, missing: list[str]) -> tuple[pd.DataFrame, GapColumn]:
    """The table without `itl_us`, and its gaps: streamed by pyarrow, or by the tolerant pandas reader
    when pyarrow refuses the file (garbage rows to skip and count, an empty or foreign file)."""
    try:
        if path.stat().st_size > 0:
            ids = (path.parent / runfolder.TRUTH).exists()  # request ids join the truth log, and nothing else
            spill_to = spill.spill_directory(path.parent)  # a table larger than memory: on disk beside the run
            streamed = requests_csv.read_streamed(path, open_up_to_last_newline, ids, spill_to)
            frame, gaps = _checked_requests(path, streamed.frame, missing)
            return frame, _aligned(streamed.gaps, frame)
    except requests_csv.Refused:
        pass
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    frame = _read_requests_pandas(path, missing)
    gaps = GapColumn.in_memory(frame.pop(ITL_COLUMN).to_numpy() if ITL_COLUMN in frame.columns else [])
    return frame.reset_index(drop=True), gaps


def _aligned(gaps: GapColumn, frame: pd.DataFrame) -> GapColumn:
    """The gap column for the rows the checks kept (their source rows are the frame's index)."""
    rows = frame.attrs.pop("source_rows", None)
    return gaps if rows is None else GapColumn(gaps.batches_of_source, gaps.source_rows, rows, gaps.scale)


def _checked_requests(path: Path, frame: pd.DataFrame, missing: list[str]) -> tuple[pd.DataFrame, None]:
    """The streamed table's checks, as the pandas path makes them."""
    if frame.empty and not len(frame.columns):
        return _empty_requests().drop(columns=[ITL_COLUMN]), None
    absent = [c for c in ("start_wall", "status", "e2e_ms") if c not in frame.columns]
    if absent:
        raise UsageError(f"{path} lacks the column(s) {', '.join(absent)}: not a loadline requests table")
    if frame.empty:
        return _empty_requests().drop(columns=[ITL_COLUMN]), None
    for name in COLUMNS:
        if name not in frame.columns and name not in requests_csv.UNREAD | {ITL_COLUMN, requests_csv.UNIQUE_TEXT}:
            frame[name] = np.nan if name in _FLOAT_COLUMNS else ""
    broken = frame["start_wall"].isna().to_numpy()
    if broken.any():
        missing.append(f"{path.name}: {int(broken.sum())} malformed row(s) without start_wall skipped")
        kept = np.flatnonzero(~broken)
        frame = frame.iloc[kept].reset_index(drop=True)
        frame.attrs["source_rows"] = kept
    spilled_to = frame.attrs.pop("spilled_to", None)
    if spilled_to is None:
        frame["end_wall"] = _end_wall(frame)
    else:  # on disk like the rest of the table, a chunk at a time
        frame["end_wall"] = pd.Series(
            spill.derived(spilled_to, len(frame), lambda start, stop: _end_wall(frame.iloc[start:stop]).to_numpy()),
            copy=False,
        )
    return frame, None


def _end_wall(frame: pd.DataFrame) -> pd.Series:
    return frame["start_wall"] + frame["e2e_ms"].fillna(0.0).astype("float64") / 1000.0


def _read_requests_pandas(path: Path, missing: list[str]) -> pd.DataFrame:
    dtypes = {c: "float64" for c in _FLOAT_COLUMNS}
    dtypes.update({c: "category" for c in _CATEGORY_COLUMNS})
    dtypes.update({c: "object" for c in _UNIQUE_TEXT})
    try:  # the fast path: a clean table parses straight into its types
        frame = read_csv_tolerant(
            path, dtype=dtypes, keep_default_na=False, na_values={c: [""] for c in _FLOAT_COLUMNS}
        )
    except UsageError:  # one garbage row must not cost the whole run: skip it, count it
        frame, garbage = _read_requests_skipping_garbage(path)
        if garbage:
            missing.append(
                f"{path.name}: {garbage} garbage row(s) skipped (wrong number of fields, a non-number "
                f"where a number belongs, or bytes that are not UTF-8)"
            )
    if frame.empty and not len(frame.columns):
        return _empty_requests()
    absent = [c for c in ("start_wall", "status", "e2e_ms") if c not in frame.columns]
    if absent:
        raise UsageError(f"{path} lacks the column(s) {', '.join(absent)}: not a loadline requests table")
    if frame.empty:
        return _empty_requests()
    for name in COLUMNS:
        if name not in frame.columns:
            frame[name] = np.nan if name in _FLOAT_COLUMNS else ""
    for name in _INT_COLUMNS:
        frame[name] = pd.to_numeric(frame[name], errors="coerce").fillna(0).astype("int64")
    frame["itl_us"] = frame["itl_us"].fillna("").astype("object")
    broken = int(frame["start_wall"].isna().sum())
    if broken:
        missing.append(f"{path.name}: {broken} malformed row(s) without start_wall skipped")
    frame = frame[frame["start_wall"].notna()]
    frame["end_wall"] = frame["start_wall"] + frame["e2e_ms"].fillna(0.0) / 1000.0
    return frame.reset_index(drop=True)


def _read_requests_skipping_garbage(path: Path) -> tuple[pd.DataFrame, int]:
    """The slow path: every cell read as text, rows with the wrong number of fields skipped (Locust's
    and pandas' own count, from its warnings), then rows whose number columns hold a non-number dropped.
    Returns (table with numeric number columns, rows skipped)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", pd.errors.ParserWarning)
        frame = read_csv_tolerant(
            path, dtype=str, keep_default_na=False, on_bad_lines="warn", encoding_errors="replace"
        )
    skipped = sum(
        str(w.message).count("Skipping line") for w in caught if issubclass(w.category, pd.errors.ParserWarning)
    )
    if frame.empty:
        return frame, skipped
    bad = pd.Series(False, index=frame.index)
    for name in _FLOAT_COLUMNS:
        if name in frame.columns:
            text = frame[name].fillna("").astype(str).str.strip()
            number = pd.to_numeric(text.where(text != ""), errors="coerce")
            bad |= number.isna() & (text != "")
            frame[name] = number
    # U+FFFD: a byte that was not UTF-8 (encoding_errors="replace"); a record never holds one
    text_columns = [c for c in frame.columns if c not in _FLOAT_COLUMNS]
    bad |= frame[text_columns].apply(lambda col: col.astype(str).str.contains("\ufffd", regex=False)).any(axis=1)
    frame = frame[~bad].copy()
    for name in _CATEGORY_COLUMNS:
        if name in frame.columns:
            frame[name] = frame[name].astype("category")
    return frame, skipped + int(bad.sum())


def _empty_requests() -> pd.DataFrame:
    frame = pd.DataFrame({name: pd.Series(dtype="float64" if name in _FLOAT_COLUMNS else "object") for name in COLUMNS})
    frame["end_wall"] = pd.Series(dtype="float64")
    return frame


def empty_table(table: schema.Schema) -> pd.DataFrame:
    """A table with the schema's columns and no rows."""
    return pd.DataFrame(
        {c: pd.Series(dtype="object" if kind == schema.STR else "float64") for c, kind in table.items()}
    )


def _read_table(path: Path, table: schema.Schema, missing: list[str], absent_is_missing: bool = True) -> pd.DataFrame:
    """A small run-folder table, its schema's columns: numbers numeric (NaN if empty/malformed), text str."""
    if not path.exists():
        if absent_is_missing:
            missing.append(f"{path.name} (absent)")
        return empty_table(table)
    try:
        frame = read_csv_tolerant(
            path,
            dtype={c: "object" for c, kind in table.items() if kind == schema.STR},
            keep_default_na=False,
            na_values={c: [""] for c, k in table.items() if k != schema.STR},
        )
    except UsageError as exc:
        missing.append(f"{path.name} (unreadable: {exc})")
        return empty_table(table)
    if frame.empty and not len(frame.columns):
        return empty_table(table)
    for name, kind in table.items():
        if name not in frame.columns:
            frame[name] = "" if kind == schema.STR else np.nan
        elif kind == schema.STR:
            frame[name] = frame[name].astype(object).fillna("")
        else:
            frame[name] = pd.to_numeric(frame[name], errors="coerce")
    return frame


def _whole_run_phase(requests: pd.DataFrame) -> pd.DataFrame:
    # an open-loop run began when its first arrival was due, not when a late one was sent (rates)
    due = requests["due_wall"].min() if "due_wall" in requests.columns else np.nan
    start = float(np.fmin(requests["start_wall"].min(), due)) if len(requests) else np.nan
    end = float(requests["end_wall"].max()) if len(requests) else np.nan
    row: dict[str, object] = {c: np.nan for c in runfolder.PHASE_COLUMNS}
    row.update(index=0, label=WHOLE_RUN, kind=WHOLE_RUN, start_wall=start, end_wall=end, note="")
    return pd.DataFrame([row], columns=list(runfolder.PHASE_COLUMNS))


def _read_phases(
    path: Path, requests: pd.DataFrame, missing: list[str], finished: bool = True, shaped: bool = True
) -> pd.DataFrame:
    """`shaped`: a shape ran, so phases.csv should exist; without one the whole run is the one phase."""
    phases = _read_table(path / runfolder.PHASES, schema.PHASES, missing, absent_is_missing=shaped)
    phases = phases.dropna(subset=["start_wall"]) if len(phases) else phases
    if phases.empty:
        if (path / runfolder.PHASES).exists():
            missing.append(f"{runfolder.PHASES} (no rows)")
        return _whole_run_phase(requests)
    phases = phases.sort_values("start_wall").reset_index(drop=True)
    # An unfinished last phase (run killed) ends at the last record's end.
    if len(requests) and pd.isna(phases["end_wall"].iloc[-1]):
        phases.loc[phases.index[-1], "end_wall"] = float(requests["end_wall"].max())
    # The timeline writes a phase when it ends: after a master crash the running phase is absent and
    # its records would fall outside every phase. Give them a phase of their own.
    last_end = float(phases["end_wall"].iloc[-1]) if pd.notna(phases["end_wall"].iloc[-1]) else None
    if not finished and len(requests) and last_end is not None and float(requests["start_wall"].max()) >= last_end:
        tail: dict[str, object] = {name: None for name in runfolder.PHASE_COLUMNS}
        tail.update(
            index=len(phases),
            label="unfinished (the run ended without closing this phase)",
            kind="unfinished",
            start_wall=last_end,
            end_wall=float(requests["end_wall"].max()),
            note="phase row reconstructed from the records",
        )
        phases = pd.concat([phases, pd.DataFrame([tail])], ignore_index=True)
        missing.append(f"{runfolder.PHASES} (the last phase was never closed; its records form an 'unfinished' phase)")
    # Missing ends elsewhere: a phase ends where the next begins.
    next_start = phases["start_wall"].shift(-1)
    phases["end_wall"] = phases["end_wall"].fillna(next_start)
    for name in ("label", "kind", "note"):
        phases[name] = phases[name].astype(object).fillna("").astype(str)
    return phases


def _find_locust_csv(path: Path, suffix: str) -> Path | None:
    preferred = path / f"{runfolder.LOCUST_CSV_PREFIX}{suffix}"
    if preferred.exists():
        return preferred
    found = sorted(p for p in path.glob(f"*{suffix}") if p.is_file())
    return found[0] if found else None


def _read_locust(path: Path, missing: list[str]) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    tables: list[pd.DataFrame | None] = []
    for suffix in ("_stats.csv", "_stats_history.csv"):
        file = _find_locust_csv(path, suffix)
        table = None
        if file is not None:
            try:
                table = read_csv_tolerant(file)
            except UsageError as exc:
                missing.append(f"{file.name} (unreadable: {exc})")
            if table is not None and table.empty:
                table = None
        tables.append(table)
    return tables[0], tables[1]


def _read_manifest(path: Path, missing: list[str]) -> dict:
    file = path / runfolder.MANIFEST
    if not file.exists():
        missing.append(f"{runfolder.MANIFEST} (absent)")
        return {}
    try:
        data = json.loads(file.read_text())
    except (ValueError, OSError) as exc:
        missing.append(f"{runfolder.MANIFEST} (unreadable: {exc})")
        return {}
    return data if isinstance(data, dict) else {}


def load_run(path: str | Path) -> RunData:
    """Load everything analysis needs from a run folder; raise UsageError when nothing is usable."""
    root = Path(path)
    if not root.exists():
        raise UsageError(f"run folder not found: {root}")
    if not root.is_dir():
        raise UsageError(f"not a folder: {root}")
    missing: list[str] = []
    manifest = _read_manifest(root, missing)
    requests_file = root / runfolder.REQUESTS
    gaps = None
    if requests_file.exists():
        memory.reuse_freed_memory()
        requests, gaps = _read_requests(requests_file, missing)
        memory.return_freed_memory()  # the reader's blocks and the columns' pieces
    else:
        missing.append(f"{runfolder.REQUESTS} (absent: no per-request records, so no TTFT/ITL/TPOT, knee or goodput)")
        requests = _empty_requests()
    locust_stats, locust_history = _read_locust(root, missing)
    if requests.empty and locust_stats is None:
        if requests_file.exists():
            raise UsageError(f"empty run: {requests_file} has no request rows")
        raise UsageError(f"{root} holds neither {runfolder.REQUESTS} nor Locust *_stats.csv: nothing to analyse")
    phases = _read_phases(
        root, requests, missing, finished=manifest.get("status") == "finished", shaped=bool(manifest.get("shape"))
    )
    server = _read_table(root / runfolder.SERVER_METRICS, schema.SERVER_METRICS, missing)
    generator = _read_table(root / runfolder.GENERATOR_METRICS, schema.GENERATOR, missing)
    # only drills write faults.csv: its absence is normal, not a gap in the run folder
    faults = _read_table(root / runfolder.FAULTS, schema.FAULTS, missing, absent_is_missing=False)
    return RunData(
        root, manifest, requests, phases, server, generator, locust_stats, missing, locust_history, faults, gaps=gaps
    )
