"""Constructed run folders with known answers, for tests and benchmarks (never for real reports).

`stepped_run` models a closed-loop test against a server with a fixed capacity: below capacity
throughput grows with users and latency stays flat; past it throughput is flat and latency grows
with users (Little's law), so the knee sits at the last step below capacity.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from loadline.core import runfolder
from loadline.core.records import COLUMNS

_DEFAULTS = {
    "worker_id": "w0",
    "user_id": "u0",
    "user_class": "ChatUser",
    "session_id": "s0",
    "turn": 0,
    "endpoint": "/v1/chat/completions",
    "model": "sim",
    "attempt": 0,
    "status": "ok",
    "error_class": "",
    "http_status": 200,
    "error_message": "",
    "ttfb_ms": np.nan,
    "ttft_ms": np.nan,
    "tpot_ms": np.nan,
    "itl_mean_ms": np.nan,
    "itl_p50_ms": np.nan,
    "itl_p99_ms": np.nan,
    "itl_max_ms": np.nan,
    "prompt_tokens": 100,
    "output_tokens": 0,
    "tokens_source": "usage",
    "content_chunks": 0,
    "finish_reason": "stop",
    "itl_us": "",
}


def make_requests(start_wall, e2e_ms, **columns) -> pd.DataFrame:
    """A requests table (loadline.core.records.COLUMNS) from arrays; unspecified columns get defaults."""
    start_wall = np.asarray(start_wall, dtype=float)
    n = len(start_wall)
    data = {
        "request_id": [f"r{i}" for i in range(n)],
        "start_wall": start_wall,
        "e2e_ms": np.asarray(e2e_ms, dtype=float),
    }
    for name in COLUMNS:
        if name not in data:
            value = columns.get(name, _DEFAULTS.get(name))
            data[name] = value if np.ndim(value) else [value] * n
    return pd.DataFrame(data, columns=list(COLUMNS))


def write_run(
    run_dir: Path, requests: pd.DataFrame | None, phases: list[dict] | None = None, manifest: dict | None = None
) -> Path:
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if requests is not None:
        requests.to_csv(run_dir / runfolder.REQUESTS, index=False, columns=list(COLUMNS))
    if phases is not None:
        pd.DataFrame(phases, columns=list(runfolder.PHASE_COLUMNS)).to_csv(run_dir / runfolder.PHASES, index=False)
    (run_dir / runfolder.MANIFEST).write_text(json.dumps(manifest or {"name": "synthetic"}))
    return run_dir


@dataclass(frozen=True)
class Server:
    """A fixed-capacity server: `capacity_rps` requests/s at most, `base_ms` unloaded latency."""

    capacity_rps: float = 20.0
    base_ms: float = 500.0
    ttft_share: float = 0.2  # fraction of E2E spent before the first token when unloaded
    tokens: int = 20


def step_operating_point(server: Server, users: int) -> tuple[float, float]:
    """(throughput rps, mean E2E ms) of a closed loop with `users` and no think time."""
    unloaded_rps = users / (server.base_ms / 1000.0)
    rps = min(unloaded_rps, server.capacity_rps)
    return rps, users / rps * 1000.0


def stepped_run(
    run_dir: Path,
    users_steps=(2, 4, 8, 16, 32),
    server: Server = Server(),
    step_s: float = 30.0,
    t0: float = 1_700_000_000.0,
    seed: int = 1,
    jitter: float = 0.05,
) -> Path:
    """Write a stepped run folder whose knee is the last step with users <= capacity x base latency."""
    rng = np.random.default_rng(seed)
    frames, phases = [], []
    for index, users in enumerate(users_steps):
        start = t0 + index * step_s
        rps, e2e = step_operating_point(server, users)
        n = max(1, round(rps * step_s))
        e2e_ms = e2e * (1.0 + jitter * rng.standard_normal(n)).clip(0.5)
        queue_ms = e2e - server.base_ms  # everything above the unloaded latency is queueing before the first token
        ttft_ms = (server.base_ms * server.ttft_share + queue_ms) * (1.0 + jitter * rng.standard_normal(n)).clip(0.5)
        gap_us = int((e2e_ms.mean() - ttft_ms.mean()) / (server.tokens - 1) * 1000)
        itl = " ".join([str(gap_us)] * (server.tokens - 1))
        frames.append(
            make_requests(
                start + np.sort(rng.uniform(0, step_s, n)),
                e2e_ms,
                ttft_ms=ttft_ms,
                tpot_ms=(e2e_ms - ttft_ms) / (server.tokens - 1),
                output_tokens=server.tokens,
                itl_us=itl,
            )
        )
        phases.append(
            {
                "index": index,
                "label": f"step-{index + 1} ({users} users)",
                "kind": "step",
                "start_wall": start,
                "end_wall": start + step_s,
                "target_users": users,
                "spawn_rate": users,
                "users_start": users,
                "users_end": users,
                "note": "",
            }
        )
    requests = pd.concat(frames, ignore_index=True)
    requests["request_id"] = [f"r{i}" for i in range(len(requests))]
    return write_run(run_dir, requests, phases, {"name": "synthetic-stepped", "shape": "stepped"})
