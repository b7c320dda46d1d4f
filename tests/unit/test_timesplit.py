"""Where does the time go? Client means split by the engine's own histograms, in each engine's dialect."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from loadline.analysis.data.load import RunData
from loadline.analysis.data.timescale import model_run
from loadline.analysis.verdict.timesplit import time_split
from tests.synthetic import make_requests

PHASES = pd.DataFrame({"label": ["step 1"], "start_wall": [1000.0], "end_wall": [1030.0]})
N = 50  # requests the engine finished in the phase


def _hist(name: str, mean_s: float, labels: dict | None = None) -> list[tuple]:
    """A histogram scraped before (all zero) and after the phase: N observations averaging mean_s."""
    text = json.dumps(labels or {}, sort_keys=True)
    rows = []
    for ts, count in ((999.0, 0), (1029.5, N)):
        rows += [(ts, "target", f"{name}_count", text, count), (ts, "target", f"{name}_sum", text, count * mean_s)]
    return rows


def _metrics(*hists: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame([r for h in hists for r in h], columns=["ts", "source", "metric", "labels", "value"])


def _requests(ttft_ms: float, e2e_ms: float) -> pd.DataFrame:
    starts = np.linspace(1001.0, 1028.0, N)
    return make_requests(starts, [e2e_ms] * N, ttft_ms=[ttft_ms] * N)


VLLM = _metrics(
    _hist("vllm:time_to_first_token_seconds", 0.088),
    _hist("vllm:request_queue_time_seconds", 0.020),
    _hist("vllm:request_prefill_time_seconds", 0.060),
    _hist("vllm:request_decode_time_seconds", 0.500),
    _hist("vllm:e2e_request_latency_seconds", 0.590),
)


def test_a_slow_proxy_is_outside_engine_with_the_numbers_even_without_a_limit():
    # a fixed 400 ms in front of the engine; client TTFT 579 ms vs the engine's 88 ms
    split = time_split(_requests(579.0, 1081.0), PHASES, VLLM)
    assert split["dominant"] == "outside-engine"
    ttft = split["run"]["ttft"]
    assert ttft["client_ms"] == pytest.approx(579.0) and ttft["engine_ms"] == pytest.approx(88.0)
    assert ttft["outside_ms"] == pytest.approx(491.0) and ttft["queue_ms"] == pytest.approx(20.0)
    assert ttft["prefill_ms"] == pytest.approx(60.0) and ttft["engine_other_ms"] == pytest.approx(8.0)
    assert split["run"]["e2e"]["decode_ms"] == pytest.approx(500.0)
    assert "579 ms" in split["sentence"] and "88 ms" in split["sentence"]
    assert split["phases"][0]["phase"] == "step 1"


def test_a_direct_client_is_not_outside_and_the_largest_engine_part_is_named():
    split = time_split(_requests(95.0, 600.0), PHASES, VLLM)
    assert split["dominant"] == "prefill"
    assert split["run"]["ttft"]["outside_ms"] == pytest.approx(7.0)


def test_model_time_and_the_clients_own_floor_are_not_blamed_on_the_path():
    # time-scaled x20: 10 ms of wall gap is 200 ms of model time, but the client's floor explains it
    fast = VLLM.copy()
    sums = fast["metric"].str.endswith("_sum")
    fast.loc[sums, "value"] = fast.loc[sums, "value"] / 20  # the engine ran 20x faster: 4.4 ms wall TTFT
    run = RunData(Path("run"), {"time_scale": 20}, _requests(14.4, 40.0), PHASES, fast, pd.DataFrame(), None)
    model = model_run(run)  # what the report reads: the run folder in model time
    split = time_split(model.requests, model.phases, model.server_metrics, floor_model_ms=180.0)
    assert split["run"]["ttft"]["client_ms"] == pytest.approx(288.0)
    assert split["run"]["ttft"]["outside_ms"] == pytest.approx(200.0)
    assert split["dominant"] == "client-floor"
    # the same gap with no floor to explain it is the path's
    assert time_split(model.requests, model.phases, model.server_metrics)["dominant"] == "outside-engine"


def test_sglang_prefill_is_ttft_minus_queue_and_tgi_ttft_is_queue_plus_prefill():
    sglang = _metrics(
        _hist("sglang:time_to_first_token_seconds", 0.100),
        _hist("sglang:queue_time_seconds", 0.030),
        _hist("sglang:e2e_request_latency_seconds", 0.600),
    )
    ttft = time_split(_requests(110.0, 610.0), PHASES, sglang)["run"]["ttft"]
    assert ttft["prefill_ms"] == pytest.approx(70.0) and ttft["outside_ms"] == pytest.approx(10.0)
    tgi = _metrics(
        _hist("tgi_request_queue_duration", 0.040),
        _hist("tgi_batch_forward_duration", 0.050, {"method": "prefill"}),
        _hist("tgi_batch_forward_duration", 0.010, {"method": "decode"}),
        _hist("tgi_request_duration", 0.700),
    )
    ttft = time_split(_requests(500.0, 1100.0), PHASES, tgi)["run"]["ttft"]
    assert ttft["engine_ms"] == pytest.approx(90.0) and ttft["outside_ms"] == pytest.approx(410.0)


def test_no_engine_histograms_says_so():
    split = time_split(
        _requests(100.0, 500.0), PHASES, pd.DataFrame(columns=["ts", "source", "metric", "labels", "value"])
    )
    assert split["available"] is False and "scrape" in split["why"]


@pytest.mark.parametrize("client_ttft, engine_ttft", [(86.0, 88.0), (60.0, 88.0), (87.9, 88.0)])
def test_an_outside_time_below_zero_is_said_as_the_measurements_limit(client_ttft, engine_ttft):
    metrics = _metrics(
        _hist("vllm:time_to_first_token_seconds", engine_ttft / 1000), _hist("vllm:e2e_request_latency_seconds", 0.590)
    )
    split = time_split(_requests(client_ttft, 590.0), PHASES, metrics)
    assert split["run"]["ttft"]["outside_ms"] < 0
    assert "about 0 ms outside the engine (measured" in split["sentence"]
    assert split["caveat"].startswith("outside the engine reads below zero in step 1, whole run")


def test_the_whole_run_ends_with_its_last_phase_like_its_phases():
    """Requests the client cancelled at the stop that the engine finished later are on neither side."""
    late = [(1029.5, N, 0.088), (1040.0, N + 20, 0.088 + 20 * 3.0 / (N + 20))]  # 20 slow ones after the end
    rows = []
    for ts, count, mean in late:
        for name in ("vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds"):
            rows += [(ts, "target", f"{name}_count", "{}", count), (ts, "target", f"{name}_sum", "{}", count * mean)]
    metrics = _metrics(_hist("vllm:time_to_first_token_seconds", 0.0)[:2], rows)
    split = time_split(_requests(90.0, 600.0), PHASES, metrics)
    whole, phase = split["run"]["ttft"], split["phases"][0]["ttft"]
    assert whole["engine_ms"] == pytest.approx(phase["engine_ms"]) == pytest.approx(88.0)
    assert not split["caveat"]
