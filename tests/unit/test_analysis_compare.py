"""The regression rule of `loadline compare`: past the threshold AND beyond sampling noise."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from loadline.analysis.stats.compare import _latency_rows, _sweep_row, match_phases, quantile_interval


def test_quantile_interval_brackets_the_estimate_and_narrows_with_n():
    rng = np.random.default_rng(0)
    small = np.sort(rng.exponential(100, 50))
    large = np.sort(rng.exponential(100, 50_000))
    for samples in (small, large):
        value, low, high = quantile_interval(samples, 0.95)
        assert low <= value <= high
    assert (
        quantile_interval(large, 0.95)[2] - quantile_interval(large, 0.95)[1]
        < (quantile_interval(small, 0.95)[2] - quantile_interval(small, 0.95)[1]) / 5
    )
    # the true P95 of Exp(100) is 299.6: the interval from 50,000 samples must contain it
    _, low, high = quantile_interval(large, 0.95)
    assert low < 100 * np.log(20) < high


def _samples(rng, n, scale):
    return {m: rng.exponential(scale, n) for m in ("e2e", "ttft", "tpot")} | {"itl": np.full(n, 20_000, dtype=np.int32)}


def _flag(rows, metric):
    return next(r for r in rows if r["metric"] == metric)["regression"]


def test_a_big_shift_with_many_samples_is_a_regression():
    rng = np.random.default_rng(1)
    rows = _latency_rows("p", _samples(rng, 20_000, 100.0), _samples(rng, 20_000, 130.0), threshold=0.10)
    assert _flag(rows, "e2e_p95_ms") and _flag(rows, "e2e_p50_ms")
    assert not _flag(rows, "itl_p99_ms")  # unchanged gaps


def test_the_same_shift_on_few_samples_is_noise_for_the_tail():
    rng = np.random.default_rng(2)
    # 30 % worse on average, but a P99 from 20 samples is one or two observations: not evidence
    rows = _latency_rows("p", _samples(rng, 20, 100.0), _samples(rng, 20, 130.0), threshold=0.10)
    assert not _flag(rows, "e2e_p99_ms")


def test_below_the_threshold_is_never_a_regression():
    rng = np.random.default_rng(3)
    rows = _latency_rows("p", _samples(rng, 50_000, 100.0), _samples(rng, 50_000, 105.0), threshold=0.10)
    assert not any(r["regression"] for r in rows)


def test_phases_match_by_label_when_the_timelines_differ():
    base = pd.DataFrame({"label": ["baseline", "step-1", "step-2"]})
    new = pd.DataFrame({"label": ["baseline", "step-2", "step-3"]})
    pairs, unmatched = match_phases(base, new)
    assert pairs == [(0, 0), (2, 1)]
    assert unmatched == ["base only: step-1", "new only: step-3"]


@pytest.mark.parametrize(
    "base, new, regression",
    [
        (32.9, 17.6, True),  # the answer fell by 46 %
        (32.9, 28.0, True),  # 15 %: past the 10 % threshold (the sweep's own resolution is 5 %)
        (32.9, 31.0, False),  # 6 %: within the threshold
        (17.6, 32.9, False),  # it rose
        (20.0, None, True),  # no compliant rate any more
        (None, 20.0, False),  # the base had none
    ],
)
def test_a_sweeps_answer_regresses_when_it_falls_past_the_threshold_or_to_none(base, new, regression):
    row = _sweep_row({"sweep_max_rate": base}, {"sweep_max_rate": new}, threshold=0.10)
    assert row["phase"] == "sweep" and row["regression"] is regression
    assert math.isnan(row["new"]) if new is None else row["new"] == new


def test_runs_that_did_not_both_sweep_have_no_sweep_row():
    assert _sweep_row({"sweep_max_rate": 20.0}, {}, 0.10) is None
    assert _sweep_row({}, {}, 0.10) is None
