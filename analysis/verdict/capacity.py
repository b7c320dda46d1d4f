"""Capacity plan: from a measured per-replica limit to a replica count, water levels and GPU memory.

The arithmetic is DOMAIN.md §Capacity planning, kept in pure functions:
- replicas = target / per_replica x margin 1.2, rounded up, then + 1 spare (N+1) for availability;
  500 QPS at 240 per replica: 2.08 x 1.2 = 2.5 -> 3 if replicas scaled linearly;
- horizontal scaling is not linear: two replicas carry 1.6-1.8x one. The count is the one that
  carries the margin at the stated efficiency (3 replicas carry 2.4x one at 70 %, below 2.5: 4),
  + 1 spare: 5. One count, with the linear figure shown as a step, never two answers;
- water levels: green < 70 %, yellow 70-85 %, red > 85 % of capacity;
- GPU memory = (weights + KV cache) x 1.2 runtime overhead, KV = 2 x layers x kv_heads x head_dim
  x bytes x tokens (7B in FP16: 14 GB of weights).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from loadline.analysis.data.timescale import time_scale
from loadline.analysis.stats.knee import max_compliant_throughput
from loadline.analysis.verdict.signals import Signals
from loadline.core.runsettings import streaming_of
from loadline.core.slo import SLO

MARGIN = 1.2
SPARES = 1
# Each replica after the first adds this share of one replica's throughput: 2 replicas = 1.7x,
# the middle of the seeds' 1.6-1.8x (load balancing, shared gateway, uneven long/short requests).
ADDED_REPLICA_EFFICIENCY = 0.7
GREEN_BELOW, RED_ABOVE = 0.70, 0.85
DTYPE_BYTES = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}


def water_level(load: float, capacity: float) -> dict:
    """Share of capacity in use, and its colour."""
    if capacity <= 0:
        return {"utilisation": None, "level": "red", "note": "no capacity"}
    share = load / capacity
    level = "green" if share < GREEN_BELOW else "yellow" if share <= RED_ABOVE else "red"
    return {"utilisation": round(share, 3), "level": level}


def scaled_capacity(per_replica_qps: float, replicas: int, efficiency: float = ADDED_REPLICA_EFFICIENCY) -> float:
    """What `replicas` carry together when each one after the first adds `efficiency` of one."""
    if replicas <= 0:
        return 0.0
    return per_replica_qps * (1 + (replicas - 1) * efficiency)


def plan(
    target_qps: float,
    per_replica_qps: float,
    margin: float = MARGIN,
    spares: int = SPARES,
    efficiency: float = ADDED_REPLICA_EFFICIENCY,
    forecast_qps: float | None = None,
) -> dict:
    """Replicas for `target_qps`, with the steps shown, the efficiency check and water levels."""
    if target_qps <= 0 or per_replica_qps <= 0:
        raise ValueError("target and per-replica throughput must be > 0")
    if margin < 1 or spares < 0 or not 0 < efficiency <= 1:
        raise ValueError("margin must be >= 1, spares >= 0, efficiency within (0, 1]")
    raw = target_qps / per_replica_qps
    with_margin = raw * margin
    linear = math.ceil(round(with_margin, 9))
    # the one count: enough replicas to carry the margin at the stated efficiency (never fewer than linear)
    serving = next(
        n
        for n in range(linear, 100_000)
        if scaled_capacity(per_replica_qps, n, efficiency) >= round(with_margin * per_replica_qps, 9)
    )
    replicas = serving + spares
    realistic = scaled_capacity(per_replica_qps, replicas, efficiency)
    one_down = scaled_capacity(per_replica_qps, replicas - 1, efficiency) if replicas > 1 else 0.0
    steps = [
        f"{target_qps:g} / {per_replica_qps:g} = {raw:.2f} replicas of load",
        f"x {margin:g} margin = {with_margin:.2f} -> {linear} if replicas added capacity linearly",
    ]
    if serving > linear:
        steps.append(
            f"at {efficiency:.0%} added-replica efficiency {linear} carry "
            f"{scaled_capacity(1.0, linear, efficiency):.2f}x one, below {with_margin:.2f}: "
            f"{serving} serving replicas ({scaled_capacity(1.0, serving, efficiency):.2f}x)"
        )
    steps.append(f"+ {spares} spare (N+{spares}) = {replicas}")
    result = {
        "target_qps": target_qps,
        "per_replica_qps": per_replica_qps,
        "steps": steps,
        "replicas": replicas,
        "serving_replicas": serving,
        "spares": spares,
        "margin": margin,
        "horizontal_efficiency": {
            "assumption": f"each replica after the first adds {efficiency:.0%} of one "
            f"(2 replicas = {1 + efficiency:.1f}x; the field range is 1.6-1.8x)",
            "linear_capacity_qps": round(per_replica_qps * replicas, 2),
            "capacity_qps": round(realistic, 2),
            "capacity_one_down_qps": round(one_down, 2),
        },
        "water_level": water_level(target_qps, realistic),
        "water_level_one_replica_down": water_level(target_qps, one_down),
        "bands": {
            "green": f"< {GREEN_BELOW:.0%}",
            "yellow": f"{GREEN_BELOW:.0%}-{RED_ABOVE:.0%}",
            "red": f"> {RED_ABOVE:.0%}",
        },
    }
    if forecast_qps:
        result["mid_term"] = {
            "forecast_qps": forecast_qps,
            "plan_qps": forecast_qps * 1.5,
            "replicas": plan(forecast_qps * 1.5, per_replica_qps, margin, spares, efficiency)["replicas"],
        }
    return result


@dataclass(frozen=True)
class ModelShape:
    params_b: float = 8.0
    layers: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    dtype: str = "bf16"
    kv_dtype: str | None = None  # default: same as the weights


def gpu_memory(
    shape: ModelShape,
    context_tokens: int,
    concurrency: int,
    runtime_overhead: float = 0.2,
    gpu_memory_gb: float | None = None,
) -> dict:
    """Weights + KV cache for `concurrency` sequences of `context_tokens`, + runtime overhead (GB = 1e9 B)."""
    if shape.dtype not in DTYPE_BYTES or (shape.kv_dtype or shape.dtype) not in DTYPE_BYTES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPE_BYTES)}")
    if (
        min(shape.params_b, shape.layers, shape.kv_heads, shape.head_dim) <= 0
        or context_tokens <= 0
        or concurrency <= 0
    ):
        raise ValueError("model shape, context and concurrency must be > 0")
    weight_bytes = DTYPE_BYTES[shape.dtype]
    kv_bytes = DTYPE_BYTES[shape.kv_dtype or shape.dtype]
    weights = shape.params_b * 1e9 * weight_bytes
    kv_per_token = 2 * shape.layers * shape.kv_heads * shape.head_dim * kv_bytes
    kv = kv_per_token * context_tokens * concurrency
    runtime = (weights + kv) * runtime_overhead
    total = weights + kv + runtime
    out = {
        "shape": asdict(shape),
        "context_tokens": context_tokens,
        "concurrency": concurrency,
        "weights_gb": round(weights / 1e9, 2),
        "kv_bytes_per_token": int(kv_per_token),
        "kv_cache_gb": round(kv / 1e9, 2),
        "runtime_gb": round(runtime / 1e9, 2),
        "total_gb": round(total / 1e9, 2),
        "formula": f"weights + 2 x layers x kv_heads x head_dim x bytes x tokens, + {runtime_overhead:.0%} runtime",
    }
    if gpu_memory_gb:
        out["gpu_memory_gb"] = gpu_memory_gb
        out["water_level"] = water_level(total / 1e9, gpu_memory_gb)
        out["gpus_needed"] = math.ceil(total / 1e9 / (gpu_memory_gb * RED_ABOVE))  # stay <= 85 % (DOMAIN pass criteria)
    return out


def replicas_in_run(run: Any) -> tuple[int, str]:
    """Replicas behind the tested endpoint: the manifest's figure, else the engines the scrape saw."""
    manifest = getattr(run, "manifest", None) or {}
    for holder in (manifest, manifest.get("sim") or {}, manifest.get("config") or {}):
        if isinstance(holder, dict):
            value = holder.get("replicas")
            if isinstance(value, (int, float)) and value >= 1:
                return int(value), "from the manifest"
    running = Signals(getattr(run, "server_metrics", None)).samples("running")
    if len(running):
        engines = int(running.groupby("ts")["series"].nunique().max())
        if engines >= 1:
            return engines, "engines seen in the scraped metrics"
    return 1, "assumed"


