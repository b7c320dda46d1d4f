"""A realistic stepped run folder of any size, written fast (for the report-at-scale benchmark and the
figures-unchanged test; never for real reports).

Every column loadline.core.schema.REQUESTS declares is filled the way a run fills it: a few workers and
many users and sessions, ok rows with TTFT/TPOT/ITL summaries and the per-request gaps (`itl_us`,
20-200 gaps, growing with the step's load), 0.2 % errors of three classes, requests cut at each
phase's end (`cancelled`), read delays and prompt/output lengths. Beside it phases.csv (one row per
step), manifest.json (a finished stepped run) and server_metrics.csv (vLLM gauges every 5 s).

Written in chunks with pyarrow's CSV writer, so 10 M rows (~8 GB) take minutes, not an hour.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from loadline.core import runfolder, schema
from loadline.core.columnar_copy import ColumnarCopy, copy_path

T0 = 1_700_000_000.0
WORKERS = 4
USERS_PER_STEP = 10


def _pools(rng: np.random.Generator, phases: int, size: int) -> list[tuple[list[str], np.ndarray, np.ndarray]]:
    """Per phase: `size` distinct gap strings, their gap counts and gap sums (ms). Gaps grow with load."""
    pools = []
    for phase in range(phases):
        lengths = rng.integers(20, 201, size)
        base = 6_000 * (1.0 + phase / 3.0)
        gaps = [np.maximum(1, rng.lognormal(np.log(base), 0.4, k)).astype(np.int64) for k in lengths]
        pools.append(([" ".join(map(str, g)) for g in gaps], lengths, np.array([g.sum() / 1000.0 for g in gaps])))
    return pools


def _chunk(rng: np.random.Generator, first: int, start: np.ndarray, phase_s: float, pools) -> pa.Table:
    n = len(start)
    index = np.arange(first, first + n)
    phase = ((start - T0) // phase_s).astype(np.int64)
    users = USERS_PER_STEP * (phase + 1)
    user = rng.integers(0, users)
    worker = user % WORKERS
    pick = rng.integers(0, len(pools[0][0]), n)
    gaps_n = np.empty(n, dtype=np.int64)
    gaps_ms = np.empty(n)
    itl = np.empty(n, dtype=object)
    for p in np.unique(phase):
        mine = phase == p
        strings, lengths, sums = pools[int(p)]
        itl[mine] = np.asarray(strings, dtype=object)[pick[mine]]
        gaps_n[mine], gaps_ms[mine] = lengths[pick[mine]], sums[pick[mine]]
    ttft = rng.lognormal(np.log(120.0 * (1.0 + phase / 3.0)), 0.3)
    e2e = ttft + gaps_ms
    end_of_phase = T0 + (phase + 1) * phase_s
    roll = rng.random(n)
    status = np.where(roll < 0.002, "error", "ok").astype(object)
    status[(start + e2e / 1000.0 > end_of_phase) & (roll > 0.5)] = "cancelled"  # cut by the step's end
    ok = status == "ok"
    error_class = np.where(status == "error", np.array(["timeout", "http_5xx", "connection"])[index % 3], "")
    tokens = np.where(ok, gaps_n + 1, 0)
    itl = np.where(ok, itl, "")
    nan = np.full(n, np.nan)
    p50 = np.where(ok, gaps_ms / gaps_n, np.nan)
    columns = {
        "request_id": np.char.add("r", index.astype(str)),
        "worker_id": np.char.add("host-", worker.astype(str)),
        "user_id": np.char.add("u", user.astype(str)),
        "user_class": np.full(n, "ChatSessionUser"),
        "session_id": np.char.add("s", (user * 7 + index // 50).astype(str)),
        "turn": index % 6,
        "endpoint": np.full(n, "/v1/chat/completions"),
        "model": np.full(n, "loadline/tiny-sim"),
        "start_wall": start,
        "attempt": np.zeros(n, dtype=np.int64),
        "stale_retries": np.zeros(n, dtype=np.int64),
        "status": status.astype(str),
        "error_class": error_class,
        "http_status": np.where(error_class == "http_5xx", 503, np.where(status == "error", 0, 200)),
        "error_message": np.where(status == "error", "upstream timed out", ""),
        "content_type": np.full(n, "text/event-stream"),
        "error_detail": np.full(n, ""),
        "connect_ms": rng.uniform(0.1, 2.0, n),
        "ttfb_ms": ttft,
        "ttft_ms": np.where(status == "error", np.nan, ttft),
        "e2e_ms": e2e,
        "tpot_ms": np.where(ok, gaps_ms / gaps_n, np.nan),
        "itl_mean_ms": p50,
        "itl_p50_ms": p50,
        "itl_p99_ms": np.where(ok, p50 * 2.1, np.nan),
        "itl_max_ms": np.where(ok, p50 * 3.0, np.nan),
        "prompt_tokens": rng.integers(50, 2000, n).astype(float),
        "output_tokens": tokens,
        "tokens_source": np.full(n, "usage"),
        "content_chunks": tokens,
        "finish_reason": np.where(ok, "stop", ""),
        "clock": np.full(n, "kernel"),
        "read_delay_ms": rng.exponential(0.4, n),
        "due_wall": nan,
        "lateness_ms": nan,
        "trace_index": nan,
        "itl_us": itl.astype(str),
        "prompt_tokens_requested": nan,
        "output_tokens_requested": np.full(n, 256.0),
        "token_counter": np.full(n, "server"),
        "ttfo_ms": nan,
        "reasoning_tokens": nan,
        "reasoning_ms": nan,
        "cached_tokens": nan,
        "tool_calls": np.zeros(n, dtype=np.int64),
    }
    arrays = {}
    for name, kind in schema.REQUESTS.items():
        values = columns[name]
        if kind == schema.FLOAT:
            arrays[name] = pa.array(np.asarray(values, dtype=float), from_pandas=True)  # NaN -> empty cell
        else:
            arrays[name] = pa.array(values)
    return pa.table(arrays)


def wide_run(
    run_dir: Path,
    rows: int,
    *,
    seed: int = 7,
    phases: int = 10,
    time_scale: float = 1.0,
    chunk: int = 200_000,
    copy: bool = True,
) -> Path:
    """Write the run folder; `rows` requests spread evenly over `phases` steps of 600 s (sorted by start).
    `copy`: write requests.arrows beside requests.csv, as a run does (the product's writer)."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    phase_s = 600.0
    pools = _pools(rng, phases, size=min(2000, max(50, rows // 20)))
    options = pacsv.WriteOptions(
        quoting_style="none", include_header=False
    )  # as the run writes it: no cell needs quotes
    first_row = _chunk(np.random.default_rng(0), 0, np.array([T0]), phase_s, pools)
    columnar = ColumnarCopy(copy_path(run_dir / runfolder.REQUESTS), schema.REQUESTS) if copy else None
    with open(run_dir / runfolder.REQUESTS, "wb") as out:
        out.write((",".join(first_row.column_names) + "\n").encode())
        for first in range(0, rows, chunk):
            n = min(chunk, rows - first)
            # evenly spread, jittered, sorted: a row's start grows with its index, as records of a steady run do
            start = T0 + (np.arange(first, first + n) + rng.random(n)) * (phases * phase_s / rows)
            table = _chunk(rng, first, start, phase_s, pools)
            text = pa.BufferOutputStream()
            pacsv.write_csv(table, text, write_options=options)
            written = text.getvalue()
            out.write(written)
            if columnar is not None:
                start = out.tell() - len(written)
                out.flush()
                columnar.append_table(table, start, out.tell(), written[-4096:].to_pybytes())
    if columnar is not None:
        columnar.close()
    _write_side_files(run_dir, rows, phases, phase_s, time_scale)
    return run_dir


def _write_side_files(run_dir: Path, rows: int, phases: int, phase_s: float, time_scale: float) -> None:
    steps = [
        {
            "index": i,
            "label": f"step-{i + 1} ({USERS_PER_STEP * (i + 1)} users)",
            "kind": "step",
            "start_wall": T0 + i * phase_s,
            "end_wall": T0 + (i + 1) * phase_s,
            "target_users": USERS_PER_STEP * (i + 1),
            "spawn_rate": 10,
            "users_start": USERS_PER_STEP * (i + 1),
            "users_end": USERS_PER_STEP * (i + 1),
            "note": "",
            "target_rate": None,
        }
        for i in range(phases)
    ]
    names = list(runfolder.PHASE_COLUMNS)
    lines = [",".join(names)] + [",".join("" if s.get(c) is None else str(s.get(c)) for c in names) for s in steps]
    (run_dir / runfolder.PHASES).write_text("\n".join(lines) + "\n")
    manifest = {
        "name": f"wide-{rows}",
        "status": "finished",
        "shape": "stepped",
        "options": {"time_scale": time_scale},
        "records_written": rows,
        "started_at": T0,
        "ended_at": T0 + phases * phase_s,
    }
    (run_dir / runfolder.MANIFEST).write_text(json.dumps(manifest, indent=2))
    labels = '"{""engine"":""0"",""model_name"":""loadline/tiny-sim""}"'
    metric_lines = ["ts,source,metric,labels,value"]
    for k, ts in enumerate(np.arange(T0, T0 + phases * phase_s, 5.0)):
        phase = int((ts - T0) // phase_s)
        running = USERS_PER_STEP * (phase + 1)
        for metric, value in (
            ("vllm:num_requests_running", float(min(running, 64))),
            ("vllm:num_requests_waiting", float(max(0, running - 64))),
            ("vllm:kv_cache_usage_perc", min(1.0, running / 100.0)),
            ("vllm:request_success_total", float(k * running)),
        ):
            metric_lines.append(f"{ts},target,{metric},{labels},{value}")
    (run_dir / runfolder.SERVER_METRICS).write_text("\n".join(metric_lines) + "\n")
