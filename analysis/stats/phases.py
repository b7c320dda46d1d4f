"""Per-phase statistics from the request records: counts, rates and latency percentiles.

Definitions (the report repeats them):
- A record belongs to the phase during which it *started* (`start_wall` in [start, end)). A phase the
  stepped stop rule judged is described by its judged window (`judged_until_wall`, --step-settle
  before its end), as the rule judged it live: requests started later ran into the next phase's load
  and are counted in `after_window`, not in its figures (`judged_phases`).
- ok / errors / cancelled follow `status`; cancelled attempts (the test stopped or ramped down
  mid-stream) count as neither, so error_rate = errors / (ok + errors). Nor do `invalid_request`
  errors (the server refused the request itself, e.g. a prompt over its context): they are the
  tool's, not the service's, so no knee, break point or safe point rests on them; "Is this run
  valid?" counts them (analysis/verdict/validity.py).
- rps = ok requests per second of phase duration; output_tokens_per_s = output tokens of ok
  requests per second; goodput_rps = ok requests per second that met every per-request latency
  threshold of the SLO (see `goodput_thresholds`).
- Latency percentiles are over ok requests that started before the phase's first cancelled request
  (see `uncensored`: after it, only fast requests could finish before the stop), computed from raw
  samples with numpy's default
  linear interpolation (Hyndman-Fan type 7). ITL is pooled per gap: every inter-chunk gap of every
  ok request in the phase is one sample (not a mean of per-request means).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from loadline.analysis.data.gaps import GapHistogram, parse_gaps
from loadline.analysis.data.load import RunData, gap_column
from loadline.analysis.stats import token_kinds
from loadline.core.judge import applicability
from loadline.core.records import ErrorClass, Status
from loadline.core.runsettings import streaming_of
from loadline.core.slo import SLO

INVALID_REQUEST = ErrorClass.INVALID_REQUEST.value  # the tool's own refused requests: not judged here

METRICS = ("e2e", "ttft", "tpot", "itl")
PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0), ("max", 100.0))
PHASE_TABLE_COLUMNS = [
    "phase_index",
    "label",
    "kind",
    "start_wall",
    "end_wall",
    "target_users",
    "users",
    "target_rate",
    "requests",
    "after_window",
    "ok",
    "errors",
    "cancelled",
    "error_rate",
    "rps",
    "output_tokens_per_s",
    "goodput_rps",
] + [f"{m}_{p}_ms" for m in METRICS for p, _ in PERCENTILES]


def pooled_itl_us(itl_us: pd.Series | np.ndarray) -> np.ndarray:
    """Every gap of every request as one int32 array (microseconds), parsed by numpy in C, chunked."""
    return parse_gaps(itl_us)


def pooled_itl_ms(itl_us: pd.Series | np.ndarray) -> np.ndarray:
    return pooled_itl_us(itl_us) / 1000.0


def percentiles(samples: np.ndarray | GapHistogram) -> dict[str, float]:
    """numpy's default (linear) percentiles of the samples; of a histogram's gaps, the same, exactly."""
    if isinstance(samples, GapHistogram):
        values = samples.percentiles(tuple(q for _, q in PERCENTILES))
        return {name: float(v) for (name, _), v in zip(PERCENTILES, values)}
    samples = np.asarray(samples)
    samples = samples[~np.isnan(samples)] if samples.dtype.kind == "f" else samples
    if samples.size == 0:
        return {name: float("nan") for name, _ in PERCENTILES}
    values = np.percentile(samples, [q for _, q in PERCENTILES])
    return {name: float(v) for (name, _), v in zip(PERCENTILES, values)}


def goodput_thresholds(slo: SLO, streaming: bool | None = None) -> dict[str, float]:
    """Per-request latency limits: the tightest percentile threshold the SLO sets for each metric
    among the criteria that apply to this traffic (loadline/core/judge.py; ITL is per gap, not per request)."""
    applies, _ = applicability(slo, streaming)
    limits: dict[str, list[float]] = {}
    for key in applies:
        column = key.split("_")[0] + "_ms"  # "ttft_p95_ms" -> "ttft_ms"
        if column != "itl_ms":
            limits.setdefault(column, []).append(float(getattr(slo, key)))
    return {column: min(values) for column, values in limits.items()}


def assign_phases(run: RunData) -> np.ndarray:
    """Position (0..n-1 in run.phases) of the phase each record started in, -1 when in none."""
    starts = run.phases["start_wall"].to_numpy(dtype=float)
    ends = run.phases["end_wall"].to_numpy(dtype=float)
    ends = np.where(np.isnan(ends), np.inf, ends)
    wall = run.requests["start_wall"].to_numpy(dtype=float)
    pos = np.searchsorted(starts, wall, side="right") - 1
    inside = (pos >= 0) & (wall < ends[np.clip(pos, 0, None)])
    return np.where(inside, pos, -1).astype(np.int32)  # 4 bytes a row: held through the gaps' pass


def judged_until(phase: pd.Series) -> float:
    """The end of the phase's judged window: its `judged_until_wall` (the stop rule's window, written by the
    shape), else its end."""
    value = phase.get("judged_until_wall")
    return float(value) if value is not None and pd.notna(value) else float(phase["end_wall"])


def in_judged_windows(run: RunData, where: np.ndarray) -> np.ndarray:
    """`where` with -1 for the records that started after their phase's judged window."""
    until = np.array([judged_until(phase) for _, phase in run.phases.iterrows()], dtype=float)
    if not len(until) or np.all(until >= run.phases["end_wall"].to_numpy(dtype=float)):
        return where
    starts = run.requests["start_wall"].to_numpy(dtype=float)
    placed = where >= 0
    after = np.zeros(len(where), dtype=bool)
    after[placed] = starts[placed] >= until[where[placed]]
    return np.where(after, -1, where)


