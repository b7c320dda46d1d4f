"""Constructed runs with a known bottleneck, for the verdict tests (client table + server metrics).

A scenario is a list of phases, each with what the client saw (rate, TTFT, TPOT, errors) and what
the server exposed (running, waiting, KV usage, GPU utilisation, preemptions, queue time...).
`server_rows` turns it into a server_metrics table in vLLM's names, scraped every second;
`rename` maps that table to SGLang or TGI names (the twins of tests/data/). `write_scenario`
writes a whole run folder that analysis.data.load.load_run reads like a real one. The named runs,
one per bottleneck layer, are tests/layer_scenarios.py.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from loadline.core import runfolder
from loadline.core.records import COLUMNS

T0 = 1_700_000_000.0
PHASE_S = 10
BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
ENGINE = {"engine": "0", "model_name": "m"}


@dataclass
class Phase:
    users: int
    rps: float
    ttft_ms: float = 50.0
    tpot_ms: float = 10.0
    fail_503: float = 0.0  # share of requests answered 503 by something in front of the engine
    fail_stream: float = 0.0  # share of streams the engine aborted (an error object inside a 200 stream)
    running: float | None = None  # default: users
    waiting: float = 0.0
    kv: float = 0.1
    kv_end: float | None = None  # KV usage drifts linearly to this within the phase (leaks)
    gpu: float = 0.5  # 0-1
    preempt_per_s: float = 0.0
    queue_ms: float = 2.0
    prefill_ms: float | None = None  # default: server TTFT - queue
    server_ttft_ms: float | None = None  # default: client TTFT - 2 ms
    host_busy: float | None = None
    gen_cpu: float = 20.0
    gen_lag_ms: float = 1.0
    gen_wait: float = 0.0  # % of the time the generator waited for a core a neighbour held
    restart_at_end: bool = False  # the engine restarts (counters reset) at the end of this phase
    waiting_duty: float = 1.0  # share of scrapes that see `waiting` (chat users' think time drains the queue)
    idle: bool = False  # no traffic: no requests, nothing running or waiting (KV shows any residue)
    prompt_tokens: int = 100  # each request's prompt, as the engine counted it (replies are 100 tokens)
    cached_tokens: int = 0  # of which the engine's prefix cache already held


@dataclass
class Scenario:
    name: str
    phases: list[Phase]
    kind: str = "step"
    manifest: dict = field(default_factory=dict)
    kv_pool: tuple[int, int] | None = None  # (num_gpu_blocks, block_size) in vLLM's cache_config_info
    kv_pool_other: tuple[int, int] | None = None  # a second replica's, listed before the first's


def _bounds(pos: int) -> tuple[float, float]:
    return T0 + pos * PHASE_S, T0 + (pos + 1) * PHASE_S


def requests_table(sc: Scenario) -> pd.DataFrame:
    rows = []
    for pos, ph in enumerate(sc.phases):
        start, _ = _bounds(pos)
        if ph.idle:
            continue
        n = max(1, int(round(ph.rps / (1 - ph.fail_503) * PHASE_S)))
        jitter = 1 + 0.05 * np.sin(np.arange(n))  # deterministic spread around the phase's value
        for i in range(n):
            failed = ph.fail_503 > 0 and (i % max(1, int(round(1 / ph.fail_503)))) == 0
            aborted = ph.fail_stream > 0 and (i % max(1, int(round(1 / ph.fail_stream)))) == 1
            ttft = ph.ttft_ms * jitter[i]
            rec = {c: "" for c in COLUMNS}
            rec.update(
                request_id=f"{pos}-{i}",
                worker_id="w0",
                user_id=f"u{i % ph.users}",
                user_class="Chat",
                session_id=f"s{i}",
                turn=0,
                endpoint="/v1/chat/completions",
                model="m",
                start_wall=start + (i + 0.5) * PHASE_S / n,
                attempt=0,
                tokens_source="usage",
                content_chunks=0,
                prompt_tokens=ph.prompt_tokens,
                cached_tokens=ph.cached_tokens,
            )
            if failed:
                rec.update(status="error", error_class="http", http_status=503, e2e_ms=3.0, output_tokens=0)
            elif aborted:
                rec.update(
                    status="error",
                    error_class="stream_error",
                    http_status=200,
                    ttft_ms=ttft,
                    e2e_ms=ttft + ph.tpot_ms * 20,
                    output_tokens=20,
                )
            else:
                rec.update(
                    status="ok",
                    http_status=200,
                    ttft_ms=ttft,
                    ttfb_ms=ttft / 2,
                    tpot_ms=ph.tpot_ms * jitter[i],
                    e2e_ms=ttft + ph.tpot_ms * 99,
                    output_tokens=100,
                    finish_reason="stop",
                )
            rows.append(rec)
    return pd.DataFrame(rows, columns=list(COLUMNS))


def phases_table(sc: Scenario) -> pd.DataFrame:
    rows = []
    for pos, ph in enumerate(sc.phases):
        start, end = _bounds(pos)
        rows.append(
            {
                "index": pos,
                "label": f"{sc.kind}-{pos + 1} ({ph.users} users)",
                "kind": sc.kind,
                "start_wall": start,
                "end_wall": end,
                "target_users": ph.users,
                "spawn_rate": 100,
                "users_start": ph.users,
                "users_end": ph.users,
                "note": "",
            }
        )
    return pd.DataFrame(rows, columns=list(runfolder.PHASE_COLUMNS))


def server_rows(sc: Scenario) -> pd.DataFrame:
    """Scrapes every second in vLLM + DCGM (+ node_exporter when host_busy is set) names."""
    rows: list[tuple] = []
    eng = json.dumps(ENGINE, sort_keys=True)
    counters = {"prompt": 0.0, "gen": 0.0, "pre": 0.0, "idle": 0.0, "user": 0.0}
    hist_state: dict[str, list[float]] = {}  # name -> [count, sum] per observed value bucket set
    bucket_counts: dict[str, dict[float, float]] = {}
    for pos, ph in enumerate(sc.phases):
        start, _ = _bounds(pos)
        server_ttft = (ph.server_ttft_ms if ph.server_ttft_ms is not None else max(ph.ttft_ms - 2, 1)) / 1000
        prefill = (ph.prefill_ms / 1000) if ph.prefill_ms is not None else max(server_ttft - ph.queue_ms / 1000, 0.001)
        values = {
            "vllm:time_to_first_token_seconds": server_ttft,
            "vllm:request_queue_time_seconds": ph.queue_ms / 1000,
            "vllm:request_prefill_time_seconds": prefill,
            "vllm:inter_token_latency_seconds": ph.tpot_ms / 1000,
            "vllm:request_decode_time_seconds": ph.tpot_ms * 99 / 1000,
            "vllm:e2e_request_latency_seconds": server_ttft + ph.tpot_ms * 99 / 1000,
        }
        for sec in range(PHASE_S):
            ts = start + sec + 1.0
            frac = (sec + 1) / PHASE_S
            kv = ph.kv if ph.kv_end is None else ph.kv + (ph.kv_end - ph.kv) * frac
            running = ph.users if ph.running is None else ph.running
            waiting = ph.waiting
            if int((sec + 1) * ph.waiting_duty + 1e-9) == int(sec * ph.waiting_duty + 1e-9):  # the queue drained here
                waiting, running = 0.0, round(running * 0.75)
            if ph.idle:
                running, waiting = 0, 0
            for engine, pool in (("1", sc.kv_pool_other), ("0", sc.kv_pool)):
                if pool is not None:
                    info = {**ENGINE, "engine": engine, "num_gpu_blocks": str(pool[0]), "block_size": str(pool[1])}
                    rows.append((ts, "target", "vllm:cache_config_info", json.dumps(info, sort_keys=True), 1.0))
            rows += [
                (ts, "target", "vllm:num_requests_running", eng, running),
                (ts, "target", "vllm:num_requests_waiting", eng, waiting),
                (ts, "target", "vllm:kv_cache_usage_perc", eng, round(kv, 4)),
                (ts, "dcgm", "DCGM_FI_DEV_GPU_UTIL", json.dumps({"gpu": "0"}), round(ph.gpu * 100)),
                (ts, "dcgm", "DCGM_FI_DEV_FB_USED", json.dumps({"gpu": "0"}), 60000 + 10000 * kv),
                (ts, "dcgm", "DCGM_FI_DEV_FB_FREE", json.dumps({"gpu": "0"}), 20000 - 10000 * kv),
            ]
            counters["prompt"] += 0 if ph.idle else ph.rps * ph.prompt_tokens
            counters["gen"] += 0 if ph.idle else ph.rps * 100
            counters["pre"] += ph.preempt_per_s
            rows += [
                (ts, "target", "vllm:prompt_tokens_total", eng, counters["prompt"]),
                (ts, "target", "vllm:generation_tokens_total", eng, counters["gen"]),
                (ts, "target", "vllm:num_preemptions_total", eng, counters["pre"]),
            ]
            for name, value in values.items():
                state = hist_state.setdefault(name, [0.0, 0.0])
                state[0] += ph.rps
                state[1] += ph.rps * value
                per_le = bucket_counts.setdefault(name, {le: 0.0 for le in BUCKETS})
                for le in BUCKETS:
                    if value <= le:
                        per_le[le] += ph.rps
                for le in BUCKETS:
                    rows.append(
                        (
                            ts,
                            "target",
                            f"{name}_bucket",
                            json.dumps({**ENGINE, "le": str(le)}, sort_keys=True),
                            per_le[le],
                        )
                    )
                rows.append(
                    (ts, "target", f"{name}_bucket", json.dumps({**ENGINE, "le": "+Inf"}, sort_keys=True), state[0])
                )
                rows.append((ts, "target", f"{name}_count", eng, state[0]))
                rows.append((ts, "target", f"{name}_sum", eng, state[1]))
            if ph.host_busy is not None:
                counters["user"] += 8 * ph.host_busy
                counters["idle"] += 8 * (1 - ph.host_busy)
                rows += [
                    (ts, "node", "node_cpu_seconds_total", json.dumps({"cpu": "0", "mode": "user"}), counters["user"]),
                    (ts, "node", "node_cpu_seconds_total", json.dumps({"cpu": "0", "mode": "idle"}), counters["idle"]),
                ]
        if ph.restart_at_end:
            for key in ("prompt", "gen", "pre"):
                counters[key] = 0.0
    return pd.DataFrame(rows, columns=list(runfolder.SERVER_METRIC_COLUMNS))


SGLANG = {
    "vllm:num_requests_running": "sglang:num_running_reqs",
    "vllm:num_requests_waiting": "sglang:num_queue_reqs",
    "vllm:kv_cache_usage_perc": "sglang:token_usage",
    "vllm:num_preemptions_total": "sglang:num_retracted_reqs",
    "vllm:prompt_tokens_total": "sglang:prompt_tokens_total",
    "vllm:generation_tokens_total": "sglang:generation_tokens_total",
    "vllm:time_to_first_token_seconds": "sglang:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds": "sglang:inter_token_latency_seconds",
    "vllm:e2e_request_latency_seconds": "sglang:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds": "sglang:queue_time_seconds",
}
TGI = {
    "vllm:num_requests_running": "tgi_batch_current_size",
    "vllm:num_requests_waiting": "tgi_queue_size",
    "vllm:request_queue_time_seconds": "tgi_request_queue_duration",
    "vllm:e2e_request_latency_seconds": "tgi_request_duration",
    "vllm:inter_token_latency_seconds": "tgi_request_mean_time_per_token_duration",
    "vllm:request_prefill_time_seconds": ("tgi_batch_forward_duration", {"method": "prefill"}),
    "vllm:request_decode_time_seconds": ("tgi_batch_forward_duration", {"method": "decode"}),
}
OLD_VLLM = {
    "vllm:kv_cache_usage_perc": "vllm:gpu_cache_usage_perc",
    "vllm:inter_token_latency_seconds": "vllm:time_per_output_token_seconds",
}


def rename(table: pd.DataFrame, mapping: dict, drop_unmapped_engine: bool = True) -> pd.DataFrame:
    """The same samples under another vendor's names; engine metrics it lacks are dropped."""
    out = []
    for ts, source, metric, labels, value in table.itertuples(index=False):
        base, suffix = metric, ""
        for s in ("_bucket", "_count", "_sum"):
            if metric.endswith(s) and metric[: -len(s)] in mapping:
                base, suffix = metric[: -len(s)], s
        if base in mapping:
            target = mapping[base]
            extra = {}
            if isinstance(target, tuple):
                target, extra = target
            lab = {k: v for k, v in json.loads(labels).items() if k not in ENGINE}
            out.append((ts, source, target + suffix, json.dumps({**lab, **extra}, sort_keys=True), value))
        elif metric.startswith("vllm:") and drop_unmapped_engine:
            continue
        else:
            out.append((ts, source, metric, labels, value))
    return pd.DataFrame(out, columns=list(runfolder.SERVER_METRIC_COLUMNS))


