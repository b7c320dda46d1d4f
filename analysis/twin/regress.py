"""The two regressions of the fit: decode step time, and the prefill step behind TTFT.

Both are the simulator's cost model (simulator/costmodel.py) read backwards:

    step = max(M0 + K x kv_tokens_read, C x step_tokens + A x attention_cells) + F + S x sequences

Decode (each request's mean inter-token gap less its stalls, against the batch B and KV it shared the engine with):
memory-bound, so ITL = (M0 + F) + S x B + K x kv, a linear least-squares fit with non-negative
coefficients (an engine never gets faster with more work, nor takes negative time for an empty step).
On an engine with a KV buffer per slot (llama.cpp) a fourth term, I x idle cells: the cells of the idle
slots inside the batch's slot span (simulator/costmodel.py), kept when it predicts held-out requests better.
Prefill (TTFT of requests that did not queue): TTFT = const + wait + max(M0 + K x kv, C x tokens + A x cells)
+ F + S x (B+1), where const is the time before the engine's queue, wait the rest of the step in flight at
arrival and cells the (token, context token) pairs attention computes; M0, C and A come from a grid search
(the max makes it non-linear), const is the median residual.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, fields, replace

import numpy as np

from loadline.simulator import costmodel

M0_GRID = 21
M0_BENT_GRID = 11  # the bent line's coarse M0 grid: one per share of SHARE_GRID
C_GRID = np.geomspace(1e-8, 1e-2, 121)  # seconds per prefill token: 10 ns (a big GPU) .. 10 ms (a slow CPU)
# attention per (token, context token) pair as a share of C, by the models' shapes: Llama-3-8B's 3e-5
# (4 x 32 x 4096 FLOPs beside 2 x 8e9), llama.cpp's tiny test model's 6e-4 (4 x 4 x 256 beside 2 x 3.7e6).
# 1e-6 adds under 1 % below 8k tokens of context; 1e-2 would double a token's cost at 100.
SHARE_GRID = np.geomspace(1e-6, 1e-2, 25)


# the simulator's count over arrays (simulator/costmodel.py): each request's time-averaged batch and KV
_IDLE_SLOT_CELLS = np.vectorize(costmodel.idle_slot_cells, otypes=[float])


def idle_slot_cells(batch: np.ndarray, slots: int, kv: np.ndarray) -> np.ndarray:
    """The KV cells of the idle slots inside each batch's slot span, as the simulator counts them."""
    return _IDLE_SLOT_CELLS(batch, slots, kv)


@dataclass(frozen=True)
class DecodeFit:
    base_s: float  # M0 + F: the step time of an empty batch
    per_seq_s: float  # S
    per_kv_token_s: float  # K
    r2: float
    n: int
    rel_residual: float  # median |residual| / median ITL
    per_idle_cell_s: float = 0.0  # I: per KV cell of an idle slot inside the batch's slot span
    slots: int = 0  # the slot count the idle cells were counted against (0: no per-slot KV buffers)

    def step_s(self, batch: np.ndarray, kv: np.ndarray) -> np.ndarray:
        """The fitted decode step of a batch reading `kv` KV tokens."""
        step = self.base_s + self.per_seq_s * batch + self.per_kv_token_s * kv
        if self.per_idle_cell_s and self.slots:
            step = step + self.per_idle_cell_s * idle_slot_cells(batch, self.slots, kv)
        return step


@dataclass(frozen=True)
class PrefillFit:
    weights_s: float  # M0: the part of base_s that a compute-bound prefill step hides (max(memory, compute))
    per_token_s: float  # C
    before_queue_s: float  # const: API server and client time before the engine's queue
    n: int
    rel_residual: float
    compute_bound_share: float  # prompts whose prefill the fit puts on the compute side of the max
    per_cell_s: float = 0.0  # A: attention per (token, context token) pair; 0 when a bend did not predict better


def fit_decode(itl_s: np.ndarray, batch: np.ndarray, kv: np.ndarray, slots: int = 0) -> DecodeFit:
    """Non-negative least squares of the step on (1, B, kv), and on an engine with a KV buffer per slot
    (`slots` > 1: llama.cpp's) the idle slots' cells too, kept only when they predict held-out requests
    better (two folds of alternate requests, the mean gain in squared error over twice its standard
    error, as the prefill's bend): an engine with one KV buffer for all (llama.cpp's --kv-unified) must
    not have the slots' spread read into it."""
    columns = np.column_stack([np.ones_like(batch), batch, kv])
    if slots > 1:
        with_idle = np.column_stack([columns, idle_slot_cells(batch, slots, kv)])
        if with_idle[:, 3].any() and _column_predicts_better(with_idle, itl_s):
            columns = with_idle
    coef = _nnls(columns, itl_s)
    predicted = columns @ coef
    residual = itl_s - predicted
    total = float(((itl_s - itl_s.mean()) ** 2).sum())
    r2 = 1.0 - float((residual**2).sum()) / total if total > 0 else 0.0
    rel = float(np.median(np.abs(residual)) / max(np.median(itl_s), 1e-12))
    idle = float(coef[3]) if len(coef) > 3 else 0.0
    return DecodeFit(
        float(coef[0]), float(coef[1]), float(coef[2]), r2, len(itl_s), rel, idle, slots if len(coef) > 3 else 0
    )


