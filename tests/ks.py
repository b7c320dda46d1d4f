"""One-sample Kolmogorov-Smirnov test in numpy (scipy is not a dependency): does a sample fit a distribution?"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def ks_pvalue(sample, cdf: Callable[[np.ndarray], np.ndarray]) -> float:
    """p-value of the one-sample KS test of `sample` against the continuous `cdf` (asymptotic Kolmogorov
    distribution with Stephens' small-sample correction; good to ~1e-3 for n >= 20)."""
    x = np.sort(np.asarray(sample, dtype=float))
    n = len(x)
    f = cdf(x)
    d = max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n))
    t = (np.sqrt(n) + 0.12 + 0.11 / np.sqrt(n)) * d
    k = np.arange(1, 101)
    return float(np.clip(2 * np.sum((-1.0) ** (k - 1) * np.exp(-2 * k**2 * t**2)), 0.0, 1.0))


def exponential_cdf(rate: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: 1.0 - np.exp(-rate * x)
