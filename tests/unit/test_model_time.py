"""analysis/data/timescale.py: a time-scaled run folder crosses from wall to model time once, when read."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from loadline.analysis.data.load import RunData
from loadline.analysis.data.timescale import model_run

T0 = 1_000.0


def scaled_run(scale: float) -> RunData:
    requests = pd.DataFrame(
        {
            "start_wall": [T0 + 1.0],
            "end_wall": [T0 + 1.1],
            "due_wall": [T0 + 0.9],
            "ttft_ms": [20.0],
            "e2e_ms": [100.0],
            "lateness_ms": [100.0],
            "itl_us": ["1000 2500"],
            "output_tokens": [3],
            "status": ["ok"],
        }
    )
    phases = pd.DataFrame({"label": ["step"], "start_wall": [T0], "end_wall": [T0 + 10.0], "target_rate": [2.0]})
    le = json.dumps({"le": "0.5"})
    server = pd.DataFrame(
        [
            (T0 + 2.0, "engine", "vllm:time_to_first_token_seconds_sum", "{}", 0.25),
            (T0 + 2.0, "engine", "vllm:time_to_first_token_seconds_count", "{}", 4.0),
            (T0 + 2.0, "engine", "vllm:time_to_first_token_seconds_bucket", le, 4.0),
            (T0 + 2.0, "engine", "vllm:num_requests_running", "{}", 8.0),
        ],
        columns=["ts", "source", "metric", "labels", "value"],
    )
    generator = pd.DataFrame({"ts": [T0 + 4.0], "worker_id": ["w"], "cpu_percent": [50.0], "loop_lag_ms": [2.0]})
    faults = pd.DataFrame({"ts": [T0 + 5.0], "outcome": ["ok"]})
    return RunData(Path("run"), {"time_scale": scale}, requests, phases, server, generator, None, faults=faults)


def test_timestamps_latencies_and_itl_gaps_are_model_time_from_the_first_phase_start():
    model = model_run(scaled_run(10.0))
    row = model.requests.iloc[0]
    assert row["start_wall"] == pytest.approx(T0 + 10.0) and row["end_wall"] == pytest.approx(T0 + 11.0)
    assert row["due_wall"] == pytest.approx(T0 + 9.0) and row["lateness_ms"] == pytest.approx(1000.0)
    assert (row["ttft_ms"], row["e2e_ms"], row["itl_us"], row["output_tokens"]) == (200.0, 1000.0, "10000 25000", 3)
    assert model.phases.iloc[0]["end_wall"] == pytest.approx(T0 + 100.0) and model.phases.iloc[0]["target_rate"] == 2.0
    assert model.faults.iloc[0]["ts"] == pytest.approx(T0 + 50.0)
    assert model.wall_second == 10.0


def test_server_seconds_series_scale_and_counts_and_gauges_stay():
    server = model_run(scaled_run(10.0)).server_metrics.set_index("metric")
    assert server.loc["vllm:time_to_first_token_seconds_sum", "value"] == pytest.approx(2.5)
    assert server.loc["vllm:time_to_first_token_seconds_count", "value"] == 4.0
    assert float(json.loads(server.loc["vllm:time_to_first_token_seconds_bucket", "labels"])["le"]) == pytest.approx(
        5.0
    )
    assert server.loc["vllm:num_requests_running", "value"] == 8.0
    assert server["ts"].tolist() == pytest.approx([T0 + 20.0] * 4)


def test_the_generators_own_samples_keep_their_wall_values():
    generator = model_run(scaled_run(10.0)).generator.iloc[0]
    assert generator["ts"] == pytest.approx(T0 + 40.0)
    assert (generator["cpu_percent"], generator["loop_lag_ms"]) == (50.0, 2.0)


def test_an_unscaled_or_converted_run_is_returned_as_it_is():
    plain = scaled_run(1.0)
    assert model_run(plain) is plain
    model = model_run(scaled_run(10.0))
    assert model_run(model) is model
