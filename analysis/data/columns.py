"""A table column as float64 numbers without a copy when it already is one.

`pd.to_numeric(column).to_numpy(dtype=float)` copies even a float64 column (80 MB at 10 M rows, each
time a window or a phase asks); a float64 column's own array is what it would give.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def numbers(column: pd.Series) -> np.ndarray:
    """The column as float64 numbers, NaN where it holds none (read-only when it is the column's own)."""
    if pd.api.types.is_float_dtype(column.dtype) and not isinstance(column.dtype, pd.SparseDtype):
        return column.to_numpy(dtype=float)
    return pd.to_numeric(column, errors="coerce").to_numpy(dtype=float)
