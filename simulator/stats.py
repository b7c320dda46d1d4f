"""Per-replica counters and histograms, kept as plain numbers on the hot path.

prometheus_client's own Histogram takes a lock and walks its buckets on every observe; at tens of
thousands of tokens per second that shows up in the profile. These are exposed through
prometheus_client by the collector in simulator/metrics.py, with vLLM's names and buckets.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field

TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
REQUEST_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000)


class FastHistogram:
    __slots__ = ("bounds", "counts", "total", "count")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # last slot: above every bound (+Inf only)
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value
        self.count += 1

    def cumulative(self) -> list[tuple[str, int]]:
        """[(le, cumulative count)] including +Inf, as Prometheus wants it."""
        out, running = [], 0
        for bound, n in zip(self.bounds, self.counts[:-1], strict=True):
            running += n
            out.append((repr(float(bound)), running))
        out.append(("+Inf", running + self.counts[-1]))
        return out


# (vLLM metric name without the "vllm:" prefix, help, buckets)
HISTOGRAMS: tuple[tuple[str, str, tuple[float, ...]], ...] = (
    ("time_to_first_token_seconds", "Time to first token, from arrival at the front end", TTFT_BUCKETS),
    ("inter_token_latency_seconds", "Time between consecutive output tokens", ITL_BUCKETS),
    ("request_time_per_output_token_seconds", "Per request: decode time / (output tokens - 1)", ITL_BUCKETS),
    ("e2e_request_latency_seconds", "Arrival to last token", REQUEST_BUCKETS),
    ("request_queue_time_seconds", "Time spent waiting before first scheduled", REQUEST_BUCKETS),
    ("request_inference_time_seconds", "First scheduled to last token", REQUEST_BUCKETS),
    ("request_prefill_time_seconds", "First scheduled to first token", REQUEST_BUCKETS),
    ("request_decode_time_seconds", "First token to last token", REQUEST_BUCKETS),
    ("request_prompt_tokens", "Prompt tokens per request", TOKEN_BUCKETS),
    ("request_generation_tokens", "Output tokens per request", TOKEN_BUCKETS),
    ("iteration_tokens_total", "Tokens scheduled per engine step", TOKEN_BUCKETS),
)


@dataclass
class EngineStats:
    prompt_tokens: int = 0
    generation_tokens: int = 0
    preemptions: int = 0
    success: Counter = field(default_factory=Counter)  # finished_reason -> requests
    busy_seconds: float = 0.0  # wall seconds the simulated GPU spent in steps
    steps: int = 0
    busy_slots: int = 0  # sequences in the batch, summed over steps (llama.cpp's n_busy_slots_per_decode)
    histograms: dict[str, FastHistogram] = field(
        default_factory=lambda: {name: FastHistogram(buckets) for name, _, buckets in HISTOGRAMS}
    )
