"""Each request's decode step as its inter-token gaps show it: the response of the twin's decode fit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from loadline.analysis.data.load import RunData, gap_column

# A gap this far over its request's median is a stall (a step that also ran a prefill), not a decode step:
# on the llama.cpp runs measured a step is 0.6-4 ms and a joining prompt of 8-500 tokens adds 0.8-50 ms
# (~0.1 ms a token), so most stalls are 1.5x and more; a time-scaled simulator's late and catch-up steps
# stayed within 1.5x of the median in 99 % of the gaps measured (an H100 profile at x5).
STALL_RATIO = 1.5


def decode_steps(run: RunData, ok: pd.DataFrame) -> np.ndarray:
    """Each request's decode step as its gaps show it (seconds): the mean of its inter-token gaps, less
    the stalls over STALL_RATIO x their median.

    A mean, because the regressors (batch, KV) are time-averages over the request's decode: the mean
    step is linear in them, a median is not. Less the stalls, because a step that also ran another
    request's prefill is one the twin's scheduler adds by itself. Not the median: where the steps
    alternate (a time-scaled simulator sleeps in whole milliseconds of the host's timer and catches up
    on the next step: 2.17 ms gaps with a 1.16 ms one every seventh, a 2.06 ms mean) it read the
    H100 profile's step 8 % long. Without the gaps (a table built in memory without them), the median.
    """
    median = ok["itl_p50_ms"].to_numpy(float) / 1e3
    try:
        rows = gap_column(run).per_row(run.requests.index.isin(ok.index))
    except (KeyError, ValueError, pa.ArrowException):
        return median
    if len(rows) != len(ok):
        return median
    out = median.copy()
    for i, gaps in enumerate(rows):
        if len(gaps) >= 2:
            out[i] = mean_step(gaps.astype(float)) / 1e6
    return out


def mean_step(gaps: np.ndarray) -> float:
    """The mean of the gaps less the stalls (over STALL_RATIO x the median). A long gap followed by
    near-zero ones is one late read of several tokens (the client or a proxy read late): it counts as
    a stall only if it still is when spread over the tokens it carried, and its tokens go with it."""
    typical = float(np.median(gaps))
    if typical <= 0:
        return float(gaps.mean())
    keep = np.ones(len(gaps), dtype=bool)
    for i in np.flatnonzero(gaps > STALL_RATIO * typical):
        j = i + 1
        while j < len(gaps) and gaps[j] < 0.25 * typical:  # tokens that arrived with it
            j += 1
        if gaps[i:j].sum() / (j - i) > STALL_RATIO * typical:
            keep[i:j] = False
    return float(gaps[keep].mean()) if keep.any() else typical
