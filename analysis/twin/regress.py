"""The two regressions of the fit: decode step time, and the prefill step behind TTFT.

Both are the simulator's cost model (simulator/costmodel.py) read backwards:

    step = max(M0 + K x kv_tokens_read, C x step_tokens) + F + S x sequences

Decode (each request's mean inter-token gap less its stalls, against the batch B and KV it shared the engine with):
memory-bound, so ITL = (M0 + F) + S x B + K x kv, a linear least-squares fit with non-negative
coefficients (an engine never gets faster with more work, nor takes negative time for an empty step).
Prefill (TTFT of requests that did not queue): TTFT = const + wait + max(M0 + K x kv, C x tokens) + F + S x (B+1),
where const is the time before the engine's queue and wait the rest of the step in flight at arrival;
M0 and C come from a grid search (the max makes it non-linear), const is the median residual.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

M0_GRID = 21
C_GRID = np.geomspace(1e-8, 1e-2, 121)  # seconds per prefill token: 10 ns (a big GPU) .. 10 ms (a slow CPU)


@dataclass(frozen=True)
class DecodeFit:
    base_s: float  # M0 + F: the step time of an empty batch
    per_seq_s: float  # S
    per_kv_token_s: float  # K
    r2: float
    n: int
    rel_residual: float  # median |residual| / median ITL


@dataclass(frozen=True)
class PrefillFit:
    weights_s: float  # M0: the part of base_s that a compute-bound prefill step hides (max(memory, compute))
    per_token_s: float  # C
    before_queue_s: float  # const: API server and client time before the engine's queue
    n: int
    rel_residual: float
    compute_bound_share: float  # prompts whose prefill the fit puts on the compute side of the max


def fit_decode(itl_s: np.ndarray, batch: np.ndarray, kv: np.ndarray) -> DecodeFit:
    """Least squares with every coefficient >= 0: the best of the fits over each subset of the three
    columns whose coefficients all come out non-negative (exact non-negative least squares for three)."""
    columns = np.column_stack([np.ones_like(batch), batch, kv])
    best: tuple[float, np.ndarray] | None = None
    for subset in itertools.product((False, True), repeat=3):
        use = [i for i in range(3) if subset[i]]
        coef = np.zeros(3)
        if use:
            sol, *_ = np.linalg.lstsq(columns[:, use], itl_s, rcond=None)
            if (sol < 0).any():
                continue
            coef[use] = sol
        sse = float(((itl_s - columns @ coef) ** 2).sum())
        if best is None or sse < best[0]:
            best = (sse, coef)
    assert best is not None  # the empty subset always qualifies
    coef = best[1]
    predicted = columns @ coef
    residual = itl_s - predicted
    total = float(((itl_s - itl_s.mean()) ** 2).sum())
    r2 = 1.0 - float((residual**2).sum()) / total if total > 0 else 0.0
    rel = float(np.median(np.abs(residual)) / max(np.median(itl_s), 1e-12))
    return DecodeFit(float(coef[0]), float(coef[1]), float(coef[2]), r2, len(itl_s), rel)


def fit_prefill(
    ttft_s: np.ndarray,
    tokens: np.ndarray,
    batch: np.ndarray,
    kv: np.ndarray,
    decode: DecodeFit,
    before_queue_s: float | None = None,
    chunk: int = 0,
) -> PrefillFit:
    """Grid over M0 in [0, base] and C; const = the median of what is left, or `before_queue_s` when the
    engine's histograms measured it (then M0 and C no longer trade against it: for compute-bound prompts
    only const - M0 is seen). Least absolute deviation: a few requests that waited behind a long prefill
    must not pull the line. A prompt longer than `chunk` takes ceil(tokens / chunk) steps, each paying the
    step's fixed and per-sequence cost and the max of its own memory and compute."""
    chunks = np.maximum(1.0, np.ceil(tokens / chunk)) if chunk > 0 else np.ones_like(tokens)
    decode_step = decode.base_s + decode.per_seq_s * batch + decode.per_kv_token_s * kv
    wait = 0.5 * decode_step * np.clip(batch, 0.0, 1.0)  # half the step in flight, when one was

    def search(m0_grid: np.ndarray, c_grid: np.ndarray) -> tuple[float, float, float, float]:
        best: tuple[float, float, float, float] | None = None  # loss, M0, C, const
        for m0 in m0_grid:
            fixed = chunks * (decode.base_s - m0 + decode.per_seq_s * (batch + 1))
            memory = m0 + decode.per_kv_token_s * (kv + tokens)
            y = ttft_s - wait - fixed
            for c in c_grid:
                step = chunks * np.maximum(memory, c * (tokens / chunks + batch))
                const = float(np.median(y - step)) if before_queue_s is None else before_queue_s
                loss = float(np.mean(np.abs(y - step - const)))
                if best is None or loss < best[0]:
                    best = (loss, float(m0), float(c), const)
        assert best is not None
        return best

    _, m0, c, _ = search(np.linspace(0.0, decode.base_s, M0_GRID), C_GRID)
    # then a finer grid around the coarse optimum (C's coarse steps are 12 % apart)
    m0_step = decode.base_s / (M0_GRID - 1)
    fine_m0 = np.clip(np.linspace(m0 - m0_step, m0 + m0_step, 11), 0.0, decode.base_s)
    loss, m0, c, const = search(fine_m0, np.geomspace(c / 1.13, c * 1.13, 25))
    memory = m0 + decode.per_kv_token_s * (kv + tokens)
    compute_share = float(np.mean(c * (tokens + batch) > memory))
    rel = float(loss / max(np.median(ttft_s), 1e-12))
    return PrefillFit(m0, c, max(const, 0.0), len(ttft_s), rel, compute_share)
