"""`loadline twin fit`: a simulator profile whose engine reproduces a run, each number with its evidence.

Pure: a loaded run in, a `TwinProfile` out. The cost model is the simulator's (simulator/costmodel.py),
fitted by regress.py and re-expressed on a unit machine by cost_keys.py. The
engine's configuration (cap, KV blocks, block size) is read where its metrics state it, inferred
where they imply it, and otherwise assumed and said so (docs/twin.md lists which is which).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from loadline.analysis.data.load import RunData
from loadline.analysis.data.timescale import model_run
from loadline.analysis.twin import cost_keys, engine_config, workload
from loadline.analysis.twin.decode_steps import decode_steps
from loadline.analysis.twin.model import BOUNDED, MEASURED, FittedRange, Parameter, TwinProfile
from loadline.analysis.twin.overlap import in_flight_at, mean_overlap
from loadline.analysis.twin.regress import DecodeFit, PrefillFit, fit_decode, fit_prefill
from loadline.analysis.verdict.capacity import replicas_in_run
from loadline.analysis.verdict.signals import Signals
from loadline.core.errors import UsageError
from loadline.core.records import Status

WALL_ITL_MS = 2.0  # a prediction's light-load inter-token gap in wall time, at least (see _time_scale)
MIN_REQUESTS = 20  # fewer usable requests fit nothing trustworthy
CAP_RATIO = 1.5  # measured caps this far apart are different engine setups


def _requests(run: RunData) -> pd.DataFrame:
    req = run.requests
    ok = req[(req["status"].astype(str) == Status.OK) & req["ttft_ms"].notna() & req["e2e_ms"].notna()].copy()
    if len(ok) < MIN_REQUESTS:
        raise UsageError(f"{run.path}: {len(ok)} successful streamed requests; a twin needs at least {MIN_REQUESTS}")
    ok["t0"] = ok["start_wall"].astype(float)
    ok["tf"] = ok["t0"] + ok["ttft_ms"].astype(float) / 1e3
    ok["te"] = ok["t0"] + ok["e2e_ms"].astype(float) / 1e3
    ok["prompt"] = ok["prompt_tokens"].astype(float).fillna(0.0)
    ok["output"] = ok["output_tokens"].astype(float).fillna(0.0)
    ok["step_s"] = decode_steps(run, ok)
    return ok.reset_index(drop=True)


def _engine(signals: Signals) -> str:
    dialects = signals.engines()
    if dialects:
        return dialects[0]
    return "vllm" if signals.has("ttft") else "unknown"


def _before_queue_s(signals: Signals, req: pd.DataFrame) -> float | None:
    """The API server's time before the engine's queue, where the engine's histograms say it: its TTFT
    (from arrival) less its queue time and its prefill time (from scheduling to the first token)."""
    if not all(signals.has(c) for c in ("ttft", "queue_time", "prefill_time")):
        return None
    start, end = float(req["t0"].min()) - 1, float(req["te"].max()) + 1
    means = [signals.histogram(c, start, end) for c in ("ttft", "queue_time", "prefill_time")]
    if any(h is None or not h.count or h.mean is None for h in means):
        return None
    ttft, queue, prefill = (float(h.mean) for h in means)  # type: ignore[union-attr, arg-type]
    return max(0.0, ttft - queue - prefill)


def _outside_engine_s(signals: Signals, req: pd.DataFrame) -> tuple[float, str]:
    """Client TTFT minus the engine's own (time split): the client and network share, which a twin run pays again."""
    if not signals.has("ttft"):
        return (
            0.0,
            "the engine exports no TTFT histogram: the time outside it is not separable, all of it is in request_overhead_ms",
        )
    hist = signals.histogram("ttft", float(req["t0"].min()) - 1, float(req["te"].max()) + 1)
    if hist is None or not hist.count or hist.mean is None:
        return 0.0, "no engine TTFT observations: time outside the engine not separable"
    outside = max(0.0, float(req["ttft_ms"].mean()) / 1e3 - hist.mean)
    return outside, f"client TTFT mean {req['ttft_ms'].mean():.1f} ms - engine TTFT mean {hist.mean * 1e3:.1f} ms"


@dataclass(frozen=True)
class _Sample:
    """One run's evidence, in model time: its usable requests, its engine's metrics, and the batch and
    KV each request's decode shared (overlaps are taken within a run: two runs never share an engine)."""

    model: RunData
    req: pd.DataFrame
    signals: Signals
    batch: np.ndarray
    kv: np.ndarray


