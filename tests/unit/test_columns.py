"""Columns as float64 numbers: the column's own array when it is one, else parsed, NaN for the rest."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loadline.analysis.data.columns import numbers


def test_a_float_column_is_read_without_a_copy():
    column = pd.Series(np.array([1.5, np.nan, 3.0]))
    assert np.shares_memory(numbers(column), column.to_numpy())


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        (pd.Series([1, 2]), [1.0, 2.0]),
        (pd.Series(["1.5", "x", None]), [1.5, np.nan, np.nan]),
        (pd.Series([1.0, 2.0], dtype="float32"), [1.0, 2.0]),
        (pd.Series(pd.arrays.SparseArray([np.nan, 1.0])), [np.nan, 1.0]),
        (pd.Series(["a", "2"], dtype="category"), [np.nan, 2.0]),
    ],
)
def test_other_columns_are_parsed_as_numbers(column, expected):
    got = numbers(column)
    assert got.dtype == np.float64
    assert np.array_equal(got, np.array(expected), equal_nan=True)