def judged_phases(run: RunData) -> np.ndarray:
    """Position of the phase whose judged window each record started in, -1 when in none."""
    return in_judged_windows(run, assign_phases(run))


def _users(phase: pd.Series) -> float:
    for name in ("users_end", "users_start", "target_users"):
        value = phase.get(name)
        if value is not None and pd.notna(value):
            return float(value)
    return float("nan")


CUT_TOLERANCE_S = 0.5  # wall seconds: a stop reaches streams within a tick of the phase's recorded end


def uncensored(rows: pd.DataFrame, phase_end: float, tolerance_s: float = CUT_TOLERANCE_S) -> pd.Series:
    """Rows that started before the first request cut short when the phase (or the test) ended.

    Every request that started earlier had finished by then; of those that started later only the
    fast ones could finish, so their latencies would flatter the phase (survivorship bias). Only
    cancellations at the phase's end count: a user stopped mid-phase by a ramp-down is a random
    pick, and the others' requests go on unbiased. `tolerance_s`: how far before the end that is, in
    the rows' time.
    """
    cut = rows[(rows["status"] == Status.CANCELLED) & (rows["end_wall"] >= phase_end - tolerance_s)]
    if cut.empty:
        return pd.Series(True, index=rows.index)
    return rows["start_wall"] < cut["start_wall"].min()


ITL_HISTOGRAM = "itl_histogram"  # phase_table's attrs: the gaps of every phase's latency rows, exactly
_TIMED_COLUMNS = ("status", "start_wall", "end_wall", "e2e_ms", "ttft_ms", "tpot_ms")


def _timed_rows(run: RunData, position: int, where: np.ndarray) -> tuple[np.ndarray, pd.DataFrame]:
    """The ok, uncensored requests of one phase (the rows its latency percentiles are over): their
    positions in run.requests, and those rows' status, times and latencies."""
    inside = np.flatnonzero(where == position)
    rows = run.requests[list(_TIMED_COLUMNS)].iloc[inside]  # the columns first: not a whole-width copy
    cut_tolerance = CUT_TOLERANCE_S * run.wall_second  # the tick is the generator's, on its wall clock
    keep = (
        uncensored(rows, float(run.phases.iloc[position]["end_wall"]), cut_tolerance) & (rows["status"] == Status.OK)
    ).to_numpy()
    return inside[keep], rows[keep]


def _scalar_samples(rows: pd.DataFrame) -> dict[str, np.ndarray]:
    return {m: rows[f"{m}_ms"].dropna().to_numpy(dtype=float) for m in ("e2e", "ttft", "tpot")}


