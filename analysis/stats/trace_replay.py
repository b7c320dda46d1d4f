"""Trace replays: was the trace sent as it was written, and what did the prefix cache make of it?

Reads the run folder's schedule (trace-schedule.jsonl, loadline/core/trace_warp.py), the requests
(records carry `trace_index` and `due_wall`) and the replay's start (the end of the trace shape's
`start` phase in phases.csv: shapes/trace.py records it at the schedule's start).
All times are model time (x --time-scale) from the replay's start:
- every scheduled request accounted for: sent (first attempts), and how many never were;
- offered vs achieved: per bin, the trace's own requests (surge copies apart), the schedule's and
  the ones sent, as requests per minute; per second, how many seconds sent what was scheduled;
- lateness (due -> sent) percentiles;
- lengths: the trace's input and output tokens beside what the server counted (usage);
- the prefix cache: the hit rate the engine reported (vLLM's prefix_cache_hits / _queries counters,
  or the older gpu_prefix_cache_hit_rate gauge), the simulator's truth log when there is one, and
  what the trace itself could reuse (its hash_ids seen before, by block and by token).
A replay is not sustained when a scheduled request was never sent or an open-loop phase fell
behind (analysis/stats/arrivals.py's rule): a trace is never silently stretched.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from loadline.core import runfolder
from loadline.core.records import Status
from loadline.core.trace import TraceRequest, block_reuse
from loadline.core.trace_warp import read

LEAD_PHASE = "start"  # shapes/trace.py's first phase: the replay starts where it ends
PERCENTILES = (50, 95, 99)
HIT_COUNTERS = (
    ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"),  # vLLM V1
    ("vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_queries_total"),  # vLLM 0.7-0.9 V0
)
HIT_GAUGE = "vllm:gpu_prefix_cache_hit_rate"  # older vLLM: a 0..1 gauge


def bin_seconds(duration_s: float) -> float:
    """Bins of the per-minute table: a minute, or for a replay under 10 minutes a twentieth of it."""
    return 60.0 if duration_s >= 600 else max(1.0, round(duration_s / 20))


def offered_vs_achieved(due_s: np.ndarray, original: np.ndarray, sent_s: np.ndarray, duration_s: float) -> dict:
    """Per bin: trace, scheduled, sent as requests per minute; and per second, the match of sent to scheduled."""
    width = bin_seconds(duration_s)
    edges = np.arange(0.0, max(duration_s, width) + width, width)
    rows = []
    counts = [np.histogram(x, bins=edges)[0] for x in (original, due_s, sent_s)]
    for k in range(len(edges) - 1):
        rows.append(
            {
                "from_s": float(edges[k]),
                "trace_per_min": float(counts[0][k]) * 60 / width,
                "scheduled_per_min": float(counts[1][k]) * 60 / width,
                "sent_per_min": float(counts[2][k]) * 60 / width,
            }
        )
    seconds = np.arange(0.0, math.ceil(max(duration_s, 1.0)) + 1.0)
    planned, done = np.histogram(due_s, bins=seconds)[0], np.histogram(sent_s, bins=seconds)[0]
    return {
        "bin_s": width,
        "bins": rows,
        "seconds": int(len(planned)),
        "seconds_matching": int((planned == done).sum()),
        "max_second_diff": int(np.abs(planned - done).max()) if len(planned) else 0,
    }


def engine_hit_rate(metrics: pd.DataFrame) -> dict:
    """The prefix-cache hit rate the engine reported over the run: counters' increases, else the gauge's mean."""
    if metrics is None or metrics.empty:
        return {"hit_rate": None, "source": None}
    for hits_name, queries_name in HIT_COUNTERS:
        hits, queries = _increase(metrics, hits_name), _increase(metrics, queries_name)
        if queries:
            return {"hit_rate": hits / queries, "hit_tokens": hits, "queried_tokens": queries, "source": hits_name}
    gauge = metrics[metrics["metric"] == HIT_GAUGE]
    if len(gauge):
        return {"hit_rate": float(pd.to_numeric(gauge["value"], errors="coerce").mean()), "source": HIT_GAUGE}
    return {"hit_rate": None, "source": None}


def _increase(metrics: pd.DataFrame, name: str) -> float:
    rows = metrics[metrics["metric"] == name]
    total = 0.0
    for _, series in rows.groupby(["source", "labels"], sort=False):
        values = pd.to_numeric(series.sort_values("ts")["value"], errors="coerce").dropna().to_numpy()
        if len(values) > 1:
            steps = np.diff(values)
            total += float(np.where(steps >= 0, steps, values[1:]).sum())  # a reset starts again from 0
    return total


def truth_hit_rate(run_dir: Path) -> float | None:
    """cached / prompt tokens over the simulator's truth log (None without one)."""
    path = run_dir / runfolder.TRUTH
    if not path.is_file():
        return None
    cached = prompt = 0
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if isinstance(item, dict) and isinstance(item.get("prompt_tokens"), int):
                if item.get("cached_tokens") is not None:
                    prompt += item["prompt_tokens"]
                    cached += int(item["cached_tokens"])
    return cached / prompt if prompt else None