def _sample(model: RunData, replicas: int) -> _Sample:
    req = _requests(model)
    ctx = (req["prompt"] + req["output"] / 2).to_numpy(float)
    tf, te = req["tf"].to_numpy(float), req["te"].to_numpy(float)
    batch = mean_overlap(tf, te, tf, te, np.ones(len(req))) / replicas
    kv = mean_overlap(tf, te, tf, te, ctx) / replicas
    return _Sample(model, req, Signals(model.server_metrics), batch, kv)


def _decode(samples: list[_Sample], slots: int = 0) -> DecodeFit:
    """The decode fit over every run's usable requests; `slots` > 1 (an engine with a KV buffer per slot,
    its cap known) lets the fit try the idle slots' cells."""
    itl, batch, kv = [], [], []
    for s in samples:
        usable = (
            (s.req["output"].to_numpy() >= 3)
            & s.req["step_s"].notna().to_numpy()
            & (s.req["te"].to_numpy(float) > s.req["tf"].to_numpy(float))
        )
        itl.append(s.req["step_s"].to_numpy(float)[usable])
        batch.append(s.batch[usable])
        kv.append(s.kv[usable])
    usable_n = sum(len(x) for x in itl)
    total = sum(len(s.req) for s in samples)
    if usable_n < MIN_REQUESTS:
        raise UsageError(f"{total} requests, {usable_n} with 3+ tokens and inter-token gaps: too few to fit decode")
    return fit_decode(np.concatenate(itl), np.concatenate(batch), np.concatenate(kv), slots)