def phase_samples(run: RunData, position: int, where: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Raw latency samples of the ok, uncensored requests of one phase: e2e/ttft/tpot in ms, itl in int us
    (every gap materialised: for comparing two runs' phases, not for the phase table of a large run)."""
    where = judged_phases(run) if where is None else where
    positions, rows = _timed_rows(run, position, where)
    samples = _scalar_samples(rows)
    mask = np.zeros(len(run.requests), dtype=bool)
    mask[positions] = True
    samples["itl"] = gap_column(run).pooled(mask)  # int32 us: a quarter of the memory of float64 ms
    return samples


def _timed_samples(run: RunData, where: np.ndarray) -> list[dict[str, dict[str, float] | GapHistogram]]:
    """Every phase's latency percentiles (computed phase by phase: the samples are not kept) and its
    gaps as an exact histogram, all phases' in one streamed pass."""
    keys = np.full(len(run.requests), -1, dtype=np.int32)
    samples: list[dict[str, dict[str, float] | GapHistogram]] = []
    for position in range(len(run.phases)):
        positions, rows = _timed_rows(run, position, where)
        keys[positions] = position
        samples.append({metric: percentiles(values) for metric, values in _scalar_samples(rows).items()})
    itl = gap_column(run).histograms(keys)
    for position, phase in enumerate(samples):
        phase["itl"] = itl.get(position, GapHistogram())
    return samples


def _target_rate(phase: pd.Series) -> float:
    """The arrival rate a rate shape offered in this phase (model requests/s); NaN for user phases."""
    value = phase.get("target_rate")
    return float(value) if value is not None and pd.notna(value) else float("nan")


def _phase_row(
    run: RunData, position: int, where: np.ndarray, slo: SLO, samples: dict[str, dict[str, float] | GapHistogram]
) -> dict:
    phase = run.phases.iloc[position]
    limits = goodput_thresholds(slo, streaming_of(run.manifest))
    needed = ["status", "error_class", "output_tokens", *limits]  # not a whole-width copy of the phase
    rows = run.requests.loc[where == position, [c for c in dict.fromkeys(needed) if c in run.requests.columns]]
    status = rows["status"]
    ok_rows = rows[(status == Status.OK).to_numpy()]
    invalid = rows["error_class"] == INVALID_REQUEST
    ok, cancelled = len(ok_rows), int((status == Status.CANCELLED).sum())
    errors = int(((status == Status.ERROR) & ~invalid).sum())
    duration = judged_until(phase) - float(phase["start_wall"])
    per_s = (lambda n: n / duration) if duration > 0 else (lambda n: float("nan"))
    meets = np.ones(len(ok_rows), dtype=bool)
    for column, limit in limits.items():
        values = ok_rows[column].to_numpy(dtype=float)
        meets &= ~(values > limit)  # a missing value (no TPOT for 1 token) is no miss
    row = {
        "phase_index": int(phase["index"]) if pd.notna(phase["index"]) else position,
        "label": phase["label"],
        "kind": phase["kind"],
        "start_wall": float(phase["start_wall"]),
        "end_wall": float(phase["end_wall"]),
        "target_users": float(phase["target_users"]) if pd.notna(phase["target_users"]) else float("nan"),
        "users": _users(phase),
        "target_rate": _target_rate(phase),
        "requests": len(rows),
        "ok": ok,
        "errors": errors,
        "cancelled": cancelled,
        "error_rate": errors / (ok + errors) if ok + errors else float("nan"),
        "rps": per_s(ok),
        "output_tokens_per_s": per_s(float(ok_rows["output_tokens"].sum())),
        "goodput_rps": per_s(int(meets.sum())),
    }
    for metric in METRICS:
        per_ms = 1000.0 if metric == "itl" else 1.0  # itl samples are integer microseconds
        values = samples[metric]
        for name, value in (values if isinstance(values, dict) else percentiles(values)).items():
            row[f"{metric}_{name}_ms"] = value / per_ms
    return row


def phase_table(run: RunData, slo: SLO | None = None) -> pd.DataFrame:
    """One row per phase with exactly PHASE_TABLE_COLUMNS (docs/architecture.md), in the run's time:
    model time for a run read through loadline.analysis.data.timescale.model_run, as the SLO's limits
    (and so goodput) are."""
    slo = slo or SLO()
    if not run.has_records:
        return locust_phase_table(run)
    started_in = assign_phases(run)
    where = in_judged_windows(run, started_in)
    samples = _timed_samples(run, where)
    rows = [_phase_row(run, position, where, slo, samples[position]) for position in range(len(run.phases))]
    extra = token_kinds.which(run.requests, slo)
    for position, row in enumerate(rows):
        row["after_window"] = int((started_in == position).sum()) - row["requests"]
        row.update(_token_kind_values(run, position, where, extra) if extra else {})
    table = pd.DataFrame(rows, columns=PHASE_TABLE_COLUMNS + list(extra))
    pooled = GapHistogram()
    for phase in samples:
        pooled.merge(phase["itl"])  # type: ignore[arg-type]
    table.attrs[ITL_HISTOGRAM] = pooled  # every phase's gaps, for the ITL chart (no second pass over them)
    return table


def _token_kind_values(run: RunData, position: int, where: np.ndarray, columns: tuple[str, ...]) -> dict[str, float]:
    """The phase's reasoning / tool-call / cache columns (analysis/stats/token_kinds.py), over the
    same rows as its other figures: ok rows, and for latencies the uncensored ones."""
    read = [c for c in ("status", "start_wall", "end_wall", *token_kinds.READ) if c in run.requests.columns]
    rows = run.requests.loc[where == position, read]  # the columns read, not a whole-width copy
    is_ok = rows["status"] == Status.OK
    timed = rows[uncensored(rows, float(run.phases.iloc[position]["end_wall"])) & is_ok]
    return token_kinds.phase_values(rows[is_ok], timed, columns)


def error_classes(run: RunData) -> pd.DataFrame:
    """Errors per phase and class: columns phase_index, label, <class>... (counts)."""
    table = phase_table_skeleton(run)
    if not run.has_records:
        return table
    where = assign_phases(run)
    errors = run.requests.loc[(run.requests["status"] == Status.ERROR).to_numpy() & (where >= 0), ["error_class"]]
    if errors.empty:
        return table
    counts = pd.crosstab(where[errors.index.to_numpy()], errors["error_class"].astype(str).replace("", "unknown"))
    for name in counts.columns:
        table[name] = [int(counts[name].get(pos, 0)) for pos in range(len(table))]
    return table


def phase_table_skeleton(run: RunData) -> pd.DataFrame:
    return pd.DataFrame({"phase_index": range(len(run.phases)), "label": run.phases["label"].to_list()})


def locust_phase_table(run: RunData) -> pd.DataFrame:
    """Degraded table from a plain `locust --csv` stats file: one whole-run row with Locust's bucketed,
    integer-rounded percentiles. Rows named after TTFT/TPOT/ITL (extra events some plugins fire) are
    kept out of the request counts; TTFT percentiles come from such a row when present."""
    stats = run.locust_stats
    row: dict[str, object] = {c: float("nan") for c in PHASE_TABLE_COLUMNS}
    row.update(phase_index=0, label="whole-run (locust csv)", kind="whole-run")
    if stats is None or "Name" not in stats.columns:
        return pd.DataFrame([row], columns=PHASE_TABLE_COLUMNS)
    names = stats["Name"].astype(str)
    extra_metric = names.str.contains("TTFT|TPOT|ITL", case=False) | stats.get("Type", names).astype(str).str.contains(
        "TTFT|TPOT|ITL", case=False
    )
    requests_rows = stats[~extra_metric & (names != "Aggregated")]
    total = stats[names == "Aggregated"]
    counted = requests_rows if len(requests_rows) else total

    def number(column: str) -> float:
        return float(pd.to_numeric(counted[column], errors="coerce").sum()) if column in counted else 0.0

    requests, failures = number("Request Count"), number("Failure Count")
    row.update(
        requests=requests,
        errors=failures,
        ok=requests - failures,
        cancelled=0,
        error_rate=failures / requests if requests else np.nan,
        rps=number("Requests/s") - number("Failures/s"),
    )
    # percentiles cannot be merged across rows: one request row, else Locust's Aggregated row
    source = requests_rows.iloc[0] if len(requests_rows) == 1 else (total.iloc[0] if len(total) else None)
    if source is not None:
        _fill_locust_percentiles(row, "e2e", source)
    ttft = stats[names.str.contains("TTFT", case=False)]
    if len(ttft):
        _fill_locust_percentiles(row, "ttft", ttft.iloc[0])
    history = run.locust_history
    if history is not None and "User Count" in history:
        row["users"] = float(pd.to_numeric(history["User Count"], errors="coerce").max())
    return pd.DataFrame([row], columns=PHASE_TABLE_COLUMNS)


def _fill_locust_percentiles(row: dict, metric: str, source: pd.Series) -> None:
    for name, column in (("p50", "50%"), ("p90", "90%"), ("p95", "95%"), ("p99", "99%"), ("max", "Max Response Time")):
        value = source.get(column)
        row[f"{metric}_{name}_ms"] = float(value) if value is not None and pd.notna(value) else float("nan")
