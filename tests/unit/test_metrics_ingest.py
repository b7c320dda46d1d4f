"""Prometheus text and query_range JSON -> the long server-metrics table, and the vocabulary over it."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from loadline.analysis.data.prom_ingest import load_query_range, load_text_snapshots, parse_text
from loadline.analysis.data.vocabulary import CONCEPTS, concept_samples, present_concepts
from loadline.analysis.verdict.signals import Signals, bucket_quantile
from loadline.core.errors import UsageError
from loadline.core.runfolder import SERVER_METRIC_COLUMNS

PAGE = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 7.0
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} 3.0
vllm:num_preemptions_created{engine="0",model_name="m"} 1.7e9
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 3.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 3.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.5
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="x"} 87
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="y"} 93
weird_gauge NaN
"""


def test_text_page_becomes_long_rows_with_sorted_json_labels():
    df = parse_text(PAGE, 100.0, "target")
    assert list(df.columns) == list(SERVER_METRIC_COLUMNS)
    assert "vllm:num_preemptions_created" not in set(df["metric"])  # creation stamps are not data
    assert "weird_gauge" not in set(df["metric"])  # NaN dropped
    row = df[df["metric"] == "vllm:num_requests_running"].iloc[0]
    assert row["labels"] == '{"engine":"0","model_name":"m"}' and row["value"] == 7.0 and row["ts"] == 100.0
    assert set(df["metric"]) >= {"vllm:time_to_first_token_seconds_bucket", "vllm:num_preemptions_total"}


def test_bad_text_is_a_usage_error():
    with pytest.raises(UsageError):
        parse_text("this is { not metrics", 1.0)


def test_vocabulary_converts_units_and_combines_series():
    s = Signals(parse_text(PAGE, 100.0))
    assert s.gauge("gpu_util", 0, 200).mean == pytest.approx(0.90)  # percent -> fraction, mean over GPUs
    assert s.gauge("running", 0, 200).max == 7
    assert {"running", "preemptions", "ttft", "gpu_util"} <= set(present_concepts(s.table))


@pytest.mark.parametrize("name", ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"])
def test_old_and_new_names_map_to_one_concept(name):
    df = parse_text(f"{name} 0.42\n", 1.0)
    assert concept_samples(df, "kv_usage")["value"].tolist() == [0.42]


def test_label_filters_pick_the_right_series():
    text = (
        'tgi_batch_forward_duration_count{method="prefill"} 4\ntgi_batch_forward_duration_sum{method="prefill"} 2\n'
        'tgi_batch_forward_duration_count{method="decode"} 10\ntgi_batch_forward_duration_sum{method="decode"} 1\n'
    )
    df = parse_text(text, 1.0)
    assert concept_samples(df, "prefill_time")["value"].sum() == 6
    assert concept_samples(df, "decode_time")["value"].sum() == 11


def test_every_concept_has_a_known_kind():
    assert all(c.kind in ("gauge", "counter", "histogram") and c.sources for c in CONCEPTS.values())


def test_counter_increase_survives_a_restart_and_histogram_windows():
    pages = []
    for ts, pre, count, under in [(0, 5, 10, 10), (10, 8, 20, 15), (20, 2, 25, 20), (30, 4, 35, 22)]:
        pages.append(
            parse_text(
                f"vllm:num_preemptions_total {pre}\n"
                f'vllm:time_to_first_token_seconds_bucket{{le="0.1"}} {under}\n'
                f'vllm:time_to_first_token_seconds_bucket{{le="1.0"}} {count}\n'
                f'vllm:time_to_first_token_seconds_bucket{{le="+Inf"}} {count}\n'
                f"vllm:time_to_first_token_seconds_count {count}\nvllm:time_to_first_token_seconds_sum {count * 0.2}\n",
                float(ts),
            )
        )
    import pandas as pd

    s = Signals(pd.concat(pages, ignore_index=True))
    # 5 -> 8 (+3), restart to 2 (+2), -> 4 (+2)
    assert s.increase("preemptions", 0, 30) == 7
    assert s.resets("preemptions") == [20.0]
    h = s.histogram("ttft", 10, 30)  # observations between the scrapes at 10 and 30
    assert h.count == 15 and h.mean == pytest.approx(0.2)
    assert 0.1 < h.p50 <= 1.0


def test_bucket_quantile_interpolates_like_prometheus():
    les = np.array([0.1, 0.5, 1.0, np.inf])
    assert bucket_quantile(0.5, les, np.array([0.0, 10.0, 10.0, 10.0])) == pytest.approx(0.3)
    assert bucket_quantile(0.99, les, np.array([0.0, 0.0, 0.0, 5.0])) == 1.0  # above the last bound
    assert bucket_quantile(0.5, les, np.zeros(4)) is None


def _query_range(values):
    return {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {
                    "metric": {"__name__": "vllm:num_requests_waiting", "instance": "10.0.0.1:8000", "model_name": "m"},
                    "values": values,
                }
            ],
        },
    }


def test_query_range_json_and_gzip(tmp_path):
    doc = _query_range([[100, "3"], [115, "NaN"], [130, "+Inf"], [145, "5"]])
    plain, packed = tmp_path / "a.json", tmp_path / "b.json.gz"
    plain.write_text(json.dumps(doc))
    packed.write_bytes(gzip.compress(json.dumps(doc).encode()))
    df = load_query_range([plain, packed])
    assert list(df.columns) == list(SERVER_METRIC_COLUMNS)
    assert df["value"].tolist() == [3.0, 3.0, 5.0, 5.0]  # NaN and Inf dropped
    assert set(df["source"]) == {"10.0.0.1:8000"}
    assert json.loads(df["labels"].iloc[0]) == {"instance": "10.0.0.1:8000", "model_name": "m"}


@pytest.mark.parametrize(
    "content",
    [
        '{"status":"error","error":"bad query"}',
        "not json",
        '{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[]}]}}',
    ],
)
def test_bad_query_range_is_a_one_line_usage_error(content, tmp_path):
    path = tmp_path / "x.json"
    path.write_text(content)
    with pytest.raises(UsageError) as err:
        load_query_range([path])
    assert "\n" not in str(err.value)
    with pytest.raises(UsageError):
        load_query_range([tmp_path / "missing.json"])


def test_text_snapshots_take_their_time_from_the_header(tmp_path):
    (tmp_path / "a.prom").write_text("# ts 1000.5\nvllm:num_requests_running 2\n")
    (tmp_path / "b.prom").write_text("# ts 1010\nvllm:num_requests_running 4\n")
    df = load_text_snapshots(sorted(tmp_path.glob("*.prom")))
    assert df["ts"].tolist() == [1000.5, 1010.0] and df["value"].tolist() == [2.0, 4.0]
