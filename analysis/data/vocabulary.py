"""One vendor-neutral vocabulary for server metrics.

Engines, GPU exporters, host exporters and gateways name the same things differently (vLLM renamed
several metrics in 2025; SGLang and TGI have their own names). The verdict rules speak only in the
*concepts* below; this table is the single place that knows the vendor names (REFERENCE-serving.md).

Each concept has a kind:
- gauge: a level (e.g. requests running); several series at one timestamp are combined with `agg`
  (sum for counts across replicas, mean for fractions across GPUs, max where the worst one matters);
- counter: a cumulative count; analysis looks at its increase over a window (reset-aware);
- histogram: a Prometheus histogram (`_bucket`/`_sum`/`_count`); analysis takes means and quantiles
  of the observations that fell inside a window.
`scale` turns the vendor unit into the concept's unit (fractions 0-1, seconds, MiB, cores).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pandas as pd


@dataclass(frozen=True)
class Source:
    """One vendor name for a concept. `match` filters on labels, e.g. {"method": "prefill"}."""

    name: str
    vendor: str
    scale: float = 1.0
    match: tuple[tuple[str, str], ...] = ()
    exclude: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Concept:
    name: str
    kind: str  # gauge | counter | histogram
    unit: str
    agg: str = "sum"  # how series at one timestamp combine (gauges only): sum | mean | max
    sources: tuple[Source, ...] = field(default_factory=tuple)
    meaning: str = ""


def _s(name: str, vendor: str, scale: float = 1.0, match: dict | None = None, exclude: dict | None = None) -> Source:
    return Source(name, vendor, scale, tuple(sorted((match or {}).items())), tuple(sorted((exclude or {}).items())))


CONCEPTS: dict[str, Concept] = {
    c.name: c
    for c in (
        # --- engine scheduler -----------------------------------------------------------------
        Concept("running", "gauge", "requests", "sum", (
            _s("vllm:num_requests_running", "vllm"),
            _s("sglang:num_running_reqs", "sglang"),
            _s("tgi_batch_current_size", "tgi"),
        ), "requests in the running batch"),
        Concept("waiting", "gauge", "requests", "sum", (
            _s("vllm:num_requests_waiting", "vllm"),
            _s("sglang:num_queue_reqs", "sglang"),
            _s("tgi_queue_size", "tgi"),
        ), "requests queued in the engine, not yet scheduled"),
        Concept("kv_usage", "gauge", "fraction", "max", (
            _s("vllm:kv_cache_usage_perc", "vllm"),
            _s("vllm:gpu_cache_usage_perc", "vllm (before late 2025)"),
            _s("sglang:token_usage", "sglang"),
        ), "fraction of the KV-cache pool in use (worst replica)"),
        Concept("preemptions", "counter", "events", "sum", (
            _s("vllm:num_preemptions_total", "vllm"),
            _s("vllm:num_preemptions", "vllm (counter without _total)"),
            _s("sglang:num_retracted_reqs", "sglang"),
            _s("sglang:num_retracted_reqs_total", "sglang"),
        ), "sequences evicted from the KV cache and recomputed later"),
        Concept("prompt_tokens", "counter", "tokens", "sum", (
            _s("vllm:prompt_tokens_total", "vllm"),
            _s("sglang:prompt_tokens_total", "sglang"),
        )),
        Concept("gen_tokens", "counter", "tokens", "sum", (
            _s("vllm:generation_tokens_total", "vllm"),
            _s("sglang:generation_tokens_total", "sglang"),
        )),
        Concept("engine_errors", "counter", "requests", "sum", (
            _s("vllm:request_success_total", "vllm", match={"finished_reason": "error"}),
            _s("tgi_request_failure_total", "tgi"),
            _s("tgi_request_failure", "tgi"),
        ), "requests the engine itself failed"),
        Concept("engine_restarts", "counter", "restarts", "sum", (
            _s("kube_pod_container_status_restarts_total", "kube-state-metrics"),
            _s("loadline_sim_replica_restarts_total", "loadline sim", match={"reason": "oom"}),
        ), "serving process restarts (out-of-memory kills show up here)"),
        # --- engine latency histograms (seconds) ---------------------------------------------
        Concept("ttft", "histogram", "s", sources=(
            _s("vllm:time_to_first_token_seconds", "vllm"),
            _s("sglang:time_to_first_token_seconds", "sglang"),
        ), meaning="server-side time to first token (TGI has none: queue + prefill is the proxy)"),
        Concept("itl", "histogram", "s", sources=(
            _s("vllm:inter_token_latency_seconds", "vllm"),
            _s("vllm:time_per_output_token_seconds", "vllm (old name)"),
            _s("sglang:inter_token_latency_seconds", "sglang"),
            _s("tgi_request_mean_time_per_token_duration", "tgi"),
        )),
        Concept("e2e", "histogram", "s", sources=(
            _s("vllm:e2e_request_latency_seconds", "vllm"),
            _s("sglang:e2e_request_latency_seconds", "sglang"),
            _s("tgi_request_duration", "tgi"),
        )),
        Concept("queue_time", "histogram", "s", sources=(
            _s("vllm:request_queue_time_seconds", "vllm"),
            _s("sglang:queue_time_seconds", "sglang"),
            _s("tgi_request_queue_duration", "tgi"),
        )),
        Concept("prefill_time", "histogram", "s", sources=(
            _s("vllm:request_prefill_time_seconds", "vllm"),
            _s("tgi_batch_forward_duration", "tgi", match={"method": "prefill"}),
        )),
        Concept("decode_time", "histogram", "s", sources=(
            _s("vllm:request_decode_time_seconds", "vllm"),
            _s("tgi_batch_forward_duration", "tgi", match={"method": "decode"}),
        )),
        # --- GPU (DCGM exporter) ----------------------------------------------------------------
        Concept("gpu_util", "gauge", "fraction", "mean", (
            _s("DCGM_FI_DEV_GPU_UTIL", "dcgm", 0.01),
            _s("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "dcgm (profiling)"),
        ), "fraction of time a kernel ran, mean over GPUs"),
        Concept("gpu_mem_used", "gauge", "MiB", "sum", (_s("DCGM_FI_DEV_FB_USED", "dcgm"),)),
        Concept("gpu_mem_free", "gauge", "MiB", "sum", (_s("DCGM_FI_DEV_FB_FREE", "dcgm"),)),
        # --- host (node_exporter) -----------------------------------------------------------------
        Concept("host_cpu_idle_seconds", "counter", "s", "sum", (
            _s("node_cpu_seconds_total", "node_exporter", match={"mode": "idle"}),
        )),
        Concept("host_cpu_seconds", "counter", "s", "sum", (
            _s("node_cpu_seconds_total", "node_exporter"),
        ), "all modes; busy fraction = 1 - idle increase / total increase"),
        # --- gateway (envoy, nginx) -------------------------------------------------------------
        Concept("gateway_5xx", "counter", "responses", "sum", (
            _s("envoy_cluster_upstream_rq_xx", "envoy", match={"envoy_response_code_class": "5"}),
            _s("envoy_cluster_upstream_rq_xx_total", "envoy", match={"envoy_response_code_class": "5"}),
            _s("nginxplus_upstream_server_responses", "nginx plus", match={"code": "5xx"}),
            _s("nginxplus_upstream_server_responses_total", "nginx plus", match={"code": "5xx"}),
        )),
        Concept("gateway_connect_fail", "counter", "connections", "sum", (
            _s("envoy_cluster_upstream_cx_connect_fail", "envoy"),
            _s("envoy_cluster_upstream_cx_connect_fail_total", "envoy"),
        )),
        Concept("gateway_pending_overflow", "counter", "requests", "sum", (
            _s("envoy_cluster_upstream_rq_pending_overflow", "envoy"),
            _s("envoy_cluster_upstream_rq_pending_overflow_total", "envoy"),
            _s("loadline_sim_gateway_rejected_total", "loadline sim (gateway connection cap)"),
        ), "requests refused because the gateway's connection or pending-request limit was full"),
        Concept("gateway_timeouts", "counter", "requests", "sum", (
            _s("envoy_cluster_upstream_rq_timeout", "envoy"),
            _s("envoy_cluster_upstream_rq_timeout_total", "envoy"),
        )),
        Concept("gateway_waiting", "gauge", "connections", "sum", (
            _s("nginx_connections_waiting", "nginx"),
            _s("envoy_cluster_upstream_rq_pending_active", "envoy"),
        )),
    )
}

_HIST_SUFFIXES = ("_bucket", "_sum", "_count")


def concept_names() -> list[str]:
    return list(CONCEPTS)


def _labels(text: object) -> dict[str, str]:
    if isinstance(text, dict):
        return text
    try:
        value = json.loads(str(text)) if text not in (None, "") else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _matches(labels: dict[str, str], source: Source) -> bool:
    return all(labels.get(k) == v for k, v in source.match) and not any(labels.get(k) == v for k, v in source.exclude)


def concept_samples(server_metrics: pd.DataFrame | None, concept: str) -> pd.DataFrame:
    """The samples of `concept`, unit-converted: columns ts, series, suffix, le, value.

    The first vendor name present in the data wins (a fleet exposing both an old and a new vLLM
    name would otherwise be counted twice). `series` identifies one time series (source + labels
    without `le`); `suffix` is "" for gauges and counters, "_bucket"/"_sum"/"_count" for histograms.
    """
    empty = pd.DataFrame(columns=["ts", "series", "suffix", "le", "value"])
    if server_metrics is None or len(server_metrics) == 0:
        return empty
    spec = CONCEPTS[concept]
    names = server_metrics["metric"].astype(str)
    for source in spec.sources:
        if spec.kind == "histogram":
            mask = names.isin([source.name + s for s in _HIST_SUFFIXES])
        else:
            mask = names == source.name
        if not mask.any():
            continue
        rows = server_metrics[mask]
        labels = rows["labels"].map(_labels)
        keep = labels.map(lambda lab: _matches(lab, source))
        rows, labels = rows[keep], labels[keep]
        if rows.empty:
            continue
        out = pd.DataFrame({
            "ts": pd.to_numeric(rows["ts"], errors="coerce"),
            "series": rows["source"].astype(str) + "|" + labels.map(
                lambda lab: json.dumps({k: v for k, v in lab.items() if k != "le"}, sort_keys=True)),
            "suffix": rows["metric"].astype(str).str[len(source.name):],
            "le": labels.map(lambda lab: _le(lab.get("le"))),
            "value": pd.to_numeric(rows["value"], errors="coerce"),
        })
        if spec.kind != "histogram":
            out["value"] = out["value"] * source.scale
        return out.dropna(subset=["ts", "value"]).reset_index(drop=True)
    return empty


def _le(text: str | None) -> float:
    if text is None:
        return float("nan")
    try:
        return float(text)
    except ValueError:
        return float("nan")


def present_concepts(server_metrics: pd.DataFrame | None) -> list[str]:
    """Concepts with at least one sample in the table."""
    if server_metrics is None or len(server_metrics) == 0:
        return []
    names = set(server_metrics["metric"].astype(str).unique())
    found = []
    for concept in CONCEPTS.values():
        for source in concept.sources:
            wanted = [source.name + s for s in _HIST_SUFFIXES] if concept.kind == "histogram" else [source.name]
            if names.intersection(wanted):
                found.append(concept.name)
                break
    return found
