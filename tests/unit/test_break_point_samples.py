"""A break point needs enough samples: a percentile from fewer requests than it needs is its slowest one's."""

from __future__ import annotations

import pandas as pd
import pytest

from loadline.analysis.stats.knee import find_break_point
from loadline.core.judge import min_samples
from loadline.core.slo import SLO

SLO_TTFT = SLO(e2e_p95_ms=None, e2e_p99_ms=None, ttft_p95_ms=800.0)


def _table(rows: list[tuple[int, int, float, float]]) -> pd.DataFrame:
    """(users, ok requests, TTFT P95 ms, error rate) per phase, in time order."""
    return pd.DataFrame(
        [
            {
                "phase_index": i,
                "label": f"step-{i + 1} ({users} users)",
                "kind": "step",
                "start_wall": 100.0 * i,
                "users": users,
                "ok": ok,
                "errors": round(ok * err / (1 - err)) if err else 0,
                "requests": ok,
                "rps": ok / 60,
                "output_tokens_per_s": ok,
                "e2e_p50_ms": 500.0,
                "e2e_p95_ms": 900.0,
                "e2e_p99_ms": 950.0,
                "ttft_p95_ms": ttft,
                "ttft_p99_ms": ttft,
                "itl_p95_ms": None,
                "itl_p99_ms": None,
                "tpot_p95_ms": None,
                "tpot_p99_ms": None,
                "error_rate": err,
            }
            for i, (users, ok, ttft, err) in enumerate(rows)
        ]
    )


@pytest.mark.parametrize("thin", [5, 30, 75])
def test_a_percentile_from_too_few_requests_is_not_the_break_point(thin):
    # one long prompt's prefill at 1 user, then the real break at 16 users with plenty of requests
    table = _table([(1, thin, 2000.0, 0.0), (4, 200, 300.0, 0.0), (8, 400, 500.0, 0.0), (16, 800, 1200.0, 0.0)])
    bp = find_break_point(table, SLO_TTFT, streaming=True)
    assert bp["found"] and bp["users"] == 16
    assert bp["not_enough_samples"] and f"from {thin} requests" in bp["not_enough_samples"][0]


@pytest.mark.parametrize("enough", [76, 120, 1000])
def test_enough_requests_make_it_a_break(enough):
    assert min_samples(0.95) == 76
    table = _table([(1, enough, 2000.0, 0.0), (4, 200, 300.0, 0.0)])
    bp = find_break_point(table, SLO_TTFT, streaming=True)
    assert bp["found"] and bp["users"] == 1 and not bp["not_enough_samples"]


@pytest.mark.parametrize("ok", [5, 40])
def test_errors_break_a_thin_phase_all_the_same(ok):
    """The guard is for percentiles: a failed request is a failure however few there were."""
    table = _table([(1, ok, 2000.0, 0.2), (4, 200, 300.0, 0.0)])
    bp = find_break_point(table, SLO_TTFT, streaming=True)
    assert bp["found"] and bp["users"] == 1


def test_only_thin_failures_say_not_enough_samples():
    table = _table([(1, 10, 2000.0, 0.0), (2, 100, 300.0, 0.0)])
    bp = find_break_point(table, SLO_TTFT, streaming=True)
    assert not bp["found"] and bp["reason"].startswith("not enough samples: step-1 (1 users)")