def _percentiles(values: pd.Series, name: str) -> dict:
    values = pd.to_numeric(values, errors="coerce").dropna()
    out = {f"{name}_p{p}_ms": (float(np.percentile(values, p)) if len(values) else None) for p in PERCENTILES}
    out[f"{name}_max_ms"] = float(values.max()) if len(values) else None
    return out


def replay_start(phases: pd.DataFrame) -> float | None:
    """The replay's start on the master's clock: where the trace shape's lead phase ends."""
    lead = phases[phases["label"].astype(str) == LEAD_PHASE] if len(phases) else phases
    ends = pd.to_numeric(lead["end_wall"], errors="coerce").dropna() if len(lead) else pd.Series(dtype=float)
    return float(ends.iloc[0]) if len(ends) else None


def summary(
    run_dir: Path, requests: pd.DataFrame, phases: pd.DataFrame, metrics: pd.DataFrame, open_loop: dict
) -> dict:
    """The report's trace-replay section; {} for runs that replayed no trace.

    `requests`, `phases` and `metrics` are the run's tables in model time (analysis/data/timescale.py)."""
    path = Path(run_dir) / runfolder.TRACE_SCHEDULE
    if not path.is_file():
        return {}
    start = replay_start(phases)
    header, scheduled = read(path)
    rows = requests[requests["trace_index"].notna()] if "trace_index" in requests.columns else requests.iloc[0:0]
    first = rows[rows["attempt"] == 0]
    sent = Counter(first["trace_index"].astype(int).tolist())
    planned = Counter(r.trace_index for r in scheduled)
    unsent = sum(max(0, n - sent.get(i, 0)) for i, n in planned.items())
    due = np.array([r.due_s for r in scheduled])
    firsts: dict[int, float] = {}
    for r in scheduled:  # a surge's copies share their trace request's index: the first is the trace's own
        firsts.setdefault(r.trace_index, r.due_s)
    original = np.array(list(firsts.values()))
    # requests and phases come in model time (analysis/data/timescale.py): differences are model seconds
    sent_s = first["start_wall"].to_numpy(dtype=float) - float(start) if start else np.array([])
    duration = float(header.get("duration_s") or (due.max() if len(due) else 0.0))
    ok = first[first["status"].astype(str) == Status.OK]
    by_index = {r.trace_index: r for r in scheduled}
    asked_in = ok["trace_index"].astype(int).map(lambda i: by_index[i].input_tokens if i in by_index else None)
    asked_out = ok["output_tokens_requested"]
    got_in = pd.to_numeric(ok["prompt_tokens"], errors="coerce")
    got_out = pd.to_numeric(ok["output_tokens"], errors="coerce")
    block = int(header.get("block_tokens") or 512)
    as_trace = [TraceRequest(0.0, r.input_tokens, r.output_tokens, r.hash_ids) for r in scheduled]
    reuse_blocks, reuse_tokens = block_reuse(as_trace, block)
    engine = engine_hit_rate(metrics)
    behind = [p for p in (open_loop or {}).get("phases") or [] if not p.get("sustained")]
    notes = []
    if unsent:
        notes.append(
            f"{unsent} of the {len(scheduled)} scheduled requests were never sent: the trace was not replayed whole"
        )
    for p in behind:
        notes.append(f"the trace's rate was not sustained in {p['phase']}: {p.get('behind')}")
    lateness = first["lateness_ms"] if "lateness_ms" in first else pd.Series(dtype=float)
    return {
        "source": header.get("source"),
        "format": header.get("format"),
        "block_tokens": block,
        "speed": header.get("speed"),
        "window": header.get("window"),
        "surges": header.get("surges") or [],
        "trace_requests": header.get("trace_requests"),
        "scheduled": len(scheduled),
        "sent": int(sum(min(n, planned.get(i, 0)) for i, n in sent.items())),
        "unsent": int(unsent),
        "ok": int(len(ok)),
        "duration_s": duration,
        "rates": offered_vs_achieved(due, original, sent_s, duration) if start else None,
        **_percentiles(lateness, "lateness"),
        "input_exact": _share_equal(asked_in, got_in),
        "output_exact": _share_equal(asked_out, got_out),
        "input_asked_mean": _mean(asked_in),
        "input_got_mean": _mean(got_in),
        "output_asked_mean": _mean(asked_out),
        "output_got_mean": _mean(got_out),
        "trace_block_reuse": reuse_blocks,
        "trace_token_reuse": reuse_tokens,
        "engine_hit_rate": engine.get("hit_rate"),
        "engine_hit_source": engine.get("source"),
        "truth_hit_rate": truth_hit_rate(Path(run_dir)),
        "sustained": not notes,
        "notes": notes,
    }


def _share_equal(asked: pd.Series, got: pd.Series) -> float | None:
    asked = pd.to_numeric(asked, errors="coerce")
    both = asked.notna() & got.notna()
    return float((asked[both].to_numpy() == got[both].to_numpy()).mean()) if both.any() else None


def _mean(values: pd.Series) -> float | None:
    values = pd.to_numeric(values, errors="coerce").dropna()
    return float(values.mean()) if len(values) else None
