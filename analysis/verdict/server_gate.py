"""The SLO criteria judged from server metrics: GPU memory <= 85 % and no OOM restarts (DOMAIN.md).

Both need scraped server metrics (DCGM framebuffer gauges; kube-state-metrics or the simulator's
restart counter); without them the criterion is reported as not measured and does not decide.
GPU memory is judged per GPU (used / (used + free) of the same series at the same scrape), worst
GPU and moment; restarts are the reset-aware increase of the restart counter over the whole run.

Caveat: vLLM and SGLang reserve a fixed share of GPU memory at start (vLLM: gpu_memory_utilization,
default 0.9) for the KV cache, so DCGM shows ~90 % used whatever the load. Against such an engine
set `gpu_memory_max_fraction` above that share (or "none") and watch KV-cache usage, which the
bottleneck verdict judges. The simulator reports memory actually in use, so the default applies.
"""

from __future__ import annotations

import math

import pandas as pd

from loadline.analysis.verdict.gate import Criterion
from loadline.analysis.verdict.signals import Signals
from loadline.core.slo import SLO


def gpu_memory_peak(signals: Signals) -> tuple[float | None, str]:
    """(highest used fraction of any GPU at any scrape, that GPU's series) or (None, "")."""
    used, free = signals.samples("gpu_mem_used"), signals.samples("gpu_mem_free")
    if used.empty or free.empty:
        return None, ""
    both = used.merge(free, on=["ts", "series"], suffixes=("_used", "_free"))
    total = both["value_used"] + both["value_free"]
    fraction = (both["value_used"] / total)[total > 0]
    if fraction.empty:
        return None, ""
    at = fraction.idxmax()
    return float(fraction.loc[at]), str(both.loc[at, "series"]).split("|")[0]


def oom_restarts(signals: Signals) -> float | None:
    if not signals.has("engine_restarts"):
        return None
    return signals.increase("engine_restarts", -math.inf, math.inf)


def server_criteria(server_metrics: pd.DataFrame | None, slo: SLO) -> list[Criterion]:
    signals = Signals(server_metrics)
    criteria = []
    if slo.gpu_memory_max_fraction is not None:
        limit = float(slo.gpu_memory_max_fraction)
        peak, where = gpu_memory_peak(signals)
        criteria.append(
            Criterion(
                "GPU memory",
                f"<= {limit:.0%}",
                limit,
                peak,
                None if peak is None else peak <= limit,
                where,
                unit="fraction",
            )
        )
    if slo.max_oom_restarts is not None:
        limit = float(slo.max_oom_restarts)
        restarts = oom_restarts(signals)
        criteria.append(
            Criterion(
                "OOM restarts",
                f"<= {limit:g}",
                limit,
                restarts,
                None if restarts is None else restarts <= limit,
                "",
                unit="restarts",
            )
        )
    return criteria
