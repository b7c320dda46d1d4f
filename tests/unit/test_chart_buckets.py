"""The latency-over-time chart's per-bucket percentiles are pandas' groupby quantiles, exactly."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loadline.analysis.report.charts import bucket_quantiles


@pytest.mark.parametrize("seed", range(5))
def test_bucket_quantiles_are_pandas_groupby_quantiles(seed):
    rng = np.random.default_rng(seed)
    for _ in range(60):
        n = int(rng.integers(1, 400))
        codes = rng.integers(-3, int(rng.integers(-2, 40)), n)  # negative: requests ended before the first phase
        values = rng.lognormal(3.0, 1.0, n)
        values[rng.random(n) < 0.1] = np.nan
        if rng.random() < 0.3:
            values = np.round(values)  # ties
        qs = (0.0, 0.5, 0.95, 0.99, 1.0)
        buckets, lines = bucket_quantiles(codes, values, qs)
        for q, line in zip(qs, lines):
            expected = pd.Series(values).groupby(codes).quantile(q).dropna()
            assert np.array_equal(buckets, expected.index.to_numpy())
            assert np.array_equal(line, expected.to_numpy())


def test_no_values_no_buckets():
    buckets, lines = bucket_quantiles(np.array([1, 2]), np.array([np.nan, np.nan]), (0.5,))
    assert len(buckets) == 0 and lines.shape == (1, 0)
