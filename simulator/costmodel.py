"""How long one engine step takes: the roofline model of REFERENCE-serving.md, as pure functions.

A step runs every scheduled token at once (decode tokens of the running batch plus prefill chunks):

    memory_s  = (W + kv_tokens_read * KV_B + idle_slot_cells * SLOT_B) / (memory_efficiency * HBM_BW * TP)
    compute_s = (2 * P * step_tokens + A * attention_cells) / (compute_efficiency * PEAK * TP)
    step_s    = (max(memory_s, compute_s) + layers * (per_layer_overhead + tp_comm) + step_overhead
                 + sequences * per_seq_overhead) * latency_spike / time_scale

W = weight bytes, KV_B = KV bytes per token, P = parameters, TP = tensor_parallel_size, A = attention
FLOPs per (token, context token) pair, attention_cells = those pairs in the step: a prefill chunk of n
tokens after s already computed attends n * s + n * (n + 1) / 2 cells (causal), a decode token its
context. Decode of a small batch is memory-bound (weights are read once per step, however many sequences share it), so
ITL grows with the context each sequence reads (attention: KV bytes read per step grow with the
total context in the batch) and with the per-sequence work a real engine pays every step
(sampling, detokenising, scheduling: `per_seq_overhead_us`); prefill is compute-bound, so TTFT
grows with prompt length. The per-sequence term is what makes a batch of short prompts bend like
published sweeps (configs/sim/*.toml cite them: a 0.5B model on an L4, ITL p50 5.1 ms at 1 stream
and 7.1 ms at 32; Llama-3.1-8B on an A100, flat to 8 streams, then per-token latency climbs).
Attention FLOPs (quadratic in a prompt's length) are A; the shipped profiles set A = 0: below ~8k
context they are small next to the 2 * P linear-layer FLOPs. A twin fitted on a small model sets it
(analysis/twin/regress.py).

SLOT_B (`slot_span_kv_bytes_per_cell`) is llama.cpp's KV layout: a buffer per slot, and a batch's
attention runs over every slot between its lowest and highest id, idle ones included (masked), each
over the batch's context padded to 256 cells. Which slots a batch holds is llama-server's choice
(the idle slot whose cached prompt shares the longest prefix, else the least recently used); the model
takes b busy slots as b of the N drawn at random, whose span holds (b - 1)(N - b)/(b + 1) idle slots
on average: llama-server's own logs of 8-slot runs read 2.1-2.3 idle slots beside a batch of 2 (the
formula: 2.0), 2.6-2.8 beside 3 (2.5), 0.6-0.7 beside 7 (0.75).
"""

from __future__ import annotations

from loadline.simulator.config import GIB, SimConfig

# llama.cpp pads the cells a batch's attention reads to a multiple of 256 (llama-kv-cache.cpp, get_n_kv)
LLAMACPP_KV_PAD = 256


def memory_seconds(config: SimConfig, kv_tokens_read: int, idle_cells: float = 0.0) -> float:
    bytes_read = (
        config.weights_gib * GIB
        + kv_tokens_read * config.kv_bytes_per_token
        + idle_cells * config.slot_span_kv_bytes_per_cell
    )
    bandwidth = config.memory_efficiency * config.hbm_bandwidth_gbs * 1e9 * config.tensor_parallel_size
    return bytes_read / bandwidth


def attention_cells(start: int, tokens: int) -> int:
    """(token, context token) pairs a chunk of `tokens` attends after `start` computed ones (causal)."""
    return tokens * start + tokens * (tokens + 1) // 2


def idle_slots_in_span(sequences: float, slots: int) -> float:
    """Idle slots between the lowest and highest of `sequences` busy slots drawn at random among `slots`:
    E[max - min + 1] - b = (b - 1)(N + 1)/(b + 1) + 1 - b = (b - 1)(N - b)/(b + 1)."""
    b, n = sequences, max(slots, sequences)
    return (b - 1) * (n - b) / (b + 1) if b > 1 else 0.0


def idle_slot_cells(sequences: float, slots: int, kv_tokens_read: float) -> float:
    """KV cells a step of `sequences` among `slots` slots reads in its idle slots: each idle slot of the
    span over the batch's mean context, padded as llama.cpp pads it. A fractional `sequences` (the twin's
    fit reads time-averaged batches) is taken as it is."""
    if sequences <= 1:
        return 0.0
    mean = kv_tokens_read / sequences
    padded = max(LLAMACPP_KV_PAD, -(-mean // LLAMACPP_KV_PAD) * LLAMACPP_KV_PAD)
    return idle_slots_in_span(sequences, slots) * padded


def compute_seconds(config: SimConfig, step_tokens: int, cells: int = 0) -> float:
    flops = 2.0 * config.params_b * 1e9 * step_tokens + config.attention_flops_per_cell * cells
    return flops / (config.compute_efficiency * config.peak_tflops * 1e12 * config.tensor_parallel_size)


def fixed_seconds(config: SimConfig) -> float:
    per_layer = config.num_layers * (config.per_layer_overhead_us + config.tp_comm_us_per_layer) * 1e-6
    return per_layer + config.step_overhead_ms * 1e-3


def sequence_seconds(config: SimConfig, sequences: int) -> float:
    """Per-sequence work of one step: sampling, detokenising and scheduling each sequence."""
    return max(sequences, 0) * config.per_seq_overhead_us * 1e-6


def step_seconds(config: SimConfig, step_tokens: int, kv_tokens_read: int, sequences: int = 1, cells: int = 0) -> float:
    """Unscaled model time of one step (seconds on the simulated GPU) running `sequences` sequences whose
    tokens attend `cells` (token, context token) pairs."""
    idle = (
        idle_slot_cells(sequences, config.max_num_seqs, kv_tokens_read) if config.slot_span_kv_bytes_per_cell else 0.0
    )
    return (
        max(memory_seconds(config, kv_tokens_read, idle), compute_seconds(config, step_tokens, cells))
        + fixed_seconds(config)
        + sequence_seconds(config, sequences)
    )


def single_stream_estimate(config: SimConfig, prompt_tokens: int, context: int) -> tuple[float, float]:
    """(TTFT, ITL) in model seconds for one request alone on the engine: used by docs and tests."""
    chunk = config.max_num_batched_tokens
    ttft = config.request_overhead_ms * 1e-3
    done = 0
    while done < prompt_tokens:
        n = min(chunk, prompt_tokens - done)
        ttft += step_seconds(config, n, done + n, cells=attention_cells(done, n))
        done += n
    itl = step_seconds(config, 1, context, cells=context)
    return ttft, itl
