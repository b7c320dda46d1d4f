"""Engine dialects: which engine a server-metrics table came from, and what its /metrics lacks.

The vendor names themselves are analysis/data/metric_names.py. A dialect that lacks a concept is
listed in DIALECT_GAPS with what it lacks, so a verdict can say which signal was missing instead
of silently judging less.
"""

from __future__ import annotations

# Which engine a table came from, told by its metric-name prefix (first match in this order wins:
# Triton with the TensorRT-LLM backend also exposes Triton's core nv_inference_* metrics).
DIALECT_PREFIXES: tuple[tuple[str, str], ...] = (
    ("vllm", "vllm:"),
    ("sglang", "sglang:"),
    ("tgi", "tgi_"),
    ("llama.cpp", "llamacpp:"),
    ("tensorrt-llm", "trtllm_"),
    ("triton tensorrt-llm", "nv_trt_llm_"),
    ("triton", "nv_inference_"),
)

# What each engine's /metrics does not say, in the words a verdict can quote. Only concepts the
# verdict rules read are listed; a gap is reported only when the concept is really absent from the
# data (an older llama.cpp that still exports kv_cache_usage_ratio has KV usage).
DIALECT_GAPS: dict[str, dict[str, str]] = {
    "llama.cpp": {
        "kv_usage": "llama.cpp exports no KV-cache usage (kv_cache_usage_ratio was removed): "
        "a pool-bound server cannot be told from a slot-bound one",
        "preemptions": "llama.cpp has no preemption counter (each slot owns its context; it never preempts)",
        "running_cap": "llama.cpp's slot count (--parallel) is in /props total_slots, not in /metrics: "
        "taken as the busy slots seen while requests were deferred",
        "ttft": "llama.cpp has no latency histograms (TTFT, ITL, queue time): only summed "
        "prompt and generation seconds",
        "gpu_util": "llama.cpp exports no device utilisation",
    },
    "tgi": {
        "kv_usage": "TGI exports no KV-cache usage",
        "preemptions": "TGI has no preemption counter",
        "ttft": "TGI has no TTFT histogram (queue + prefill time is the proxy)",
    },
    "triton": {
        "running": "Triton's core metrics have no running-requests gauge (only pending requests)",
        "kv_usage": "Triton's core metrics have no KV-cache usage (the TensorRT-LLM backend adds it)",
        "ttft": "Triton has no TTFT histogram (nv_inference_first_response_histogram_ms times the "
        "first response chunk, in ms, and is opt-in)",
    },
    "triton tensorrt-llm": {
        "preemptions": "the TensorRT-LLM backend has no preemption counter (paused requests are a gauge)",
        "ttft": "the TensorRT-LLM backend has no TTFT/ITL histograms (trtllm-serve has them)",
    },
    "tensorrt-llm": {
        "preemptions": "trtllm-serve has no preemption counter",
    },
    "vllm": {
        "running_cap": "vLLM exports no max_num_seqs: the cap is taken as the largest running batch "
        "seen while requests waited",
    },
    "sglang": {
        "running_cap": "SGLang exports no running-request cap: taken as the largest running batch "
        "seen while requests waited",
    },
}
