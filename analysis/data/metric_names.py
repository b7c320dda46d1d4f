"""The vendor names of server metrics: one table (analysis/data/vocabulary.py reads samples through it).

Engines, GPU exporters, host exporters and gateways name the same things differently (vLLM renamed
several metrics in 2025; SGLang, TGI, llama.cpp and NVIDIA's Triton/TensorRT-LLM have their own
names). The verdict rules speak only in the *concepts* below; this table is the single place that
knows the vendor names. Sources of the names:
- vLLM, SGLang, TGI, DCGM, node_exporter, Envoy, nginx: REFERENCE-serving.md;
- llama.cpp's `llama-server --metrics`: tools/server/server-task.cpp `to_metrics()` (the version
  vendored in llama-cpp-python 0.3.36, checked against a built server; tests/data/llamacpp_*.prom);
  older releases also had `kv_cache_usage_ratio` and `kv_cache_tokens`;
- Triton Inference Server core (`nv_inference_*`, `nv_gpu_*`): triton-inference-server/core
  src/metrics.cc and server docs/user_guide/metrics.md; its counters have no `_total` in the name,
  and prometheus_client's text parser appends one, so both spellings are listed;
- TensorRT-LLM in Triton (`nv_trt_llm_*`, `nv_llm_*`): NVIDIA/TensorRT-LLM triton_backend/
  inflight_batcher_llm/src/custom_metrics_reporter/custom_metrics_reporter.cc (one gauge family
  per group, the quantity in a label: request_type, kv_cache_block_type...);
- TensorRT-LLM's own OpenAI server `trtllm-serve` (`trtllm_*`): tensorrt_llm/metrics/collector.py.
What a concept is (its kind, unit and sources) is analysis/data/metric_concepts.py; which engine a
table came from and what its /metrics lacks is analysis/data/metric_dialects.py.
"""

from __future__ import annotations

from loadline.analysis.data.metric_concepts import Concept
from loadline.analysis.data.metric_concepts import source as _s  # short: the table calls it ~90 times