def _nnls(columns: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares with every coefficient >= 0: the best of the fits over each subset of the columns
    whose coefficients all come out non-negative (exact non-negative least squares for a few columns)."""
    width = columns.shape[1]
    best: tuple[float, np.ndarray] | None = None
    for subset in itertools.product((False, True), repeat=width):
        use = [i for i in range(width) if subset[i]]
        coef = np.zeros(width)
        if use:
            sol, *_ = np.linalg.lstsq(columns[:, use], y, rcond=None)
            if (sol < 0).any():
                continue
            coef[use] = sol
        sse = float(((y - columns @ coef) ** 2).sum())
        if best is None or sse < best[0]:
            best = (sse, coef)
    assert best is not None  # the empty subset always qualifies
    return best[1]


def _column_predicts_better(columns: np.ndarray, y: np.ndarray) -> bool:
    """Two folds (alternate rows): does the fit with the last column, made on one fold, predict the other
    better than the fit without it, by more than twice the standard error of the paired difference?"""
    halves = np.arange(len(y)) % 2 == 0
    if min(halves.sum(), (~halves).sum()) < columns.shape[1] + 2:
        return False
    gains = []
    for train in (halves, ~halves):
        test = ~train
        full = _nnls(columns[train], y[train])
        less = _nnls(columns[train, :-1], y[train])
        gains.append((y[test] - columns[test, :-1] @ less) ** 2 - (y[test] - columns[test] @ full) ** 2)
    return _significant(np.concatenate(gains))


def _significant(gain: np.ndarray) -> bool:
    """Held-out gains of a richer model, paired: their mean over twice its standard error (one-sided, ~2 %)."""
    return bool(gain.mean() > 2.0 * gain.std(ddof=1) / math.sqrt(len(gain)))


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
    step's fixed and per-sequence cost and the max of its own memory and compute.

    Then attention (A per (token, context token) pair, simulator/costmodel.py): a prompt of n tokens
    attends n (n + 1) / 2 pairs, so its cost bends up with its length. A is searched as a share of C and
    kept only when it predicts held-out prompts better (two-fold: the linear and the bent line are each
    fitted on alternate prompts and judged on the others) by more than twice the standard error of the
    difference (a one-sided test at ~2 %): prompts all of one length cannot tell A from C, and a bend that
    only fits noise would send every longer-prompt what-if astray."""
    terms = _PrefillTerms.of(ttft_s, tokens, batch, kv, decode, chunk)
    linear, bent = terms.search(before_queue_s)
    loss, m0, c, a, const = bent if terms.bend_predicts_better(before_queue_s) else linear
    compute_share = float(np.mean(terms.compute(c, a) > terms.memory(m0)))
    rel = float(loss / max(np.median(ttft_s), 1e-12))
    return PrefillFit(m0, c, max(const, 0.0), len(ttft_s), rel, compute_share, a)


_Fit = tuple[float, float, float, float, float]  # loss, M0, C, A, const


@dataclass(frozen=True)
class _PrefillTerms:
    """The prefill model's columns for a set of prompts: what the search evaluates for each (M0, C, A)."""

    ttft: np.ndarray
    tokens: np.ndarray  # per chunk
    cells: np.ndarray  # (token, context token) pairs per chunk: the prompt's own and the decodes'
    batch: np.ndarray
    chunks: np.ndarray
    wait: np.ndarray  # half the step in flight at arrival, when one was
    reads: np.ndarray  # the step's memory side less M0: the KV it reads, and the idle slots' cells
    decode: DecodeFit

    @classmethod
    def of(cls, ttft, tokens, batch, kv, decode: DecodeFit, chunk: int) -> _PrefillTerms:
        chunks = np.maximum(1.0, np.ceil(tokens / chunk)) if chunk > 0 else np.ones_like(tokens)
        wait = 0.5 * decode.step_s(batch, kv) * np.clip(batch, 0.0, 1.0)
        cells = costmodel.attention_cells(0, tokens) / chunks + kv
        read = kv + tokens  # the KV of the batch it joins and its own prompt's
        reads = decode.per_kv_token_s * read
        if decode.per_idle_cell_s and decode.slots:  # with a KV buffer per slot, the idle slots in the span
            reads = reads + decode.per_idle_cell_s * idle_slot_cells(batch + 1, decode.slots, read)
        return cls(ttft, tokens / chunks, cells, batch, chunks, wait, reads, decode)

    def rows(self, mask: np.ndarray) -> _PrefillTerms:
        return replace(self, **{f.name: getattr(self, f.name)[mask] for f in fields(self) if f.name != "decode"})

    def memory(self, m0: float) -> np.ndarray:
        """A prefill step's memory side: the weights, then what `reads` holds."""
        return m0 + self.reads

    def compute(self, c: float, a: float) -> np.ndarray:
        return c * (self.tokens + self.batch) + a * self.cells

    def loss(self, m0: float, c: float, a: float, before_queue_s: float | None, const: float | None = None):
        """(mean absolute residual, const) of one (M0, C, A)."""
        residuals, const = self.residuals(m0, c, a, before_queue_s, const)
        return float(np.mean(residuals)), const

    def residuals(self, m0: float, c: float, a: float, before_queue_s: float | None, const: float | None = None):
        """(|residual| per prompt, const) of one (M0, C, A)."""
        d = self.decode
        fixed = self.chunks * (d.base_s - m0 + d.per_seq_s * (self.batch + 1))
        left = self.ttft - self.wait - fixed - self.chunks * np.maximum(self.memory(m0), self.compute(c, a))
        if const is None:
            const = float(np.median(left)) if before_queue_s is None else before_queue_s
        return np.abs(left - const), const

    def errors(self, fit: _Fit, before_queue_s: float | None) -> np.ndarray:
        """|residual| per prompt of a fit made on other prompts (its const kept)."""
        _, m0, c, a, const = fit
        return self.residuals(m0, c, a, before_queue_s, const)[0]

    def bend_predicts_better(self, before_queue_s: float | None) -> bool:
        """Two folds (alternate prompts): does the bent line fitted on one predict the other better than the
        linear line fitted on it, by more than twice the standard error of the paired difference?"""
        halves = np.arange(len(self.ttft)) % 2 == 0
        if min(halves.sum(), (~halves).sum()) < 2:
            return False
        gains = []
        for train in (halves, ~halves):
            test = self.rows(~train)
            line, bend = self.rows(train).search(before_queue_s)
            gains.append(test.errors(line, before_queue_s) - test.errors(bend, before_queue_s))
        return _significant(np.concatenate(gains))

    def _grid(self, before_queue_s, m0s, cs, shares) -> _Fit:
        best: _Fit | None = None
        for m0, c, share in itertools.product(m0s, cs, shares):
            loss, const = self.loss(float(m0), float(c), float(c * share), before_queue_s)
            if best is None or loss < best[0]:
                best = (loss, float(m0), float(c), float(c * share), const)
        assert best is not None
        return best

    def search(self, before_queue_s: float | None) -> tuple[_Fit, _Fit]:
        """The linear line (A = 0) by a coarse then a fine grid (C's coarse steps are 12 % apart), and the
        bent one: A as a share of C, with C searched again below the linear one (a bend takes part of the
        slope). Each as (loss, M0, C, A, const)."""
        base = self.decode.base_s
        m0_step = base / (M0_GRID - 1)
        _, m0, c, _, _ = self._grid(before_queue_s, np.linspace(0.0, base, M0_GRID), C_GRID, [0.0])
        fine_m0 = np.clip(np.linspace(m0 - m0_step, m0 + m0_step, 11), 0.0, base)
        linear = self._grid(before_queue_s, fine_m0, np.geomspace(c / 1.13, c * 1.13, 25), [0.0])
        _, _, c, _, _ = linear
        bent = min(self._bent_at(before_queue_s, c, share) for share in SHARE_GRID)
        _, m0, c, a, _ = bent
        share = a / c
        return linear, self._grid(
            before_queue_s,
            np.clip(np.linspace(m0 - m0_step, m0 + m0_step, 5), 0.0, base),
            np.geomspace(c / 1.02, c * 1.02, 5),
            np.geomspace(share / 1.2, share * 1.2, 5),
        )

    def _bent_at(self, before_queue_s: float | None, c: float, share: float) -> _Fit:
        """The best M0 and C for one share: coarse grids (C below the straight line's), then fine ones. M0 is
        searched again because the straight line's max(M0, C x n) bends too: it reads a bend as a larger M0."""
        base = self.decode.base_s
        m0_step = base / (M0_BENT_GRID - 1)
        _, m0, c, _, _ = self._grid(
            before_queue_s, np.linspace(0.0, base, M0_BENT_GRID), np.geomspace(c / 4, c * 1.05, 25), [share]
        )
        return self._grid(
            before_queue_s,
            np.clip(np.linspace(m0 - m0_step, m0 + m0_step, 5), 0.0, base),
            np.geomspace(c / 1.06, c * 1.06, 13),
            [share],
        )
