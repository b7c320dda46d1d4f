"""The fitted times as simulator profile keys, each with its evidence.

The twin's profile runs on a "unit machine" (docs/twin.md): bandwidth 1,000 GB/s and compute
1,000 TFLOP/s at efficiency 1, so each fitted time maps onto one key: weights_gib carries the weight
read M0, kv_bytes_per_token the time per KV token read K, slot_span_kv_bytes_per_cell the time per
idle slot's KV cell I, params_b the compute per prefill token C, attention_flops_per_cell the
attention per (token, context token) pair A, step_overhead_ms the rest of an empty step F,
per_seq_overhead_us the per-sequence term S.
"""

from __future__ import annotations

from loadline.analysis.twin.decode_steps import STALL_RATIO
from loadline.analysis.twin.model import ASSUMED, BOUNDED, FITTED, MEASURED, Parameter
from loadline.analysis.twin.regress import DecodeFit, PrefillFit

BANDWIDTH = 1e12  # bytes/s of the twin's unit machine (hbm_bandwidth_gbs 1000, memory_efficiency 1)
FLOPS = 1e15  # FLOP/s of the twin's unit machine (peak_tflops 1000, compute_efficiency 1)
GIB = 1 << 30


def cost_parameters(
    decode: DecodeFit,
    prefill: PrefillFit,
    outside_s: float,
    outside_how: str,
    measured_before_queue: bool = False,
    slots_tried: int = 0,
) -> list[Parameter]:
    d = f"decode: mean inter-token gap (stalls over {STALL_RATIO:g}x the median left out) of {decode.n} requests vs the batch and KV they shared (R2 {decode.r2:.2f}, median residual {decode.rel_residual:.0%})"
    p = f"prefill: TTFT of {prefill.n} requests that did not queue vs their prompt tokens (mean residual {prefill.rel_residual:.0%})"
    per_token = Parameter(
        "params_b",
        round(prefill.per_token_s * FLOPS / 2e9, 6),
        FITTED,
        f"{p}: {prefill.per_token_s * 1e6:.3g} us per prefill token",
    )
    if prefill.compute_bound_share < 0.05:
        per_token = Parameter(
            "params_b",
            per_token.value,
            BOUNDED,
            f"{p}: every prompt's prefill was hidden under the step's fixed cost, so only an upper bound ({prefill.per_token_s * 1e6:.3g} us/token) is known",
        )
    request_overhead = max(0.0, prefill.before_queue_s - outside_s)
    attention = Parameter(
        "attention_flops_per_cell",
        round(prefill.per_cell_s * FLOPS, 3),
        FITTED,
        (
            f"{p}: the cost per token bends up with the prompt's length, {prefill.per_cell_s * 1e9:.3g} ns per (token, context token) pair attended; the bent line predicted each half of the prompts better than a straight one fitted on the other half"
            if prefill.per_cell_s > 0
            else f"{p}: a line bent by the prompt's length (attention) predicted held-out prompts no better than a straight one, so none is added"
        ),
    )
    return [
        Parameter(
            "weights_gib",
            round(prefill.weights_s * BANDWIDTH / GIB, 6),
            FITTED,
            f"{p}: {prefill.weights_s * 1e3:.3g} ms of the empty step is hidden under a compute-bound prefill (the max of memory and compute)",
        ),
        Parameter(
            "step_overhead_ms",
            round((decode.base_s - prefill.weights_s) * 1e3, 4),
            FITTED,
            f"{d}: empty step {decode.base_s * 1e3:.3g} ms minus the weight read",
        ),
        Parameter(
            "per_seq_overhead_us", round(decode.per_seq_s * 1e6, 3), FITTED, f"{d}: slope per sequence in the batch"
        ),
        Parameter(
            "kv_bytes_per_token",
            max(1, round(decode.per_kv_token_s * BANDWIDTH)),
            FITTED,
            f"{d}: {decode.per_kv_token_s * 1e9:.3g} ns per KV token read",
        ),
        per_token,
        attention,
        _slot_span(decode, d, slots_tried),
        Parameter(
            "request_overhead_ms",
            round(request_overhead * 1e3, 3),
            MEASURED if measured_before_queue else FITTED,
            (
                f"the engine's histograms: TTFT less queue time less prefill time, means ({request_overhead * 1e3:.3g} ms)"
                if measured_before_queue
                else f"{p}: {prefill.before_queue_s * 1e3:.3g} ms before the queue, less {outside_s * 1e3:.3g} ms outside the engine ({outside_how})"
            ),
        ),
    ]


def _slot_span(decode: DecodeFit, d: str, slots_tried: int) -> Parameter:
    """The idle slots' cells (simulator/costmodel.py): fitted where the engine keeps a KV buffer per slot."""
    if decode.slots:
        grade, how = (
            FITTED,
            f"{d}: {decode.per_idle_cell_s * 1e9:.3g} ns per KV cell of each idle slot inside the batch's slot span "
            f"({decode.slots} slots, a KV buffer each); the term predicted each half of the requests better than the fit without it",
        )
    elif slots_tried:
        grade, how = (
            FITTED,
            f"{d}: the idle slots' cells ({slots_tried} slots) predicted held-out requests no better than the fit without them "
            "(one KV buffer for all slots, or too little spread in the batch), so none are added",
        )
    else:
        grade, how = (
            ASSUMED,
            "the engine keeps one KV pool for all sequences (or no slot cap was seen): no idle slots' cells",
        )
    return Parameter("slot_span_kv_bytes_per_cell", round(decode.per_idle_cell_s * BANDWIDTH, 3), grade, how)