def generator_rows(sc: Scenario) -> pd.DataFrame:
    rows = []
    for pos, ph in enumerate(sc.phases):
        start, _ = _bounds(pos)
        for sec in range(PHASE_S):
            rows.append((start + sec + 0.5, "w0", ph.gen_cpu, ph.gen_lag_ms, ph.users, ph.users, ph.gen_wait, None))
    return pd.DataFrame(rows, columns=list(runfolder.GENERATOR_COLUMNS))


def one_phase_table(sc: Scenario) -> pd.DataFrame:
    """A fixed-user run (no shape): one phase over the whole run; the scenario's phases are only
    its time profile (the ramp, then the hold)."""
    users = max(p.users for p in sc.phases)
    return pd.DataFrame(
        [
            {
                "index": 0,
                "label": f"fixed ({users} users)",
                "kind": "fixed",
                "start_wall": T0,
                "end_wall": _bounds(len(sc.phases) - 1)[1],
                "target_users": users,
                "spawn_rate": 100,
                "users_start": users,
                "users_end": users,
                "note": "",
            }
        ],
        columns=list(runfolder.PHASE_COLUMNS),
    )


def write_scenario(sc: Scenario, run_dir: Path, server: pd.DataFrame | None = None, one_phase: bool = False) -> Path:
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    requests_table(sc).to_csv(run_dir / runfolder.REQUESTS, index=False)
    (one_phase_table(sc) if one_phase else phases_table(sc)).to_csv(run_dir / runfolder.PHASES, index=False)
    (server if server is not None else server_rows(sc)).to_csv(run_dir / runfolder.SERVER_METRICS, index=False)
    generator_rows(sc).to_csv(run_dir / runfolder.GENERATOR_METRICS, index=False)
    (run_dir / runfolder.MANIFEST).write_text(json.dumps({"name": sc.name, **sc.manifest}))
    return run_dir


def vary(sc: Scenario, factor: float) -> Scenario:
    """The same shape of problem at other magnitudes (rules must not be tuned to one set of numbers)."""
    phases = [
        dataclasses.replace(
            p,
            rps=p.rps * factor,
            ttft_ms=p.ttft_ms * factor,
            server_ttft_ms=None if p.server_ttft_ms is None else p.server_ttft_ms * factor,
            queue_ms=p.queue_ms * factor,
            prefill_ms=None if p.prefill_ms is None else p.prefill_ms * factor,
        )
        for p in sc.phases
    ]
    return dataclasses.replace(sc, phases=phases)
