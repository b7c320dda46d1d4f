"""The stepped shape's stop rule: does one step's window break the SLO (the break point)?

Pure: it judges a live-stats window summary (loadline.runtime.live.WindowSummary or anything with the same
fields) against an SLO, so it is tested without Locust.

The error check uses `--step-max-error-rate`, not the SLO's `max_error_rate`: the SLO's default of
0 failed requests is the acceptance gate of the report, while one stray error must not end a
capacity search. Latency thresholds come from the SLO.
"""

from __future__ import annotations

from typing import Any

from loadline.core.slo import SLO

# (window field, SLO field, human name)
LATENCY_CHECKS = (
    ("e2e_p95_ms", "e2e_p95_ms", "E2E P95"),
    ("e2e_p99_ms", "e2e_p99_ms", "E2E P99"),
    ("ttft_p95_ms", "ttft_p95_ms", "TTFT P95"),
    ("ttft_p99_ms", "ttft_p99_ms", "TTFT P99"),
)


def slowest_allowed_ms(slo: SLO) -> float | None:
    """The largest latency threshold of the SLO: a request slower than this can never be OK."""
    limits = [getattr(slo, s) for _, s, _ in LATENCY_CHECKS if getattr(slo, s) is not None]
    return max(limits) if limits else None


def judge_window(summary: Any, slo: SLO, max_error_rate: float, window_s: float, min_requests: int = 1) -> str | None:
    """The reason the window breaks the SLO, or None when it does not (or cannot be judged).

    `window_s` and the summary's latencies are on the same clock: model time in a time-scaled run.

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
    reasons = []
    if summary.error_rate is not None and summary.error_rate > max_error_rate:
        reasons.append(
            f"error rate {summary.error_rate:.1%} > {max_error_rate:.1%} ({summary.errors} of {summary.requests})"
        )
    for window_field, slo_field, name in LATENCY_CHECKS:
        limit = getattr(slo, slo_field)
        value = getattr(summary, window_field, None)
        if limit is not None and value is not None and value > limit:
            reasons.append(f"{name} {value:,.0f} ms > SLO {limit:,.0f} ms")
    return "; ".join(reasons) or None
