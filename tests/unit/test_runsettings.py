"""Run-wide settings: one time-scale validation, one manifest accessor, one model-time rule."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pandas as pd
import pytest

from loadline.analysis.data.timescale import point_to_model, time_scale, to_model_time
from loadline.core.errors import UsageError
from loadline.core.runsettings import streaming_of, time_scale_of, time_scale_of_options, validate_time_scale
from loadline.runtime import live


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "fast", True])
def test_a_bad_time_scale_is_one_usage_error_line(bad):
    with pytest.raises(UsageError) as raised:
        validate_time_scale(bad)
    assert "--time-scale" in str(raised.value) and "\n" not in str(raised.value)


def test_the_time_scale_of_options_and_of_a_manifest():
    assert validate_time_scale("2.5") == 2.5 and validate_time_scale(None) == 1.0
    assert time_scale_of_options(SimpleNamespace(time_scale=20.0)) == 20.0 and time_scale_of_options(None) == 1.0
    assert time_scale_of({"time_scale": 20.0, "options": {"time_scale": 5}}) == 20.0  # the manifest's own key wins
    assert time_scale_of({"options": {"time_scale": 5}}) == 5.0  # runs written before the key existed
    assert time_scale_of({"time_scale": -3}) == 1.0 and time_scale_of(None) == 1.0
    assert time_scale({"time_scale": 20.0}) == 20.0  # analysis reads the same accessor


def test_streaming_of_a_manifest():
    assert streaming_of({"streaming": False}) is False
    assert streaming_of({"options": {"non_streaming": True}}) is False
    assert streaming_of({"options": {"non_streaming": False}}) is True
    assert streaming_of({}) is None


def test_the_live_window_and_the_report_table_convert_to_model_time_alike():
    summary = live.WindowSummary(
        0.0,
        10.0,
        100,
        100,
        0,
        0,
        0.0,
        50.0,
        95.0,
        99.0,
        5.0,
        9.5,
        9.9,
        1.0,
        400.0,
        10.0,
        {},
        itl_p95_ms=2.0,
        itl_p99_ms=3.0,
        tpot_p95_ms=1.5,
        tpot_p99_ms=1.8,
        itl_pooled_p50_ms=1.2,
        ttfo_p95_ms=30.0,
        ttfo_p99_ms=40.0,
    )
    scaled = live.to_model_time(summary, 20.0)
    table = to_model_time(pd.DataFrame([dataclasses.asdict(summary)]).drop(columns="errors_by_class"), 20.0)
    for name, value in table.iloc[0].items():
        assert getattr(scaled, name) == pytest.approx(value), name
    assert scaled.e2e_p95_ms == 1900.0 and scaled.rps == 0.5 and scaled.requests == 100
    assert point_to_model({"e2e_p95_ms": 95.0, "rps": 10.0, "users": 8}, 20.0) == {
        "e2e_p95_ms": 1900.0,
        "rps": 0.5,
        "users": 8,
    }
