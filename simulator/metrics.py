"""/metrics: the engines' state in vLLM's names and labels, simulated DCGM GPU metrics, fault state.

A prometheus_client Collector reads the engines at scrape time, so the hot path only bumps plain
integers (simulator/stats.py). DCGM memory: weights + activations + KV blocks in use (leaked ones
included), per GPU of the replica; real vLLM preallocates its KV pool, so a real FB_USED is flat:
the simulator shows what the pool holds, which is what a leak drill needs to see.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from loadline.simulator.app import SimApp
from loadline.simulator.config import GIB
from loadline.simulator.stats import HISTOGRAMS

MIB = 1 << 20


def _gauge(name: str, doc: str, labels: list[str], rows: list[tuple[list[str], float]]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=labels)
    for values, value in rows:
        family.add_metric(values, value)
    return family


def _counter(name: str, doc: str, labels: list[str], rows: list[tuple[list[str], float]]) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=labels)
    for values, value in rows:
        family.add_metric(values, value)
    return family


class SimCollector:
    def __init__(self, app: SimApp) -> None:
        self.app = app
        self.hostname = socket.gethostname()

    def _ids(self, engine) -> list[str]:
        return [self.app.config.model_name, str(engine.index)]

    def _per_engine(self, value) -> list[tuple[list[str], float]]:
        return [(self._ids(e), value(e)) for e in self.app.engines]

    def collect(self) -> Iterator[Metric]:
        if self.app.quirks.llamacpp_api:
            yield from self._llamacpp()
            yield from self._sim_state()
            return
        cfg = self.app.config
        labels = ["model_name", "engine"]
        each = self._per_engine
        yield _gauge(
            "vllm:num_requests_running", "Requests in the running batch", labels, each(lambda e: len(e.running))
        )
        yield _gauge(
            "vllm:num_requests_waiting", "Requests waiting to be scheduled", labels, each(lambda e: len(e.waiting))
        )
        usage = each(lambda e: e.pool.usage())
        yield _gauge("vllm:kv_cache_usage_perc", "KV-cache usage, 0-1", labels, usage)
        yield _gauge("vllm:gpu_cache_usage_perc", "KV-cache usage, 0-1 (pre-2025 name)", labels, usage)
        yield _counter("vllm:num_preemptions", "Preemptions (recompute)", labels, each(lambda e: e.stats.preemptions))
        yield _counter("vllm:prompt_tokens", "Prefilled prompt tokens", labels, each(lambda e: e.stats.prompt_tokens))
        yield _counter("vllm:generation_tokens", "Generated tokens", labels, each(lambda e: e.stats.generation_tokens))
        yield _counter(
            "vllm:prefix_cache_queries",
            "Prompt tokens looked up in the prefix cache",
            labels,
            each(lambda e: e.prefix_queries),
        )
        yield _counter(
            "vllm:prefix_cache_hits", "Prompt tokens found in the prefix cache", labels, each(lambda e: e.prefix_hits)
        )
        yield _counter(
            "vllm:request_success",
            "Finished requests",
            labels + ["finished_reason"],
            [
                (self._ids(e) + [reason], e.stats.success[reason])
                for e in self.app.engines
                for reason in ("stop", "length", "abort", "error")
            ],
        )
        yield _gauge(
            "vllm:cache_config_info",
            "KV cache configuration",
            ["block_size", "num_gpu_blocks", "gpu_memory_utilization", "enable_prefix_caching"],
            [
                (
                    [
                        str(cfg.block_size),
                        str(cfg.num_kv_blocks()),
                        str(cfg.gpu_memory_utilization),
                        str(cfg.enable_prefix_caching),
                    ],
                    1,
                )
            ],
        )
        yield from self._histograms()
        yield from self._gpus()
        yield from self._sim_state()

    def _llamacpp(self) -> Iterator[Metric]:
        """llama-server's /metrics (--metrics): one unlabelled series each, summed over replicas."""
        engines = self.app.engines

        def total(value) -> float:
            return sum(value(e) for e in engines)

        def one(value: float) -> list[tuple[list[str], float]]:
            return [([], value)]

        prompt_tokens, predicted = total(lambda e: e.stats.prompt_tokens), total(lambda e: e.stats.generation_tokens)
        prompt_s = total(lambda e: e.stats.histograms["request_prefill_time_seconds"].total)
        predicted_s = total(lambda e: e.stats.histograms["request_decode_time_seconds"].total)
        steps = total(lambda e: e.stats.steps)
        yield _counter("llamacpp:prompt_tokens", "Number of prompt tokens processed.", [], one(prompt_tokens))
        yield _counter("llamacpp:prompt_seconds", "Prompt process time", [], one(prompt_s))
        yield _counter("llamacpp:tokens_predicted", "Number of generation tokens processed.", [], one(predicted))
        yield _counter("llamacpp:tokens_predicted_seconds", "Predict process time", [], one(predicted_s))
        yield _counter("llamacpp:n_decode", "Total number of llama_decode() calls", [], one(steps))
        yield _gauge(
            "llamacpp:n_busy_slots_per_decode",
            "Average number of busy slots per llama_decode() call",
            [],
            one(total(lambda e: e.stats.busy_slots) / steps if steps else 0.0),
        )
        yield _gauge(
            "llamacpp:prompt_tokens_seconds",
            "Average prompt throughput in tokens/s.",
            [],
            one(prompt_tokens / prompt_s if prompt_s else 0.0),
        )
        yield _gauge(
            "llamacpp:predicted_tokens_seconds",
            "Average generation throughput in tokens/s.",
            [],
            one(predicted / predicted_s if predicted_s else 0.0),
        )
        yield _gauge(
            "llamacpp:kv_cache_usage_ratio",
            "KV-cache usage. 1 means 100 percent usage.",
            [],
            one(total(lambda e: e.pool.usage()) / len(engines)),
        )
        yield _gauge(
            "llamacpp:kv_cache_tokens",
            "KV-cache tokens.",
            [],
            one(total(lambda e: e.pool.in_use) * self.app.config.block_size),
        )
        yield _gauge(
            "llamacpp:requests_processing", "Number of requests processing.", [], one(total(lambda e: len(e.running)))
        )
        # Deferred as llama-server defers: a request that found every slot busy. One that arrived during a
        # step while slots were free waits for the step's end here (the next update_slots there), which
        # llama-server does not count.
        cap = self.app.config.max_num_seqs
        yield _gauge(
            "llamacpp:requests_deferred",
            "Number of requests deferred.",
            [],
            one(total(lambda e: len(e.waiting) if len(e.running) >= cap else 0)),
        )

    def _histograms(self) -> Iterator[Metric]:
        for name, doc, _ in HISTOGRAMS:
            family = HistogramMetricFamily(f"vllm:{name}", doc, labels=["model_name", "engine"])
            for engine in self.app.engines:
                h = engine.stats.histograms[name]
                family.add_metric(self._ids(engine), h.cumulative(), h.total)
            yield family

    def _gpus(self) -> Iterator[Metric]:
        cfg = self.app.config
        tp = cfg.tensor_parallel_size
        labels = ["gpu", "modelName", "Hostname", "engine"]
        util: list[tuple[list[str], float]] = []
        used: list[tuple[list[str], float]] = []
        free: list[tuple[list[str], float]] = []
        kv_block_bytes = cfg.block_size * cfg.kv_bytes_per_token
        for engine in self.app.engines:
            if engine.up:
                kv_bytes = (engine.pool.in_use + engine.pool.leaked) * kv_block_bytes
                per_gpu = (cfg.weights_gib * GIB + cfg.activation_gib * GIB * tp + kv_bytes) / tp / MIB
            else:
                per_gpu = 0.0  # process gone: memory released until the model reloads
            total = cfg.gpu_memory_gib * GIB / MIB
            for k in range(tp):
                values = [str(engine.index * tp + k), cfg.gpu_name, self.hostname, str(engine.index)]
                util.append((values, round(100 * engine.gpu_util)))
                used.append((values, round(per_gpu)))
                free.append((values, round(total - per_gpu)))
        yield _gauge("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (%), simulated from engine busy time", labels, util)
        yield _gauge("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (MiB), simulated", labels, used)
        yield _gauge("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (MiB), simulated", labels, free)

    def _sim_state(self) -> Iterator[Metric]:
        app = self.app
        active = set(app.faults.active())
        settings = app.faults.as_dict()
        yield _gauge(
            "loadline_sim_fault_active",
            "1 while the fault is switched on",
            ["fault"],
            [([name], int(name in active)) for name in settings],
        )
        yield _gauge(
            "loadline_sim_fault_setting",
            "The fault's current value (its 'off' value when inactive)",
            ["fault"],
            [([name], value) for name, value in settings.items()],
        )
        yield _gauge(
            "loadline_sim_replica_up",
            "1 when the replica serves, 0 while down or reloading",
            ["model_name", "engine"],
            self._per_engine(lambda e: int(e.up)),
        )
        yield _counter(
            "loadline_sim_replica_restarts",
            "Replica restarts by reason (kill, restart, oom)",
            ["model_name", "engine", "reason"],
            [
                (self._ids(e) + [reason], e.restarts[reason])
                for e in app.engines
                for reason in ("kill", "restart", "oom")
            ],
        )
        yield _gauge(
            "loadline_sim_kv_blocks_leaked",
            "KV blocks lost to the memory-leak fault",
            ["model_name", "engine"],
            self._per_engine(lambda e: e.pool.leaked),
        )
        yield _gauge("loadline_sim_gateway_connections", "Open client connections", [], [([], len(app.connections))])
        yield _counter(
            "loadline_sim_gateway_rejected",
            "Requests refused by the gateway connection cap",
            [],
            [([], app.gateway_rejected)],
        )
        yield _gauge(
            "loadline_sim_time_scale", "Engine time constants are divided by this", [], [([], app.config.time_scale)]
        )
        yield _counter(
            "http_requests",
            "HTTP requests by handler, method and status",
            ["handler", "method", "status"],
            [(list(key), n) for key, n in sorted(app.http_requests.items())],
        )


def make_registry(app: SimApp) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SimCollector(app))
    ProcessCollector(registry=registry)  # process_cpu_seconds_total: the host-CPU signal
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
