"""The engine's configuration as the twin reads it: the batch cap, the KV pool, the prefill chunk, the
reply lengths, and the unit machine's fixed keys. Each value is `measured` where the engine's metrics
state it, `bounded` where they only imply a limit, `assumed` (and said so) where the run cannot show it.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from loadline.analysis.twin.cost_keys import BANDWIDTH, FLOPS, GIB
from loadline.analysis.twin.model import ASSUMED, BOUNDED, FITTED, MEASURED, Parameter
from loadline.analysis.verdict.signals import Signals

DIALECT_QUIRKS = {"llama.cpp": "llamacpp-api", "vllm": ""}  # engine -> the simulator quirk that speaks its metrics
# engines that keep a KV buffer per slot and run a batch's attention over the span of its slots
# (llama-server with --parallel: kv_unified off; simulator/costmodel.py's idle_slot_cells)
SLOT_KV_ENGINES = ("llama.cpp",)
UNEXPORTED_CONTEXT = 8192  # the simulator's max_model_len default (simulator/config.py)
DEFAULT_CHUNK = {
    "llama.cpp": 2048,
    "vllm": 8192,
}  # each engine's default prefill batch (n_batch; max_num_batched_tokens)


def cap(signals: Signals, replicas: int, max_running: float) -> tuple[int | None, Parameter]:
    cap = signals.running_cap()
    most = float(signals.gauge_series("running").max()) if signals.has("running") else 0.0
    if cap is not None and cap.value < most:
        # Requests waited while fewer than the most ever seen ran: something else (KV blocks, the token
        # budget) held them back; the cap itself is only bounded from below.
        max_running = max(max_running, most / replicas)
        cap = None
    if cap is not None:
        per_replica = max(1, round(cap.value / replicas))
        return per_replica, Parameter(
            "max_num_seqs", per_replica, MEASURED, f"{cap.how}: {cap.value:g} over {replicas} replica(s)"
        )
    at_least = max(1, math.ceil(max_running))
    value = max(1024, at_least)
    return None, Parameter(
        "max_num_seqs",
        value,
        BOUNDED,
        f"no scrape showed requests waiting while the most ran (a queue behind a full batch): the cap is at least {at_least}; "
        f"set to {value}, i.e. no cap the run could see",
    )


def kv(config: dict[str, str], req: pd.DataFrame, cap: int) -> list[Parameter]:
    if "num_gpu_blocks" in config and "block_size" in config:
        blocks, size = int(float(config["num_gpu_blocks"])), int(float(config["block_size"]))
        how = "the engine's cache_config_info metric"
        return [
            Parameter("num_gpu_blocks", blocks, MEASURED, f"{how}: num_gpu_blocks={blocks}"),
            Parameter("block_size", size, MEASURED, f"{how}: block_size={size}"),
            Parameter(
                "max_model_len", blocks * size, BOUNDED, "the whole KV pool (the engine's own limit is not exported)"
            ),
        ]
    # No pool in the metrics (llama.cpp, TGI, SGLang): KV never limits the twin below its cap, as on
    # llama.cpp, whose slots each hold their context from the start. Room for `cap` sequences of the
    # longest context the twin serves, which must outlast a longer-prompt what-if, not just the fitted
    # run's requests: a pool sized on those (1,128 tokens a slot) filled with 1,000-2,000-token prompts at
    # 4 users and the twin named kv-cache where llama.cpp was compute-bound.
    longest = int((req["prompt"] + req["output"]).max())
    size = 16
    context = max(UNEXPORTED_CONTEXT, 2 * longest)
    blocks = cap * math.ceil(context / size)
    return [
        Parameter(
            "num_gpu_blocks",
            blocks,
            ASSUMED,
            f"no KV pool size in the metrics: room for {cap} sequences of {context} tokens each, so KV never "
            "limits the twin; a what-if that fills the KV cache is not predicted",
        ),
        Parameter("block_size", size, ASSUMED, "not exported; vLLM's default"),
        Parameter(
            "max_model_len",
            context,
            ASSUMED,
            f"the engine's context is not exported: {UNEXPORTED_CONTEXT} (the simulator's default) or twice the "
            f"longest request ({longest} tokens), whichever is more",
        ),
    ]


def output_lengths(req: pd.DataFrame) -> list[Parameter]:
    out = req["output"][req["output"] > 0]
    finish = req.get("finish_reason", pd.Series(dtype=str)).astype(str)
    stopped = (finish == "stop").mean() if len(finish) else 0.0
    if len(out) == 0 or stopped < 0.5:
        top = int(out.max()) if len(out) else 256
        text = f"{1 - stopped:.0%} of the replies ran to max_tokens: the engine's own reply length is not identified"
        return [
            Parameter(
                "output_len_mean",
                float(8 * top),
                ASSUMED,
                text + f"; set far above the longest ({top}), so max_tokens decides",
            ),
            Parameter("output_len_sigma", 0.1, ASSUMED, text),
            Parameter("output_len_max", 8 * top, ASSUMED, text),
        ]
    logs = np.log(out.to_numpy(dtype=float))
    sigma = float(np.clip(logs.std(), 0.05, 2.0))
    mean = float(out.mean())
    how = f"{len(out)} replies, {stopped:.0%} ended by the engine (stop); lognormal by moments of log length"
    return [
        Parameter("output_len_mean", round(mean, 2), FITTED, how),
        Parameter("output_len_sigma", round(sigma, 3), FITTED, how),
        Parameter(
            "output_len_max",
            max(2048, int(out.max())),
            ASSUMED,
            "the simulator's clip; the client's max_tokens caps below it",
        ),
    ]


def prefill_chunk(table: pd.DataFrame | None, engine: str, longest_prompt: int) -> tuple[int, str, str]:
    """The prefill chunk (tokens per step): bounded by the step-size histogram when prompts outgrew every step."""
    default = DEFAULT_CHUNK.get(engine, 8192)
    assumed = (default, ASSUMED, f"the prefill chunk is not exported and no step showed it; {engine}'s default")
    if table is None or table.empty or "metric" not in table:
        return assumed
    rows = table[table["metric"] == "vllm:iteration_tokens_total_bucket"]
    if rows.empty:
        return assumed
    last = rows[rows["ts"] == rows["ts"].max()]
    les = last["labels"].map(lambda t: json.loads(str(t)).get("le", "+Inf"))
    counts = pd.Series(last["value"].to_numpy(float), index=les.to_numpy())
    finite = counts[[le != "+Inf" for le in counts.index]]
    finite.index = finite.index.astype(float)
    finite = finite.sort_index()
    total = float(counts.get("+Inf", finite.max()))
    full = finite[finite >= total]
    if full.empty or longest_prompt <= full.index[0]:
        return assumed
    upper = float(full.index[0])
    below = finite[finite.index < upper]
    lower = float(below.index[-1]) if len(below) else 0.0
    chunk = 1 << max(0, math.ceil(math.log2(max(lower, 1.0))))
    chunk = int(min(max(chunk, lower + 1), upper))
    return (
        chunk,
        BOUNDED,
        (
            f"every engine step held <= {upper:g} tokens though prompts reached {longest_prompt}: prompts were split; "
            f"the largest steps held > {lower:g}: the chunk is taken as {chunk}, the next power of two"
        ),
    )


def fixed(
    engine: str,
    replicas: int,
    replicas_how: str,
    config: dict[str, str],
    params: list[Parameter],
    chunk: tuple[int, str, str],
) -> list[Parameter]:
    """The unit machine and what the run cannot show."""
    values = {p.name: p.value for p in params}
    pool_gib = float(values["num_gpu_blocks"]) * float(values["block_size"]) * float(values["kv_bytes_per_token"]) / GIB
    memory = (float(values["weights_gib"]) + 0.1 + pool_gib) / 0.7  # FB used stays below the SLO's 85 %
    chunk_tokens, chunk_grade, chunk_how = chunk  # prefill_chunk's answer
    caching = config.get("enable_prefix_caching", "True") == "True"
    unit = "the twin's unit machine: each fitted time maps onto one key"
    return [
        Parameter("model_name", "loadline/twin", ASSUMED, "a name; the client reads it from /v1/models"),
        Parameter(
            "replicas", replicas, MEASURED if replicas_how != "assumed" else ASSUMED, f"replicas: {replicas_how}"
        ),
        Parameter("hbm_bandwidth_gbs", BANDWIDTH / 1e9, ASSUMED, unit),
        Parameter("memory_efficiency", 1.0, ASSUMED, unit),
        Parameter("peak_tflops", FLOPS / 1e12, ASSUMED, unit),
        Parameter("compute_efficiency", 1.0, ASSUMED, unit),
        Parameter("num_layers", 1, ASSUMED, unit),
        Parameter("per_layer_overhead_us", 0.0, ASSUMED, unit + " (per-layer time is in step_overhead_ms)"),
        Parameter("tp_comm_us_per_layer", 0.0, ASSUMED, unit),
        Parameter("tensor_parallel_size", 1, ASSUMED, unit),
        Parameter("activation_gib", 0.1, ASSUMED, unit),
        Parameter(
            "gpu_memory_gib",
            round(memory, 3),
            ASSUMED,
            "sized so simulated memory use stays at 70 %: the run's memory is not modelled",
        ),
        Parameter("max_num_batched_tokens", chunk_tokens, chunk_grade, chunk_how),
        # The twin's run is read by the same verdict as the real one: it must speak the engine's metrics.
        # vLLM counts a request that arrived during a step as waiting; llama-server defers only one that
        # found every slot busy, so a vLLM-speaking twin of a prefill-bound llama.cpp read "scheduler"
        # (requests waiting in half the scrapes at 2 users of 8 slots) where the engine read "compute".
        Parameter(
            "quirks",
            DIALECT_QUIRKS.get(engine, ""),
            MEASURED if engine in DIALECT_QUIRKS else ASSUMED,
            f"the twin exports {engine}'s metrics, as the run scraped them"
            if engine in DIALECT_QUIRKS
            else "the engine's metrics are not known: vLLM's (the simulator's own)",
        ),
        Parameter(
            "enable_prefix_caching",
            caching,
            MEASURED if config else ASSUMED,
            "cache_config_info" if config else "assumed on",
        ),
    ]
