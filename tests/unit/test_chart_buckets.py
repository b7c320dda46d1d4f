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


@pytest.mark.parametrize("chunk_rows", [1, 7, 1_000, 1 << 22])
@pytest.mark.parametrize("seed", range(3))
def test_tokens_per_bucket_is_the_groupby_sum_in_any_chunking(monkeypatch, seed, chunk_rows):
    """The tokens-over-time chart's sums, read a chunk of rows at a time: pandas' groupby over the ok rows."""
    from loadline.analysis.report import charts

    monkeypatch.setattr(charts, "CHUNK_ROWS", chunk_rows)
    rng = np.random.default_rng(seed)
    n, t0, width = int(rng.integers(50, 3_000)), 1_000.0, float(rng.choice([1.0, 2.5, 10.0]))
    requests = pd.DataFrame(
        {
            "status": pd.Categorical(rng.choice(["ok", "error", "cancelled"], n, p=[0.8, 0.1, 0.1])),
            "end_wall": t0 + rng.uniform(-15, 400, n),  # some ended before the first phase began
            "output_tokens": rng.integers(0, 5_000, n),
        }
    )
    held, sums = charts._tokens_per_bucket(requests, t0, width)
    ok = requests[requests["status"] == "ok"]
    expected = ok["output_tokens"].astype(float).groupby((ok["end_wall"] - t0) // width).sum()
    assert np.array_equal(held, expected.index.to_numpy().astype(np.int64))
    assert np.array_equal(sums, expected.to_numpy())
    none_ok = requests.assign(status=pd.Categorical(["error"] * n))
    assert [len(a) for a in charts._tokens_per_bucket(none_ok, t0, width)] == [0, 0]