def _unqueued(
    req: pd.DataFrame, replicas: int, cap: int | None
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """One run's prefill evidence (TTFT, prompt, batch and KV each prompt waited beside) and two masks:
    the prompts that did not queue and were prefilled alone, and the run's least loaded quarter."""
    t0, tf, te = (req[c].to_numpy(float) for c in ("t0", "tf", "te"))
    ctx = (req["prompt"] + req["output"] / 2).to_numpy(float)
    columns = {
        "ttft": req["ttft_ms"].to_numpy(float) / 1e3,
        "prompt": req["prompt"].to_numpy(float),
        "batch": mean_overlap(t0, tf, tf, te, np.ones(len(req))) / replicas,
        "kv": mean_overlap(t0, tf, tf, te, ctx) / replicas,
    }
    in_flight = in_flight_at(t0, t0, te) / replicas  # this request included
    # Alone in its prefill: a prompt prefilled in the same steps as another's shows both prompts' cost,
    # which the twin's scheduler adds by itself (one request's own window always overlaps itself once).
    shared = mean_overlap(t0, tf, t0, tf, np.ones(len(req))) - 1.0
    alone = (in_flight <= (cap if cap is not None else np.inf)) & (shared < 0.05)
    return columns, alone, in_flight <= np.quantile(in_flight, 0.25)


def _prefill(
    samples: list[_Sample],
    replicas: int,
    cap: int | None,
    decode: DecodeFit,
    before_queue_s: float | None = None,
    chunk: int = 0,
) -> PrefillFit:
    evidence = [_unqueued(s.req, replicas, cap) for s in samples]
    strict = sum(int(alone.sum()) for _, alone, _ in evidence) >= MIN_REQUESTS
    picked = {
        name: np.concatenate([cols[name][alone if strict else quiet] for cols, alone, quiet in evidence])
        for name in ("ttft", "prompt", "batch", "kv")
    }
    return fit_prefill(picked["ttft"], picked["prompt"], picked["batch"], picked["kv"], decode, before_queue_s, chunk)


def _range(samples: list[_Sample], cap: int | None) -> FittedRange:
    users, max_rps = [], 0.0
    for s in samples:
        phases, req = s.model.phases, s.req
        most = pd.to_numeric(phases.get("target_users", pd.Series(dtype=float)), errors="coerce").max()
        if pd.isna(most):
            most = in_flight_at(req["t0"].to_numpy(), req["t0"].to_numpy(), req["te"].to_numpy()).max()
        users.append(float(most))
        for _, ph in phases.iterrows():
            start, end = float(ph["start_wall"]), float(ph["end_wall"])
            done = ((req["te"] >= start) & (req["te"] < end)).sum()
            if end > start:
                max_rps = max(max_rps, done / (end - start))
    req = pd.concat([s.req for s in samples], ignore_index=True)
    batch = np.concatenate([s.batch for s in samples])
    p = req["prompt"].to_numpy(float)
    o = req["output"].to_numpy(float)
    return FittedRange(
        max_users=max(users),
        max_rps=round(max_rps, 3),
        max_running=round(float(np.quantile(batch, 0.99)), 2),
        prompt_tokens=(int(np.quantile(p, 0.05)), int(np.quantile(p, 0.95))),
        output_tokens=(int(np.quantile(o, 0.05)), int(np.quantile(o, 0.95))),
        cap=cap,
    )


def _one(values: list[Any], what: str, paths: list[str]) -> Any:
    """The value every run agrees on; runs of different engine setups are not one twin."""
    if any(v != values[0] for v in values[1:]):
        shown = ", ".join(f"{path}: {v}" for path, v in zip(paths, values))
        raise UsageError(f"the runs differ in {what} ({shown}): fit each setup on its own")
    return values[0]


def _cap(samples: list[_Sample], replicas: int, paths: list[str]) -> tuple[int | None, Parameter]:
    """The cap the runs show: measured wins over a bound. Measured caps that differ a little (an
    inferred cap is the most seen running while others waited: a scrape may miss the top) give the
    largest; 1.5x apart they are different setups (the ratio uncertainty.py calls far from fitted)."""
    caps = [engine_config.cap(s.signals, replicas, float(np.quantile(s.batch, 0.99))) for s in samples]
    measured = [(cap, param, path) for (cap, param), path in zip(caps, paths) if param.grade == MEASURED]
    if not measured:
        return max(caps, key=lambda c: float(c[1].value))
    values = [int(cap) for cap, _, _ in measured]  # type: ignore[arg-type]
    if max(values) >= CAP_RATIO * min(values):
        shown = ", ".join(f"{path}: {cap}" for cap, _, path in measured)
        raise UsageError(f"the runs' engines show different batch caps ({shown}): fit each setup on its own")
    cap, param, _ = max(measured, key=lambda m: int(m[0]))  # type: ignore[arg-type]
    if len(set(values)) > 1:
        param = Parameter(param.name, param.value, param.grade, f"{param.evidence}; the largest of {sorted(values)}")
    return cap, param


def _chunk(samples: list[_Sample], engine: str) -> tuple[int, str, str]:
    """The prefill chunk (engine_config.prefill_chunk), each run read against its own prompts: the
    largest bound any run's step sizes show (a run whose prompts were never split shows none), else
    the first run's answer."""
    answers = [engine_config.prefill_chunk(s.model.server_metrics, engine, int(s.req["prompt"].max())) for s in samples]
    bounded = [answer for answer in answers if answer[1] == BOUNDED]
    return max(bounded, key=lambda answer: answer[0]) if bounded else answers[0]


def _kv_config(configs: list[dict[str, str]], paths: list[str]) -> dict[str, str]:
    """The runs' KV-cache configuration. The pool's size may move a little between restarts of one
    setup (vLLM sizes it from the memory free at start): the smallest is kept, unless the pools are
    CAP_RATIO apart. Every other key must agree."""
    blocks = "num_gpu_blocks"
    _one([{k: v for k, v in c.items() if k != blocks} for c in configs], "KV-cache configuration", paths)
    sizes = [c.get(blocks) for c in configs]
    numbers = [float(size) for size in sizes if size is not None]
    if len(numbers) < len(sizes) or (numbers and max(numbers) >= CAP_RATIO * min(numbers)):
        _one(sizes, "KV-cache pool (num_gpu_blocks)", paths)  # refuses unless all alike
    return min(configs, key=lambda c: float(c.get(blocks, 0)))


def _mean(values: list[float], weights: list[int]) -> float:
    # one run: its own value, to the bit (an average of one can come out one ulp off)
    return values[0] if len(values) == 1 else float(np.average(values, weights=weights))


def fit(runs: RunData | Sequence[RunData]) -> TwinProfile:
    """The twin of one run, or of several runs of one engine setup pooled: each is a sample of the host
    as much as of the engine (a busy spell, a slow step), and a fit on several is tied to none of them."""
    runs = [runs] if isinstance(runs, RunData) else list(runs)
    if not runs:
        raise UsageError("no run to fit")
    paths = [str(run.path) for run in runs]
    models = [model_run(run) for run in runs]  # model time: a time-scaled run's twin runs at its model's speed
    replica_counts = [replicas_in_run(model) for model in models]
    replicas = _one([r for r, _ in replica_counts], "replicas", paths)
    replicas_how = replica_counts[0][1]
    samples = [_sample(model, replicas) for model in models]
    engines = [_engine(s.signals) for s in samples]
    named = [(e, path) for e, path in zip(engines, paths) if e != "unknown"]  # a run without a scrape names none
    engine = _one([e for e, _ in named], "engine", [path for _, path in named]) if named else "unknown"
    config = _kv_config([s.signals.cache_config() for s in samples], paths)
    weights = [len(s.req) for s in samples]
    req = pd.concat([s.req for s in samples], ignore_index=True)
    cap, cap_param = _cap(samples, replicas, paths)
    slots = cap if engine in engine_config.SLOT_KV_ENGINES and cap else 0
    decode = _decode(samples, slots)
    outside = [_outside_engine_s(s.signals, s.req) for s in samples]
    outside_s = _mean([o for o, _ in outside], weights)
    outside_how = outside[0][1] if len(samples) == 1 else f"the mean of {len(samples)} runs; the first: {outside[0][1]}"
    queued = [_before_queue_s(s.signals, s.req) for s in samples]
    engine_before_queue = None if any(q is None for q in queued) else _mean(queued, weights)  # type: ignore[arg-type]
    before_queue = None if engine_before_queue is None else outside_s + engine_before_queue
    chunk = _chunk(samples, engine)
    prefill = _prefill(samples, replicas, cap, decode, before_queue, chunk[0])
    params = cost_keys.cost_parameters(decode, prefill, outside_s, outside_how, engine_before_queue is not None, slots)
    params.append(cap_param)
    params += engine_config.kv(config, req, cap or int(cap_param.value))
    params += engine_config.output_lengths(req)
    params += engine_config.fixed(engine, replicas, replicas_how, config, params, chunk)
    loads = [workload.of_manifest(run.manifest) for run in runs]
    notes = []
    if len(runs) > 1:
        notes.append(f"fitted on {len(runs)} runs pooled: {', '.join(paths)}")
        if any(load != loads[0] for load in loads[1:]):
            notes.append(f"the runs applied different loads: predictions replay the first's ({paths[0]})")
    return TwinProfile(
        run=", ".join(paths),
        engine=engine,
        replicas=replicas,
        parameters=params,
        fitted_range=_range(samples, cap),
        workload={**loads[0], "twin_time_scale": _time_scale(req)},
        regressions={
            "decode": {
                "base_ms": decode.base_s * 1e3,
                "per_seq_us": decode.per_seq_s * 1e6,
                "per_kv_token_ns": decode.per_kv_token_s * 1e9,
                "per_idle_slot_cell_ns": decode.per_idle_cell_s * 1e9,
                "r2": decode.r2,
                "n": decode.n,
                "median_rel_residual": decode.rel_residual,
            },
            "prefill": {
                "weights_ms": prefill.weights_s * 1e3,
                "per_token_us": prefill.per_token_s * 1e6,
                "per_cell_ns": prefill.per_cell_s * 1e9,
                "before_queue_ms": prefill.before_queue_s * 1e3,
                "n": prefill.n,
                "mean_rel_residual": prefill.rel_residual,
                "compute_bound_share": prefill.compute_bound_share,
            },
        },
        notes=notes,
    )


def _time_scale(req: pd.DataFrame) -> float:
    """How much a prediction may compress time: 5 (the Makefile demo's choice on a 2-core machine), less for
    a fast engine, so its light-load inter-token gap (p10 of the requests' medians) stays >= WALL_ITL_MS of
    wall time: the client's and the simulator's own per-token costs (a fraction of a millisecond on a busy
    host) must stay small beside it. Below 1 the twin runs slower than real time (a power of two, x0.25 at
    the slowest: a prediction of a 5-minute run then takes 20)."""
    itl = float(req["itl_p50_ms"].quantile(0.1)) if req["itl_p50_ms"].notna().any() else 0.0
    ratio = itl / WALL_ITL_MS
    if ratio >= 1:
        return float(min(5, math.floor(ratio)))
    return float(2.0 ** max(-2, round(math.log2(max(ratio, 1e-6)))))  # never slower than x0.25: it must end


def summary_rows(profile: TwinProfile) -> list[dict[str, Any]]:
    return [
        {"parameter": p.name, "value": p.value, "grade": p.grade, "evidence": p.evidence} for p in profile.parameters
    ]
