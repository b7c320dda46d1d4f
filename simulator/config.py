"""Simulator configuration: one flat dataclass, loaded from a profile TOML and overridden by options.

Profiles live in `configs/sim/<name>.toml`, grouped in tables for reading ([hardware], [model],
[engine], [workload], [faults], [server]); every key is unique across tables, so the command
line overrides any of them by its bare name: `--set max_num_seqs=4`. Engine keys use vLLM's names.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadline.core import resources
from loadline.core.errors import UsageError
from loadline.simulator.quirks import Quirks
from loadline.simulator.reasoning import ReplyOptions

DEFAULT_PROFILE = "h100-llama3-8b"
GIB = 1 << 30


@dataclass
class SimConfig:
    # [model]
    model_name: str = "meta-llama/Meta-Llama-3-8B-Instruct"
    params_b: float = 8.0  # billions of parameters: 2 * P FLOPs per token
    weights_gib: float = 15.0  # read once per engine step (memory-bound decode)
    num_layers: int = 32
    kv_bytes_per_token: int = 131072  # 2 * layers * kv_heads * head_dim * dtype bytes
    # attention's FLOPs per token per context token it attends (QK and AV: 4 * layers * d_model for a
    # dense transformer; Kaplan et al. 2020 count 2 * layers * d_attn, the causal half). 0 leaves them
    # out, as the shipped profiles do: below ~8k context they are small beside the 2 * P linear FLOPs.
    # A small model pays them early: llama.cpp's tiny test model (4 layers, d_model 256, one CPU thread)
    # takes 165 us a prompt token at 800 tokens against 131 at 100.
    attention_flops_per_cell: float = 0.0
    # bytes a step reads per KV cell of each idle slot inside its batch's slot span. llama.cpp keeps a
    # KV buffer per slot (llama-server with --parallel: kv_unified off) and runs a batch's attention
    # over every slot from its lowest id to its highest, each over the batch's cells padded to 256
    # (llama-kv-cache.cpp: get_k's ns = s1 - s0 + 1, get_n_kv's n_pad_cur): a batch of 2 among 8 slots
    # reads ~2 idle slots' cells as well, among 2 slots none. 0 for a paged KV cache (vLLM). A twin
    # fitted on llama.cpp sets it (docs/twin.md).
    slot_span_kv_bytes_per_cell: float = 0.0
    # longest word piece of the tokenizer, characters (simulator/tokenizer.py): 4 counts ~1.6 tokens
    # per English word as byte-level BPE does; 0 = one token per word
    tokenizer_piece_chars: int = 4
    # false: no POST /tokenize or /detokenize, as behind a gateway that forwards only /v1 routes, or
    # llama-cpp-python's server (/extras/tokenize): clients must calibrate from usage
    serve_tokenize: bool = True
    # [hardware] (per GPU; a replica spans tensor_parallel_size GPUs)
    gpu_name: str = "NVIDIA H100 80GB HBM3"
    gpu_memory_gib: float = 80.0
    tensor_parallel_size: int = 1
    hbm_bandwidth_gbs: float = 3350.0
    peak_tflops: float = 989.0
    memory_efficiency: float = 0.8  # achieved fraction of HBM bandwidth
    compute_efficiency: float = 0.5  # achieved fraction of peak FLOPs
    per_layer_overhead_us: float = 3.0  # kernel launches per layer per step
    tp_comm_us_per_layer: float = 0.0  # all-reduce latency per layer per step (tensor parallel)
    step_overhead_ms: float = 4.0  # scheduler + sampling + detokenize, per engine step
    # the same work paid per sequence in the step (sampling, detokenising, scheduling, its attention
    # kernel's launch share); calibrated in configs/sim/*.toml against published vLLM sweeps
    per_seq_overhead_us: float = 50.0
    request_overhead_ms: float = 40.0  # API server: parse, tokenize, template, before the queue
    activation_gib: float = 2.0  # reserved for activations / CUDA graphs, not KV
    # [engine] (vLLM names)
    max_num_seqs: int = 1024
    max_num_batched_tokens: int = 8192
    block_size: int = 16
    num_gpu_blocks: int = 0  # 0: derived from gpu_memory_utilization (see num_kv_blocks())
    gpu_memory_utilization: float = 0.9
    max_model_len: int = 8192
    enable_prefix_caching: bool = True
    max_num_queued_reqs: int = 0  # 0: unbounded waiting queue
    queue_full_status: int = 503  # vLLM answers 503; gateways often 429
    retry_after_s: int = 1
    # [workload] output length when the request does not fix it: lognormal(mean, sigma), clipped
    output_len_mean: float = 256.0
    output_len_sigma: float = 0.6
    output_len_max: int = 2048
    seed: int = 0
    # [server]
    replicas: int = 1
    lb: str = "round_robin"  # round_robin | least_conn
    restart_delay_s: float = 10.0  # model reload time after a kill / OOM
    time_scale: float = 1.0  # every engine time constant is divided by this
    quirks: str = ""  # opt-in behaviours of real servers, e.g. "close-after-stream+interrupt" (quirks.py)
    # [faults] (also switchable at run time through the admin API)
    error_rate: float = 0.0  # fraction of requests failing (HTTP 500 or an error inside the stream)
    latency_spike: float = 1.0  # multiplier on every engine step time
    leak_blocks_per_s: float = 0.0  # KV blocks lost per second until the replica OOM-restarts
    max_connections: int = 0  # gateway cap on open connections; excess gets 503 then close
    accept_delay_ms: float = 0.0  # slow accept: delay before a new connection is read
    # [replies] what chat streams carry besides content (simulator/reasoning.py)
    reasoning_share: float = 0.0  # share of each reply's tokens streamed first as reasoning
    reasoning_field: str = "reasoning_content"  # or "reasoning" (new vLLM, e.g. 0.34)
    tool_call_share: float = 0.0  # share of replies that answer with a tool call
    enable_prompt_tokens_details: bool = False  # usage.prompt_tokens_details.cached_tokens (vLLM's flag)

    def reply_options(self) -> ReplyOptions:
        return ReplyOptions(
            self.reasoning_share, self.reasoning_field, self.tool_call_share, self.enable_prompt_tokens_details
        )

    def num_kv_blocks(self) -> int:
        """vLLM's sizing: memory left after weights and activations, at gpu_memory_utilization."""
        if self.num_gpu_blocks > 0:
            return self.num_gpu_blocks
        tp = self.tensor_parallel_size
        free_gib = self.gpu_memory_gib * self.gpu_memory_utilization * tp - self.weights_gib - self.activation_gib * tp
        blocks = int(free_gib * GIB // (self.kv_bytes_per_token * self.block_size))
        return max(blocks, 1)

    def validate(self) -> None:
        positive = (
            "params_b",
            "num_layers",
            "kv_bytes_per_token",
            "hbm_bandwidth_gbs",
            "peak_tflops",
            "max_num_seqs",
            "max_num_batched_tokens",
            "block_size",
            "max_model_len",
            "replicas",
            "time_scale",
            "tensor_parallel_size",
            "memory_efficiency",
            "compute_efficiency",
            "output_len_mean",
            "output_len_max",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise UsageError(f"sim option {name} must be > 0 (got {getattr(self, name)})")
        if self.lb not in ("round_robin", "least_conn"):
            raise UsageError(f"sim option lb must be round_robin or least_conn (got {self.lb!r})")
        if not 0.0 <= self.error_rate <= 1.0:
            raise UsageError(f"sim option error_rate must be within 0..1 (got {self.error_rate})")
        if self.queue_full_status not in (429, 503):
            raise UsageError(f"sim option queue_full_status must be 429 or 503 (got {self.queue_full_status})")
        for name in ("attention_flops_per_cell", "slot_span_kv_bytes_per_cell"):
            if getattr(self, name) < 0:
                raise UsageError(f"sim option {name} must be >= 0 (got {getattr(self, name)})")
        if self.latency_spike <= 0:
            raise UsageError("sim option latency_spike must be > 0")
        Quirks.parse(self.quirks)
        if self.tokenizer_piece_chars < 0:
            raise UsageError(f"sim option tokenizer_piece_chars must be >= 0 (got {self.tokenizer_piece_chars})")
        if problem := self.reply_options().problem():
            raise UsageError(problem)
        if self.max_model_len > self.num_kv_blocks() * self.block_size:
            # vLLM refuses to start in this case too; a long prompt could otherwise never be admitted.
            raise UsageError(
                f"max_model_len {self.max_model_len} exceeds the KV cache "
                f"({self.num_kv_blocks()} blocks x {self.block_size} tokens); lower it or add blocks"
            )


FIELDS = {f.name: f for f in dataclasses.fields(SimConfig)}


def coerce(name: str, raw: Any) -> Any:  # a TOML or command-line value; the field's type out
    """Convert a profile or command-line value to the field's type, with a one-line error."""
    if name not in FIELDS:
        raise UsageError(f"unknown sim option {name!r} (known: {', '.join(sorted(FIELDS))})")
    kind = type(getattr(SimConfig(), name))
    try:
        if kind is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                raise ValueError(text)
            return text in ("1", "true", "yes", "on")
        if kind is int and isinstance(raw, float) and not raw.is_integer():
            raise ValueError(raw)
        if kind is int:
            return int(float(raw)) if isinstance(raw, str) else int(raw)
        return kind(raw)
    except (TypeError, ValueError):
        raise UsageError(f"sim option {name}: {raw!r} is not a valid {kind.__name__}") from None


def profile_dir() -> Path:
    """The shipped simulator profiles, configs/sim/ (found through loadline/core/resources.py)."""
    return resources.config_file("sim")


def known_profiles() -> list[str]:
    return sorted(p.stem for p in profile_dir().glob("*.toml"))


def profile_path(profile: str) -> Path:
    """A profile is a name in configs/sim/ or a path to a TOML file (here first, then in the shipped configs/)."""
    candidate = Path(profile)
    if candidate.suffix == ".toml" or "/" in profile:
        return resources.resolve(candidate)
    return profile_dir() / f"{profile}.toml"


def load_profile(profile: str) -> dict[str, Any]:
    path = profile_path(profile)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"sim profile not found: {profile} (known: {', '.join(known_profiles())})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"sim profile {path} is not valid TOML: {exc}") from None
    flat: dict[str, Any] = {}
    for key, value in data.items():
        items = value.items() if isinstance(value, dict) else [(key, value)]
        for name, item in items:
            flat[name] = coerce(name, item)
    return flat


def parse_assignment(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise UsageError(f"--set expects KEY=VALUE (got {text!r})")
    return name.strip().replace("-", "_"), value.strip()


def build_config(profile: str, overrides: dict[str, object]) -> SimConfig:
    """Profile values, then overrides (already named by field), validated."""
    values = load_profile(profile)
    for name, raw in overrides.items():
        values[name] = coerce(name, raw)
    config = SimConfig(**values)
    config.validate()
    return config
