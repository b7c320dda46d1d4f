"""llama.cpp and Triton/TensorRT-LLM metrics through the vocabulary and Signals.

The llama.cpp pages in tests/data/llamacpp_metrics/ are real `/metrics` scrapes of `llama-server`
(8 slots, one thread, the tiny model of tests/real/make_tiny_gguf.py): a fresh idle server, five
scrapes at 2 users, eight at 16 users (slots pinned, requests deferred), and idle afterwards. The
Triton pages are written from the exposition in NVIDIA's sources (see analysis/data/metric_names.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from loadline.analysis.data.prom_ingest import load_text_snapshots, parse_text
from loadline.analysis.data.vocabulary import concept_samples, dialect_gaps, engine_dialects, present_concepts
from loadline.analysis.verdict.signals import Signals

PAGES = Path(__file__).resolve().parents[1] / "data" / "llamacpp_metrics"
LLAMACPP_CONCEPTS = {
    "running",
    "waiting",
    "prompt_tokens",
    "gen_tokens",
    "prompt_seconds",
    "decode_seconds",
    "engine_steps",
    "busy_slots_per_step",
}


def _window(pattern: str) -> tuple[float, float]:
    ts = load_text_snapshots(sorted(PAGES.glob(pattern)))["ts"]
    return float(ts.min()), float(ts.max())


@pytest.fixture(scope="module")
def llama() -> Signals:
    return Signals(load_text_snapshots(sorted(PAGES.glob("*.prom"))))


def test_a_fresh_llama_server_page_maps_to_the_scheduler_concepts():
    table = load_text_snapshots([PAGES / "idle_fresh.prom"])
    assert LLAMACPP_CONCEPTS <= set(present_concepts(table))
    assert engine_dialects(table) == ["llama.cpp"]
    s = Signals(table)
    assert s.gauge("running", 0, 2e10).max == 0 and s.gauge("waiting", 0, 2e10).max == 0
    assert s.source("running").name == "llamacpp:requests_processing"
    assert s.source("waiting").name == "llamacpp:requests_deferred"
    # a counter typed without _total is stored with the _total the parser appends: not confused with gen_tokens
    assert "llamacpp:n_tokens_max_total" in set(table["metric"])


def test_llama_cpp_says_what_it_does_not_export(llama):
    gaps = llama.gaps()
    assert {"kv_usage", "preemptions", "running_cap", "ttft"} <= set(gaps)
    assert "KV-cache" in gaps["kv_usage"] and "/props total_slots" in gaps["running_cap"]
    assert "running" not in gaps and "waiting" not in gaps


def test_an_older_llama_cpp_with_kv_usage_has_no_kv_gap():
    table = parse_text(
        "llamacpp:kv_cache_usage_ratio 0.25\nllamacpp:kv_cache_tokens 512\nllamacpp:requests_processing 3\n", 1.0
    )
    assert concept_samples(table, "kv_usage")["value"].tolist() == [0.25]
    assert concept_samples(table, "kv_tokens")["value"].tolist() == [512]
    assert "kv_usage" not in dialect_gaps(table) and "preemptions" in dialect_gaps(table)


def test_sixteen_users_pin_the_eight_slots_and_requests_are_deferred(llama):
    cap = llama.running_cap()
    assert cap is not None and cap.value == 8  # the server ran with --parallel 8
    assert "waited" in cap.how
    busy = llama.slot_saturation(*_window("users16_*.prom"))
    assert busy.pinned_share == 1.0 and busy.waiting_share == 1.0 and busy.both_share == 1.0
    assert busy.running.p50 == 8 and busy.waiting.mean > 3  # 16 users - 8 slots, minus those thinking
    calm = llama.slot_saturation(*_window("users02_*.prom"))
    assert calm.pinned_share == 0.0 and calm.waiting_share == 0.0 and calm.running.max <= 2


def test_no_cap_is_inferred_when_nothing_ever_waited():
    s = Signals(load_text_snapshots(sorted(PAGES.glob("users02_*.prom"))))
    assert s.running_cap() is None and s.slot_saturation(*_window("users02_*.prom")) is None


def test_the_windowed_batch_per_step_undoes_the_since_start_average(llama):
    start, end = _window("users16_*.prom")
    since_start = llama.gauge("busy_slots_per_step", start, end)
    assert since_start.max < 2.5  # the exported mean still carries the quiet minutes before
    assert llama.batch_per_step(start, end) == pytest.approx(8.0, abs=0.05)  # every step ran all 8 slots
    assert 1.0 <= llama.batch_per_step(*_window("users02_*.prom")) <= 2.0


def test_engine_time_per_token_and_token_counts(llama):
    w2, w16 = _window("users02_*.prom"), _window("users16_*.prom")
    # one CPU thread: eight sequences per step make each token several times slower
    assert llama.time_per_token(*w16) > 3 * llama.time_per_token(*w2)
    assert 0 < llama.time_per_token(*w2, phase="prompt") < llama.time_per_token(*w2)
    first = load_text_snapshots([PAGES / "users16_27.prom"])
    last = load_text_snapshots([PAGES / "users16_34.prom"])
    counter = "llamacpp:tokens_predicted_total"
    delta = (
        last.loc[last["metric"] == counter, "value"].iloc[0] - first.loc[first["metric"] == counter, "value"].iloc[0]
    )
    assert llama.increase("gen_tokens", *w16) == delta
    assert delta % 64 == 0  # every request ran to max_tokens=64 (the tiny model never emits EOS)


TRITON_TRTLLM = """# TYPE nv_inference_request_failure counter
nv_inference_request_failure{model="ensemble",version="1"} 2
nv_inference_request_failure{model="tensorrt_llm",version="1"} 3
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="tensorrt_llm",version="1"} 9
# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{gpu_uuid="GPU-1"} 0.97
# TYPE nv_gpu_memory_used_bytes gauge
nv_gpu_memory_used_bytes{gpu_uuid="GPU-1"} 2147483648
# TYPE nv_trt_llm_request_metrics gauge
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="waiting",version="1"} 4
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="context",version="1"} 1
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="scheduled",version="1"} 60
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="max",version="1"} 64
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="active",version="1"} 64
# TYPE nv_trt_llm_kv_cache_block_metrics gauge
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="tokens_per",model="tensorrt_llm",version="1"} 64
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="used",model="tensorrt_llm",version="1"} 5000
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="max",model="tensorrt_llm",version="1"} 6239
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction",model="tensorrt_llm",version="1"} 0.8014
# TYPE nv_trt_llm_general_metrics gauge
nv_trt_llm_general_metrics{general_type="iteration_counter",model="tensorrt_llm",version="1"} 6189
# TYPE nv_llm_output_token_len histogram
nv_llm_output_token_len_bucket{le="10",model="tensorrt_llm",response_metric_type="total_output_tokens",version="1"} 0
nv_llm_output_token_len_bucket{le="+Inf",model="tensorrt_llm",response_metric_type="total_output_tokens",version="1"} 20
nv_llm_output_token_len_count{model="tensorrt_llm",response_metric_type="total_output_tokens",version="1"} 20
nv_llm_output_token_len_sum{model="tensorrt_llm",response_metric_type="total_output_tokens",version="1"} 2560
"""


def test_triton_tensorrt_llm_labels_pick_each_concept():
    s = Signals(parse_text(TRITON_TRTLLM, 10.0))
    assert s.engines() == ["triton tensorrt-llm"]  # the backend's metrics speak for Triton's core ones
    assert s.gauge("running", 0, 20).max == 64  # request_type="active", not scheduled/context
    assert s.gauge("waiting", 0, 20).max == 4  # the backend's waiting wins over Triton's pending count
    assert s.running_cap().value == 64 and "nv_trt_llm_request_metrics" in s.running_cap().how
    assert s.slot_saturation(0, 20).both_share == 1.0
    assert s.gauge("kv_usage", 0, 20).max == pytest.approx(0.8014)
    assert s.gauge("gpu_util", 0, 20).max == pytest.approx(0.97)
    assert s.gauge("gpu_mem_used", 0, 20).max == pytest.approx(2048.0)  # bytes -> MiB
    assert concept_samples(s.table, "engine_errors")["value"].sum() == 5  # scraped name gained _total
    assert concept_samples(s.table, "gen_tokens")["value"].tolist() == [2560]
    assert concept_samples(s.table, "engine_steps")["value"].tolist() == [6189]
    assert "preemptions" in s.gaps() and "ttft" in s.gaps()


def test_a_shared_family_counts_only_the_labels_present():
    page = 'nv_trt_llm_request_metrics{model="m",request_type="active",version="1"} 3\n'
    present = set(present_concepts(parse_text(page, 1.0)))
    assert "running" in present and "waiting" not in present and "running_cap" not in present


def test_triton_core_alone_has_a_queue_but_no_running_gauge():
    table = parse_text(
        'nv_inference_pending_request_count{model="m",version="1"} 5\n'
        'nv_inference_request_success{model="m",version="1"} 7\n',
        1.0,
    )
    assert engine_dialects(table) == ["triton"]
    assert concept_samples(table, "waiting")["value"].tolist() == [5]
    assert "running" in dialect_gaps(table)


def test_trtllm_serve_names():
    table = parse_text(
        "trtllm_num_requests_running 12\ntrtllm_num_requests_waiting 3\n"
        "trtllm_max_num_active_requests 12\ntrtllm_kv_cache_utilization 0.5\n"
        "# TYPE trtllm_generation_tokens_total counter\ntrtllm_generation_tokens_total 99\n",
        1.0,
    )
    s = Signals(table)
    assert s.engines() == ["tensorrt-llm"]
    assert s.gauge("running", 0, 2).max == 12 and s.gauge("waiting", 0, 2).max == 3
    assert s.running_cap().value == 12 and s.gauge("kv_usage", 0, 2).max == 0.5
    assert concept_samples(table, "gen_tokens")["value"].tolist() == [99]
