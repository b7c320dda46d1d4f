"""The stepped shape's stop rule: does one step's window break the SLO (the break point)?

Pure: it reads a live-stats window summary (loadline.runtime.live.WindowSummary or anything with the
same fields) and asks the one SLO judge (loadline/core/judge.py), so a step breaks live exactly when
the report's gate fails it on the same numbers (same criteria, same `<=` comparison).

The error check uses `--step-max-error-rate`, not the SLO's `max_error_rate`: the SLO's default of
0 failed requests is the acceptance gate of the report, while one stray error must not end a
capacity search. A criterion the window has no data for (e.g. ITL of one-token replies) does not
stop the run; the judgement names it.
"""

from __future__ import annotations

from typing import Any

from loadline.core.judge import ERROR_RATE, Judgement, judge, request_limits_ms, values_of
from loadline.core.slo import SLO


def slowest_allowed_ms(slo: SLO) -> float | None:
    """The largest per-request latency limit of the SLO: a request slower than this can never be OK."""
    limits = request_limits_ms(slo)
    return max(limits) if limits else None


def judge_summary(summary: Any, slo: SLO, max_error_rate: float, streaming: bool | None) -> Judgement:
    return judge(slo, values_of(summary), streaming, max_error_rate=max_error_rate)


def judge_window(
    summary: Any, slo: SLO, max_error_rate: float, window_s: float, min_requests: int = 1, streaming: bool | None = None
) -> str | None:
    """The reason the window breaks the SLO, or None when it does not (or cannot be judged).

    `window_s` and the summary's latencies are on the same clock: model time in a time-scaled run.
    `streaming`: whether the traffic streams (None: unknown, every latency criterion applies).

    A window in which no request completed at all while it was longer than the slowest latency
    the SLO allows is a break too: every request in it was slower than the SLO. A window with fewer
    than `min_requests` requests is not judged: one error in five requests is not a break point.
    """
    if summary is None:
        return None
    if not summary.requests:
        limit_ms = slowest_allowed_ms(slo)
        if limit_ms is not None and window_s * 1000 > limit_ms:
            return f"no request completed within {window_s:.1f} s (SLO allows {limit_ms:,.0f} ms)"
        return None
    if summary.requests < min_requests:
        return None
    judgement = judge_summary(summary, slo, max_error_rate, streaming)
    if not judgement.failed:
        return None
    return "; ".join(
        check.describe() + (f" ({summary.errors} of {summary.requests})" if check.key == ERROR_RATE else "")
        for check in judgement.failed
    )
