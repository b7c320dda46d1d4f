"""Per-phase columns of reasoning, tool-call and cached-prompt traffic, added only when they say something.

- `ttfo_p95_ms`, `ttfo_p99_ms`: time to the first answer token (after any reasoning; record
  `ttfo_ms`), percentiles over the same requests as TTFT's. Added when a reply of the run reasoned or
  called a tool (else TTFO is TTFT) or when the SLO gates TTFO (the gate reads them).
- `reasoning_share`: reasoning tokens / output tokens of the phase's ok requests. Added when a reply
  reasoned.
- `prompt_cache_hit_share`: cached prompt tokens / prompt tokens of the ok requests whose server
  reported its cache (`cached_tokens`: vLLM and SGLang only behind a flag, REFERENCE-workloads.md
  section 4). Added when any did.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from loadline.core.slo import SLO

TTFO = ("ttfo_p95_ms", "ttfo_p99_ms")
REASONING_SHARE, CACHE_HIT_SHARE = "reasoning_share", "prompt_cache_hit_share"
READ = ("ttfo_ms", "reasoning_tokens", "output_tokens", "cached_tokens", "prompt_tokens")  # by phase_values


def _column(rows: pd.DataFrame, name: str) -> pd.Series:
    """A record column as numbers (NaN throughout for a run folder written before it existed)."""
    if name not in rows.columns:
        return pd.Series(np.nan, index=rows.index, dtype=float)
    return pd.to_numeric(rows[name], errors="coerce")


def which(requests: pd.DataFrame, slo: SLO) -> tuple[str, ...]:
    """The columns this run's phase table gets (none for a run of plain replies with no cache report)."""
    reasoned = (_column(requests, "reasoning_ms").notna() | (_column(requests, "tool_calls") > 0)).any()
    columns: tuple[str, ...] = ()
    if reasoned or slo.ttfo_p95_ms is not None or slo.ttfo_p99_ms is not None:
        columns += TTFO
    if (_column(requests, "reasoning_tokens") > 0).any():
        columns += (REASONING_SHARE,)
    if _column(requests, "cached_tokens").notna().any():
        columns += (CACHE_HIT_SHARE,)
    return columns


def phase_values(ok_rows: pd.DataFrame, timed_rows: pd.DataFrame, columns: tuple[str, ...]) -> dict[str, float]:
    """One phase's values of `columns`: shares over its ok rows, TTFO percentiles over `timed_rows`
    (the ok rows its latency percentiles use: analysis/stats/phases.py `uncensored`), in wall ms."""
    values: dict[str, float] = {}
    if TTFO[0] in columns:
        ttfo = _column(timed_rows, "ttfo_ms").dropna().to_numpy(dtype=float)
        p95, p99 = np.percentile(ttfo, [95.0, 99.0]) if ttfo.size else (np.nan, np.nan)
        values.update({TTFO[0]: float(p95), TTFO[1]: float(p99)})
    if REASONING_SHARE in columns:
        values[REASONING_SHARE] = _share(
            _column(ok_rows, "reasoning_tokens").fillna(0), _column(ok_rows, "output_tokens")
        )
    if CACHE_HIT_SHARE in columns:
        cached = _column(ok_rows, "cached_tokens")
        reported = cached.notna()
        values[CACHE_HIT_SHARE] = _share(cached[reported], _column(ok_rows, "prompt_tokens")[reported])
    return values


def _share(part: pd.Series, whole: pd.Series) -> float:
    total = float(whole.sum())
    return float(part.sum()) / total if total > 0 else float("nan")
