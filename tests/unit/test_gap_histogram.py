"""The streamed inter-token gaps: exact percentiles from a per-microsecond histogram, one pass per use."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from loadline.analysis.data.gaps import DENSE_LIMIT_US, GapColumn, GapHistogram, parse_arrow, parse_gaps
from loadline.analysis.stats.phases import PERCENTILES

QS = tuple(q for _, q in PERCENTILES)


@pytest.mark.parametrize("shape", ["chat", "few-values", "long-tail"])
def test_histogram_percentiles_are_numpys_to_the_last_bit(shape):
    rng = np.random.default_rng({"chat": 1, "few-values": 2, "long-tail": 3}[shape])
    for _ in range(700):
        n = int(rng.integers(1, 4000))
        if shape == "chat":
            gaps = rng.integers(0, 60_000, n)
        elif shape == "few-values":
            gaps = rng.integers(0, 20, n)
        else:  # beyond the dense range, and a negative gap (a clock step)
            gaps = np.r_[rng.integers(-3, 1000, n), rng.integers(DENSE_LIMIT_US, 3 * DENSE_LIMIT_US, 5)]
        gaps = gaps.astype(np.int32)
        histogram = GapHistogram()
        for part in np.array_split(gaps, 3):
            histogram.add(part)
        assert np.array_equal(histogram.percentiles(QS), np.percentile(gaps, QS))
        assert histogram.count == gaps.size


def test_merged_histograms_hold_every_gap_of_both():
    rng = np.random.default_rng(4)
    a, b = rng.integers(0, 50_000, 999).astype(np.int32), rng.integers(0, 9_000_000, 500).astype(np.int32)
    left, right = GapHistogram(), GapHistogram()
    left.add(a)
    right.add(b)
    left.merge(right)
    both = np.r_[a, b]
    assert np.array_equal(left.percentiles(QS), np.percentile(both, QS))
    assert np.array_equal(
        left.positive().quantiles(np.array([0.0, 0.5, 1.0])), np.quantile(both[both > 0], [0, 0.5, 1])
    )


def test_an_empty_histogram_has_no_percentiles():
    assert np.isnan(GapHistogram().percentiles(QS)).all()


def test_a_gap_column_groups_rows_scales_gaps_and_skips_dropped_rows():
    strings = np.array(["100 200", "", None, "7", "1 2 3", "50"], dtype=object)
    column = GapColumn.in_memory(strings)
    keys = np.array([0, 0, 1, 1, -1, 0])
    groups = column.histograms(keys)
    assert sorted(groups) == [0, 1]
    assert groups[0].count == 3 and groups[1].count == 1
    assert np.array_equal(column.scaled(10).pooled(np.array([1, 0, 0, 1, 0, 0], bool)), [1000, 2000, 70])
    # a table that kept source rows 0, 3 and 5 (the loader dropped the others)
    kept = GapColumn(column.batches_of_source, len(strings), rows=np.array([0, 3, 5]))
    assert np.array_equal(kept.pooled(np.array([False, True, True])), [7, 50])


def test_parse_gaps_reads_every_gap_in_row_order():
    assert np.array_equal(parse_gaps(["1 2", "", None, "30 40 5"]), [1, 2, 30, 40, 5])


@pytest.mark.parametrize("seed", range(4))
def test_parse_reads_what_python_reads_whatever_the_whitespace(seed):
    """The parser sizes its output from the text first: every separator run, leading or trailing
    blank, tab, wide value (wrapped to int32 as before) and empty row must give the same gaps."""
    rng = np.random.default_rng(seed)
    for _ in range(60):
        rows = []
        for _ in range(int(rng.integers(1, 30))):
            values = rng.integers(-5, 3_000_000_000 if rng.random() < 0.1 else 100_000, int(rng.integers(0, 6)))
            text = str(rng.choice([" ", "  ", "\t", " \t"]) if rng.random() < 0.3 else " ").join(map(str, values))
            text = (" " if rng.random() < 0.1 else "") + text + (" " if rng.random() < 0.1 else "")
            rows.append(None if rng.random() < 0.05 else text)
        expected = np.array([int(v) for row in rows if row for v in row.split()], dtype=np.int64).astype(np.int32)
        as_text = pa.array(rows, type=pa.string())
        assert np.array_equal(parse_arrow(as_text), expected)
        assert np.array_equal(parse_arrow(as_text.cast(pa.binary())), expected)  # the CSV pass reads bytes


def test_parse_refuses_text_that_is_not_numbers():
    with pytest.raises(ValueError):
        parse_gaps(["1 2", "3 x4"])
