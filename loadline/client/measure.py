"""Arrival times -> the record's latency fields. Pure, so it is tested without a network.

Definitions are in loadline/core/records.py. Per-request ITL percentiles use the nearest-rank method on
that request's gaps; pooled per-gap percentiles across requests are computed in analysis from
`itl_us`, which keeps every gap.
"""

from __future__ import annotations

from loadline.client.kernel_clock import KERNEL
from loadline.client.streaming import StreamResult
from loadline.core.records import RequestRecord


def nearest_rank(sorted_values: list[int], q: float) -> int:
    """The q-quantile (0..1) of an ascending, non-empty list by the nearest-rank method."""
    index = max(0, min(len(sorted_values) - 1, int(q * len(sorted_values) + 0.999999) - 1))
    return sorted_values[index]


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def reasoning_tokens(usage: dict | None, chunks: int) -> int | None:
    """The server's count of reasoning tokens, else the reasoning chunks (None: no reasoning seen).

    vLLM (with a reasoning parser) and SGLang 0.5.23 send `completion_tokens_details.reasoning_tokens`,
    SGLang 0.5.2 only a top-level `reasoning_tokens` (REFERENCE-workloads.md section 4)."""
    if usage:
        details = usage.get("completion_tokens_details")
        counted = _count(details.get("reasoning_tokens")) if isinstance(details, dict) else None
        if counted is None:
            counted = _count(usage.get("reasoning_tokens"))
        if counted is not None:
            return counted
    return chunks or None


def cached_tokens(usage: dict | None, cache_n: int | None) -> int | None:
    """Prompt tokens served from the prefix cache: `prompt_tokens_details.cached_tokens` (vLLM, SGLang
    behind a flag each), else llama.cpp's `timings.cache_n`; None when the server says neither."""
    details = usage.get("prompt_tokens_details") if usage else None
    counted = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
    return counted if counted is not None else _count(cache_n)


def fill_timings(rec: RequestRecord, result: StreamResult, t0: float, end: float) -> list[int]:
    """Fill the record's latency fields; returns the inter-token gaps in microseconds."""
    arrivals = result.arrivals
    rec.e2e_ms = (end - t0) * 1000
    rec.content_chunks = len(arrivals)
    rec.finish_reason = result.finish_reason
    rec.clock = result.clock if result.arrivals or result.ended_at else ""  # "": nothing was read
    if result.body is not None and result.clock == KERNEL:  # how late the generator read (saturation.py)
        rec.read_delay_ms = result.body.read_delay_max * 1000
    usage = result.usage
    if usage and usage.get("completion_tokens") is not None:
        rec.output_tokens = int(usage["completion_tokens"])
        rec.prompt_tokens = usage.get("prompt_tokens")
        rec.tokens_source = "usage"
    else:
        rec.output_tokens = len(arrivals)
        rec.tokens_source = "chunks"
    rec.reasoning_tokens = reasoning_tokens(usage, result.reasoning_chunks)
    rec.cached_tokens = cached_tokens(usage, result.cache_n)
    rec.tool_calls = result.tool_calls
    if not arrivals:
        return []
    rec.ttft_ms = (arrivals[0] - t0) * 1000
    if not result.reasoning_chunks:  # every token chunk is the answer's: TTFO is TTFT
        rec.ttfo_ms = rec.ttft_ms
    else:
        if result.answer_at:
            rec.ttfo_ms = (result.answer_at - t0) * 1000
        rec.reasoning_ms = ((result.answer_at or result.reasoning_end) - arrivals[0]) * 1000
    answer_tokens = rec.output_tokens - (rec.reasoning_tokens or 0)
    if rec.ttfo_ms is not None and answer_tokens > 1:
        rec.tpot_ms = (rec.e2e_ms - rec.ttfo_ms) / (answer_tokens - 1)
    if len(arrivals) < 2:
        return []
    gaps = [round((b - a) * 1e6) for a, b in zip(arrivals, arrivals[1:])]
    rec.itl_us = " ".join(map(str, gaps))
    ordered = sorted(gaps)
    rec.itl_mean_ms = sum(gaps) / len(gaps) / 1000
    rec.itl_p50_ms = nearest_rank(ordered, 0.50) / 1000
    rec.itl_p99_ms = nearest_rank(ordered, 0.99) / 1000
    rec.itl_max_ms = ordered[-1] / 1000
    return gaps