CONCEPTS: dict[str, Concept] = {
    c.name: c
    for c in (
        # --- engine scheduler -----------------------------------------------------------------
        Concept(
            "running",
            "gauge",
            "requests",
            "sum",
            (
                _s("vllm:num_requests_running", "vllm"),
                _s("sglang:num_running_reqs", "sglang"),
                _s("tgi_batch_current_size", "tgi"),
                # llama.cpp: slots processing a request (at most --parallel N)
                _s("llamacpp:requests_processing", "llama.cpp"),
                _s("trtllm_num_requests_running", "tensorrt-llm"),
                # "Active Request Count": the requests the executor holds, the quantity `max` caps
                _s("nv_trt_llm_request_metrics", "triton tensorrt-llm", match={"request_type": "active"}),
            ),
            "requests in the running batch (llama.cpp: busy slots)",
        ),
        Concept(
            "waiting",
            "gauge",
            "requests",
            "sum",
            (
                _s("vllm:num_requests_waiting", "vllm"),
                _s("sglang:num_queue_reqs", "sglang"),
                _s("tgi_queue_size", "tgi"),
                # llama.cpp defers a task only when no slot is free (server-context.cpp: "no slot is
                # available, defer task")
                _s("llamacpp:requests_deferred", "llama.cpp"),
                _s("trtllm_num_requests_waiting", "tensorrt-llm"),
                _s("nv_trt_llm_request_metrics", "triton tensorrt-llm", match={"request_type": "waiting"}),
                # Triton core, any backend: "requests awaiting execution" by the backend
                _s("nv_inference_pending_request_count", "triton"),
            ),
            "requests queued in the engine, not yet scheduled (llama.cpp: deferred, no free slot)",
        ),
        Concept(
            "running_cap",
            "gauge",
            "requests",
            "sum",
            (
                _s("trtllm_max_num_active_requests", "tensorrt-llm"),
                _s("nv_trt_llm_request_metrics", "triton tensorrt-llm", match={"request_type": "max"}),
            ),
            "the engine's configured cap on running requests, where it exports one (llama.cpp's slot "
            "count is only in /props total_slots; vLLM's max_num_seqs in no metric)",
        ),
        Concept(
            "kv_usage",
            "gauge",
            "fraction",
            "max",
            (
                _s("vllm:kv_cache_usage_perc", "vllm"),
                _s("vllm:gpu_cache_usage_perc", "vllm (before late 2025)"),
                _s("sglang:token_usage", "sglang"),
                _s("llamacpp:kv_cache_usage_ratio", "llama.cpp (before 2025)"),
                _s("trtllm_kv_cache_utilization", "tensorrt-llm"),
                _s(
                    "nv_trt_llm_kv_cache_block_metrics",
                    "triton tensorrt-llm",
                    match={"kv_cache_block_type": "fraction"},
                ),
            ),
            "fraction of the KV-cache pool in use (worst replica)",
        ),
        Concept(
            "kv_tokens",
            "gauge",
            "tokens",
            "sum",
            (_s("llamacpp:kv_cache_tokens", "llama.cpp (before 2025)"),),
            "tokens held in the KV cache",
        ),
        Concept(
            "preemptions",
            "counter",
            "events",
            "sum",
            (
                _s("vllm:num_preemptions_total", "vllm"),
                _s("vllm:num_preemptions", "vllm (counter without _total)"),
                _s("sglang:num_retracted_reqs", "sglang"),
                _s("sglang:num_retracted_reqs_total", "sglang"),
            ),
            "sequences evicted from the KV cache and recomputed later",
        ),
        Concept(
            "prompt_tokens",
            "counter",
            "tokens",
            "sum",
            (
                _s("vllm:prompt_tokens_total", "vllm"),
                _s("sglang:prompt_tokens_total", "sglang"),
                _s("llamacpp:prompt_tokens_total", "llama.cpp (excludes tokens reused from the cache)"),
                _s("trtllm_prompt_tokens_total", "tensorrt-llm"),
                # the histogram's running sum is the cumulative token count
                _s("nv_llm_input_token_len_sum", "triton tensorrt-llm"),
            ),
        ),
        Concept(
            "gen_tokens",
            "counter",
            "tokens",
            "sum",
            (
                _s("vllm:generation_tokens_total", "vllm"),
                _s("sglang:generation_tokens_total", "sglang"),
                _s("llamacpp:tokens_predicted_total", "llama.cpp"),
                _s("trtllm_generation_tokens_total", "tensorrt-llm"),
                _s("nv_llm_output_token_len_sum", "triton tensorrt-llm"),
            ),
        ),
        Concept(
            "prompt_seconds",
            "counter",
            "s",
            "sum",
            (_s("llamacpp:prompt_seconds_total", "llama.cpp"),),
            "time spent on prompts, summed over requests: / prompt_tokens = the engine's time per prompt token",
        ),
        Concept(
            "decode_seconds",
            "counter",
            "s",
            "sum",
            (_s("llamacpp:tokens_predicted_seconds_total", "llama.cpp"),),
            "time spent generating, summed over requests: / gen_tokens = the engine's mean time per output token",
        ),
        Concept(
            "engine_steps",
            "counter",
            "steps",
            "sum",
            (
                _s("llamacpp:n_decode_total", "llama.cpp"),
                # a gauge holding a monotonic count: read as a counter
                _s("nv_trt_llm_general_metrics", "triton tensorrt-llm", match={"general_type": "iteration_counter"}),
            ),
            "engine forward passes (llama_decode calls, batcher iterations)",
        ),
        Concept(
            "busy_slots_per_step",
            "gauge",
            "requests",
            "mean",
            (_s("llamacpp:n_busy_slots_per_decode", "llama.cpp"),),
            "mean requests per forward pass SINCE THE SERVER STARTED (llama.cpp); Signals.batch_per_step "
            "turns it into a per-window mean with engine_steps",
        ),
        Concept(
            "engine_errors",
            "counter",
            "requests",
            "sum",
            (
                _s("vllm:request_success_total", "vllm", match={"finished_reason": "error"}),
                _s("tgi_request_failure_total", "tgi"),
                _s("tgi_request_failure", "tgi"),
                _s("trtllm_request_error_total", "tensorrt-llm"),
                _s("nv_inference_request_failure", "triton"),
                _s("nv_inference_request_failure_total", "triton (scraped: the parser appends _total)"),
            ),
            "requests the engine itself failed",
        ),
        Concept(
            "engine_restarts",
            "counter",
            "restarts",
            "sum",
            (
                _s("kube_pod_container_status_restarts_total", "kube-state-metrics"),
                _s("loadline_sim_replica_restarts_total", "loadline sim", match={"reason": "oom"}),
            ),
            "serving process restarts (out-of-memory kills show up here)",
        ),
        # --- engine latency histograms (seconds) ---------------------------------------------
        Concept(
            "ttft",
            "histogram",
            "s",
            sources=(
                _s("vllm:time_to_first_token_seconds", "vllm"),
                _s("sglang:time_to_first_token_seconds", "sglang"),
                _s("trtllm_time_to_first_token_seconds", "tensorrt-llm"),
                # not Triton's nv_inference_first_response_histogram_ms: milliseconds, opt-in, and for a
                # streaming LLM backend the first response chunk rather than the first token
            ),
            meaning="server-side time to first token (TGI has none: queue + prefill is the proxy)",
        ),
        Concept(
            "itl",
            "histogram",
            "s",
            sources=(
                _s("vllm:inter_token_latency_seconds", "vllm"),
                _s("vllm:time_per_output_token_seconds", "vllm (old name)"),
                _s("sglang:inter_token_latency_seconds", "sglang"),
                _s("tgi_request_mean_time_per_token_duration", "tgi"),
                _s("trtllm_time_per_output_token_seconds", "tensorrt-llm"),
            ),
        ),
        Concept(
            "e2e",
            "histogram",
            "s",
            sources=(
                _s("vllm:e2e_request_latency_seconds", "vllm"),
                _s("sglang:e2e_request_latency_seconds", "sglang"),
                _s("tgi_request_duration", "tgi"),
                _s("trtllm_e2e_request_latency_seconds", "tensorrt-llm"),
            ),
        ),
        Concept(
            "queue_time",
            "histogram",
            "s",
            sources=(
                _s("vllm:request_queue_time_seconds", "vllm"),
                _s("sglang:queue_time_seconds", "sglang"),
                _s("tgi_request_queue_duration", "tgi"),
                _s("trtllm_request_queue_time_seconds", "tensorrt-llm"),
            ),
        ),
        Concept(
            "prefill_time",
            "histogram",
            "s",
            sources=(
                _s("vllm:request_prefill_time_seconds", "vllm"),
                _s("tgi_batch_forward_duration", "tgi", match={"method": "prefill"}),
                _s("trtllm_request_prefill_time_seconds", "tensorrt-llm"),
            ),
        ),
        Concept(
            "decode_time",
            "histogram",
            "s",
            sources=(
                _s("vllm:request_decode_time_seconds", "vllm"),
                _s("tgi_batch_forward_duration", "tgi", match={"method": "decode"}),
                _s("trtllm_request_decode_time_seconds", "tensorrt-llm"),
            ),
        ),
        # --- GPU (DCGM exporter) ----------------------------------------------------------------
        Concept(
            "gpu_util",
            "gauge",
            "fraction",
            "mean",
            (
                _s("DCGM_FI_DEV_GPU_UTIL", "dcgm", 0.01),
                _s("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "dcgm (profiling)"),
                _s("nv_gpu_utilization", "triton (DCGM inside Triton, 0-1)"),
            ),
            "fraction of time a kernel ran, mean over GPUs",
        ),
        Concept(
            "gpu_mem_used",
            "gauge",
            "MiB",
            "sum",
            (
                _s("DCGM_FI_DEV_FB_USED", "dcgm"),
                _s("nv_gpu_memory_used_bytes", "triton", 1 / 1048576),
            ),
        ),
        Concept("gpu_mem_free", "gauge", "MiB", "sum", (_s("DCGM_FI_DEV_FB_FREE", "dcgm"),)),
        # --- host (node_exporter) -----------------------------------------------------------------
        Concept(
            "host_cpu_idle_seconds",
            "counter",
            "s",
            "sum",
            (_s("node_cpu_seconds_total", "node_exporter", match={"mode": "idle"}),),
        ),
        Concept(
            "host_cpu_seconds",
            "counter",
            "s",
            "sum",
            (_s("node_cpu_seconds_total", "node_exporter"),),
            "all modes; busy fraction = 1 - idle increase / total increase",
        ),
        # --- gateway (envoy, nginx) -------------------------------------------------------------
        Concept(
            "gateway_5xx",
            "counter",
            "responses",
            "sum",
            (
                _s("envoy_cluster_upstream_rq_xx", "envoy", match={"envoy_response_code_class": "5"}),
                _s("envoy_cluster_upstream_rq_xx_total", "envoy", match={"envoy_response_code_class": "5"}),
                _s("nginxplus_upstream_server_responses", "nginx plus", match={"code": "5xx"}),
                _s("nginxplus_upstream_server_responses_total", "nginx plus", match={"code": "5xx"}),
            ),
        ),
        Concept(
            "gateway_connect_fail",
            "counter",
            "connections",
            "sum",
            (
                _s("envoy_cluster_upstream_cx_connect_fail", "envoy"),
                _s("envoy_cluster_upstream_cx_connect_fail_total", "envoy"),
            ),
        ),
        Concept(
            "gateway_pending_overflow",
            "counter",
            "requests",
            "sum",
            (
                _s("envoy_cluster_upstream_rq_pending_overflow", "envoy"),
                _s("envoy_cluster_upstream_rq_pending_overflow_total", "envoy"),
                _s("loadline_sim_gateway_rejected_total", "loadline sim (gateway connection cap)"),
            ),
            "requests refused because the gateway's connection or pending-request limit was full",
        ),
        Concept(
            "gateway_timeouts",
            "counter",
            "requests",
            "sum",
            (
                _s("envoy_cluster_upstream_rq_timeout", "envoy"),
                _s("envoy_cluster_upstream_rq_timeout_total", "envoy"),
            ),
        ),
        Concept(
            "gateway_waiting",
            "gauge",
            "connections",
            "sum",
            (
                _s("nginx_connections_waiting", "nginx"),
                _s("envoy_cluster_upstream_rq_pending_active", "envoy"),
            ),
        ),
    )
}
