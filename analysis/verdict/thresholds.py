"""Every number a bottleneck rule compares with, in one place, each with its source (DOMAIN.md).

The rules (analysis/verdict/rules.py, run_rules.py) and the windows they judge
(analysis/verdict/context.py) read them from one frozen `Thresholds`; a test or a caller may pass
other values, the defaults are the ones the documents give.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Thresholds:
    """Every number a rule compares with, in one place, each with its source."""

    gpu_busy: float = 0.95  # DOMAIN.md bottleneck rule 1: "GPU utilization >= 95 %"
    gpu_not_busy: float = 0.60  # rule 2: "only 40-50 % yet throughput flat" (with margin)
    kv_pinned: float = 0.90  # rule 3: KV usage "pinned near 1.0"; vLLM preempts only when the pool is exhausted
    leak_rise: float = 0.10  # rule 3 (leak): the memory floor rose by 10 points of the pool at constant load
    idle_residue: float = 0.02  # "memory creeping up by > 2 % ... at idle means a leak"
    steady_load: float = 1.25  # "constant load" for the leak rule: requests in the engine within +-25 %
    host_cpu_busy: float = 0.90  # rule 4: host CPU saturated
    latency_rise: float = 2.0  # rule 5 "TTFT high": twice the baseline
    # "per-token time rising with the batch": healthy batching already raises ITL ~1.4x from 1 to 32
    # streams (vLLM on an L4, 0.5B model: 5.1 -> 7.1 ms, configs/sim/tiny.toml); past 1.5x the decode
    # step is dominated by per-sequence work, i.e. the GPU's compute/bandwidth is the limit.
    tpot_rise: float = 1.5
    batch_growth: float = 2.0  # "with the batch": the running batch at least doubled (one stepped-test step, DOMAIN.md)
    noise_floor_ms: float = 50.0  # a TTFT/E2E rise smaller than this is noise, whatever the ratio (model time)
    token_noise_floor_ms: float = 5.0  # the same for per-token times (TPOT, ITL)
    throughput_gain: float = 1.10  # users grew >= 1.5x but requests/s grew < 10 %: flat
    users_growth: float = 1.5
    flat_latency_growth: float = 1.3  # ... and E2E p50 grew 1.3x over the previous step
    min_requests: int = 50  # a phase with fewer requests is too noisy to call its throughput flat (Poisson ~14 %)
    error_rate: float = 0.01  # >= 1 % failed requests is a limit (the SLO is stricter: 0)
    waiting_share: float = 0.5  # "waiting queue persistently non-empty": waiting > 0 in at least half the scrapes
    running_plateau: float = 0.9  # running within 10 % of the largest batch the engine ran: pinned at a cap
    queue_share: float = 0.5  # "queue time dominates TTFT": at least half of the engine's time to first token
    outside_ratio: float = 2.0  # client time at least twice the server's own
    # Confidence from the weakest defining signal's margin past its threshold. One window's counts
    # carry Poisson noise ~1/sqrt(n): 14 % at the 50 requests a window needs (min_requests), so a
    # margin under 15 % is within one noise width (low), 15-50 % is one to three (medium), beyond
    # three widths is high.
    margin_medium: float = 0.15
    margin_high: float = 0.50
    slices: int = 6  # time slices of a one/two-phase run (>= 3 scrapes each, see slice_windows)
    min_slice_scrapes: int = 3