def target_of(manifest: dict) -> float | None:
    for holder in (manifest, manifest.get("slo") or {}, manifest.get("config") or {}):
        if isinstance(holder, dict) and isinstance(holder.get("target_qps"), (int, float)) and holder["target_qps"] > 0:
            return float(holder["target_qps"])
    return None


def _slo_of(run: Any):
    options = (getattr(run, "manifest", None) or {}).get("options") or {}
    path = options.get("slo_file") if isinstance(options, dict) else None
    try:
        return SLO.from_file(path) if path else SLO()
    except Exception:  # noqa: BLE001 - a moved SLO file must not cost the plan; defaults are stated
        return SLO()


def per_replica_from_run(
    run: Any, phase_table: pd.DataFrame | None, knee: dict | None, slo: Any = None
) -> tuple[float | None, str]:
    """Per-replica requests/s the run supports (max SLO-compliant, else the knee, else the best tested).

    `phase_table` and `knee` in model time (the run read through loadline.analysis.data.timescale.model_run):
    a x10 compressed run must not pass the SLO 10x too easily."""
    replicas, how = replicas_in_run(run)
    scale = time_scale(getattr(run, "manifest", None))
    model = " in model time" if scale != 1 else ""
    per = f" / {replicas} replica(s) ({how})" + (f", model time of a run at time-scale {scale:g}" if scale != 1 else "")
    best = None
    if phase_table is not None and len(phase_table) and phase_table["rps"].notna().any():
        best = max_compliant_throughput(
            phase_table, slo if slo is not None else _slo_of(run), streaming_of(getattr(run, "manifest", None))
        )
    if best and best.get("found") and best.get("rps"):
        return float(
            best["rps"]
        ) / replicas, f"the highest SLO-compliant throughput{model} ({best['rps']:.2f} req/s){per}"
    if knee and knee.get("found") and knee.get("rps"):
        return float(knee["rps"]) / replicas, f"the knee ({float(knee['rps']):.2f} req/s; no phase met the SLO){per}"
    if phase_table is not None and len(phase_table) and phase_table["rps"].notna().any():
        top = phase_table.loc[phase_table["rps"].idxmax()]
        return (
            float(top["rps"]) / replicas,
            f"the highest tested throughput ({top['label']}: no phase met the SLO, no knee; an upper bound){per}",
        )
    return None, "no throughput measured"


def plan_from_run(
    run: Any, phase_table: pd.DataFrame | None, knee: dict | None, target_qps: float | None = None, slo: Any = None
) -> dict:
    """The plan a report shows: per-replica figure from the run; replicas if a target is known.

    `slo` is the one the report judges by (default: the SLO file named in the run's manifest).
    """
    per_replica, basis = per_replica_from_run(run, phase_table, knee, slo)
    if per_replica is None or per_replica <= 0:
        return {"per_replica_qps": None, "basis": basis, "note": "no plan: the run carried no successful requests"}
    target = target_qps or target_of(getattr(run, "manifest", None) or {})
    replicas, how = replicas_in_run(run)
    out: dict = {
        "per_replica_qps": round(per_replica, 3),
        "basis": basis,
        "replicas_in_run": replicas,
        "replicas_how": how,
    }
    if target:
        out["plan"] = plan(target, per_replica)
    else:
        out["note"] = f"no target rate given: `loadline plan --target-qps Q --per-replica-qps {per_replica:.3g}`"
    return out
