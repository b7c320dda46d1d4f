"""Loadline's Locust options: one place, visible in the web UI form, usable from conf files.

Locust traps honoured here (REFERENCE-locust.md): options go on the parser itself (a group never
reaches the web UI), defaults are typed (form values are converted with the default's type),
env vars work only with `env_var=`, and workers read option values at test_start, not at init.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadline.client.arrivals import PROCESSES, ArrivalSettings
from loadline.client.lengths import Lengths, parse_lengths
from loadline.client.prompts import PromptSource, load_dataset, parse_mix
from loadline.client.trace_options import add_trace_arguments
from loadline.client.workload import LogNormal, SessionLength, ThinkTime
from loadline.core.errors import UsageError
from loadline.core.runsettings import time_scale_of_options
from loadline.core.slo import defaults_text

API_KEY_ENV = "LOADLINE_API_KEY"
INVALID = "invalid"  # marks options that failed validation at test start
REQUEST_ID_HEADER = "X-Request-Id"
_TOKEN_CHARS = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP field name (RFC 9110 token)


def add_arguments(parser: Any) -> None:
    add = parser.add_argument
    add(
        "--api-key",
        default="",
        is_secret=True,
        include_in_web_ui=True,
        env_var=API_KEY_ENV,
        help=f"API key sent as 'Authorization: Bearer'. Prefer the {API_KEY_ENV} (or OPENAI_API_KEY) "
        "environment variable: a command-line value is visible to anyone who can open the web UI.",
    )
    add(
        "--model",
        default="",
        include_in_web_ui=True,
        help="model name to request; empty = the first model listed by GET /v1/models",
    )
    add(
        "--max-tokens",
        type=int,
        default=256,
        include_in_web_ui=True,
        help="max_tokens per request (0 = let the server decide); see --output-tokens for a distribution",
    )
    add(
        "--output-tokens",
        default="",
        include_in_web_ui=True,
        help="reply lengths in tokens, a distribution: 256, uniform:100-300, normal:300,50, lognormal:300,0.6 "
        "(sent as max_tokens per request; with --ignore-eos exact); empty = --max-tokens",
    )
    add(
        "--ignore-eos",
        action="store_true",
        default=False,
        include_in_web_ui=True,
        help="ask for exactly max_tokens tokens (ignore_eos and min_tokens: vLLM, SGLang, llama.cpp): "
        "fixed-length outputs for benchmarks",
    )
    add(
        "--prompt-mix",
        default="short=0.6,medium=0.3,long=0.1",
        include_in_web_ui=True,
        help="weights of prompt length classes, in the target's tokens: short (8-48), medium (200-500), long (1000-2000)",
    )
    add(
        "--prompt-tokens",
        default="",
        include_in_web_ui=True,
        help="prompt lengths in the target's tokens, a distribution: 500, uniform:100-300, normal:300,50, "
        "lognormal:300,0.6, or classes short=0.6,medium=0.4; empty = --prompt-mix. Chat sessions: each new message",
    )
    add(
        "--tokenizer",
        default="",
        include_in_web_ui=True,
        help="count prompt tokens with this Hugging Face tokenizer (tokenizer.json path or hub name; needs the "
        "'tokenizers' package); empty = the server's /tokenize, else calibration from usage",
    )
    add(
        "--system-prompt-tokens",
        type=int,
        default=0,
        include_in_web_ui=True,
        help="length of a shared system prompt in the target's tokens (agent template, same prefix for all users); 0 = none",
    )
    add(
        "--dataset",
        default="",
        include_in_web_ui=True,
        help="JSONL conversations (ShareGPT-style) to replay instead of synthetic prompts",
    )
    add(
        "--max-context-tokens",
        type=int,
        default=-1,
        include_in_web_ui=True,
        help="context length in server tokens: prompts are sized, and the oldest turns dropped (a too-long "
        "message cut), so that prompt + max_tokens fits in the target's tokens; -1 = ask the server "
        "(vLLM/SGLang max_model_len, llama.cpp n_ctx per slot, TGI max_total_tokens), 0 = never trim",
    )
    add("--turns-mean", type=float, default=4.0, include_in_web_ui=True, help="mean turns per chat session")
    add("--turns-max", type=int, default=12, include_in_web_ui=True, help="cap on turns per chat session")
    add(
        "--think-mean",
        type=float,
        default=8.0,
        include_in_web_ui=True,
        help="mean think time between turns, seconds (lognormal); 0 = no think time",
    )
    add("--think-p90", type=float, default=15.0, include_in_web_ui=True, help="90th percentile of think time, seconds")
    add(
        "--reading-speed",
        type=float,
        default=0.0,
        include_in_web_ui=True,
        help="add reading time: reply tokens / this many tokens per second (0 = off)",
    )
    add(
        "--event-interval",
        type=float,
        default=5.0,
        include_in_web_ui=True,
        help="single-shot and completion users: mean seconds between events (exponential)",
    )
    # Open loop (users/arrivals.py, `loadline run --scenario rate`): rates are in model time.
    add(
        "--arrival-rate",
        type=float,
        default=0.0,
        include_in_web_ui=True,
        help="arrival-rate users: requests (or sessions) per second over all workers; 0 = set by a rate shape",
    )
    add(
        "--arrival",
        default="poisson",
        choices=list(PROCESSES),
        include_in_web_ui=True,
        help="arrival process: constant, poisson, or gamma (with --burstiness, as vllm bench serve)",
    )
    add(
        "--burstiness",
        type=float,
        default=1.0,
        include_in_web_ui=True,
        help="gamma arrivals: shape factor (1 = Poisson, < 1 burstier, > 1 more regular)",
    )
    add(
        "--max-inflight",
        type=int,
        default=1000,
        include_in_web_ui=True,
        help="arrival-rate users: cap on requests (sessions) in flight over all workers; arrivals over it "
        "wait for a free slot and count as late",
    )
    add(
        "--arrival-sessions",
        action="store_true",
        default=False,
        include_in_web_ui=True,
        help="arrival-rate users: each arrival starts a multi-turn chat session (turns, think time)",
    )
    add_trace_arguments(parser)
    add(
        "--request-id-header",
        default=REQUEST_ID_HEADER,
        include_in_web_ui=True,
        help="header carrying each request's id (a UUID, every server accepts it; the record's request_id, "
        "which the simulator logs as its truth); another name for gateways that want one, empty = none",
    )
    add("--connect-timeout", type=float, default=5.0, include_in_web_ui=True, help="seconds to connect")
    add(
        "--first-token-timeout",
        type=float,
        default=60.0,
        include_in_web_ui=True,
        help="seconds to wait for the headers and then for each next byte of the stream",
    )
    add(
        "--request-timeout",
        type=float,
        default=600.0,
        include_in_web_ui=True,
        help="total seconds one request may take",
    )
    add(
        "--max-retries",
        type=int,
        default=2,
        include_in_web_ui=True,
        help="retries on 429/503 (honouring Retry-After); each attempt is its own record",
    )
    add("--retry-cap", type=float, default=10.0, include_in_web_ui=True, help="longest wait before a retry, seconds")
    add(
        "--non-streaming",
        action="store_true",
        default=False,
        include_in_web_ui=True,
        help="send stream=false (TTFT/ITL are then not measurable)",
    )
    add(
        "--time-scale",
        type=float,
        default=1.0,
        include_in_web_ui=True,
        help="divide every think time and shape duration by this (match the simulator's --time-scale)",
    )
    add("--seed", type=int, default=0, include_in_web_ui=True, help="random seed for prompts and pacing (0 = random)")
    add(
        "--run-dir",
        default="",
        include_in_web_ui=False,
        help="write the run folder here (default: a new folder under --out at each test start)",
    )
    add("--out", default="runs", include_in_web_ui=True, help="where run folders are created")
    add("--slo-file", default="", include_in_web_ui=True, help=f"SLO thresholds (TOML); default: {defaults_text()}")
    # Read by `loadline run` from a conf file (the embedded simulator a profile was written for);
    # declared here so that Locust accepts the keys in the same file.
    add(
        "--sim-profile",
        default="",
        include_in_web_ui=False,
        help="loadline run: simulator profile to start when no --host is given (conf files)",
    )
    add(
        "--sim-option",
        default="",
        include_in_web_ui=False,
        help="loadline run: comma-separated KEY=VALUE simulator overrides (conf files)",
    )
    add(
        "--scrape-url",
        default="",
        include_in_web_ui=True,
        help="comma-separated NAME=URL Prometheus endpoints scraped by the master (default: the target's /metrics)",
    )
    add("--scrape-interval", type=float, default=5.0, include_in_web_ui=True, help="seconds between scrapes")
    add(
        "--metrics-port",
        type=int,
        default=0,
        include_in_web_ui=False,
        help="expose the generator's own metrics for Prometheus on this port (0 = off)",
    )


@dataclass(frozen=True)
class UserSettings:
    """Everything a user needs, built once per test start from the parsed options."""

    api_key: str
    model: str
    max_tokens: int
    max_context_tokens: int
    ignore_eos: bool
    stream: bool
    prompts: PromptSource
    think: ThinkTime
    session: SessionLength
    event_interval: float
    connect_timeout: float
    first_token_timeout: float
    request_timeout: float
    max_retries: int
    retry_cap: float
    time_scale: float
    seed: int
    request_id_header: str = REQUEST_ID_HEADER  # "" = send no id header
    output: Lengths | None = None  # reply lengths (--output-tokens); None = max_tokens every time
    tokenizer: str = ""  # --tokenizer: a Hugging Face tokenizer to count with
    arrivals: ArrivalSettings | None = None  # open-loop options (only arrival-rate users read them)

    @classmethod
    def from_options(cls, o: Any) -> UserSettings:
        time_scale = time_scale_of_options(o)  # the one validation (loadline/core/runsettings.py)
        check_ranges(o)
        dataset = load_dataset(o.dataset) if o.dataset else ()
        lengths = parse_lengths(o.prompt_tokens, "--prompt-tokens") if getattr(o, "prompt_tokens", "") else None
        output_spec = getattr(o, "output_tokens", "")
        prompts = PromptSource(parse_mix(o.prompt_mix), dataset, lengths, o.system_prompt_tokens)
        api_key = (o.api_key or os.environ.get("OPENAI_API_KEY", "")).strip()
        if any(ord(c) < 32 or ord(c) == 127 for c in api_key):
            raise UsageError("the API key contains control characters (value not shown)")
        return cls(
            api_key=api_key,
            model=o.model,
            max_tokens=o.max_tokens,
            ignore_eos=bool(o.ignore_eos),
            max_context_tokens=o.max_context_tokens,
            stream=not o.non_streaming,
            prompts=prompts,
            think=ThinkTime(LogNormal(o.think_mean, o.think_p90), o.reading_speed, time_scale),
            session=SessionLength(o.turns_mean, o.turns_max),
            event_interval=o.event_interval / time_scale,
            connect_timeout=o.connect_timeout,
            first_token_timeout=o.first_token_timeout,
            request_timeout=o.request_timeout,
            max_retries=o.max_retries,
            retry_cap=o.retry_cap,
            time_scale=time_scale,
            seed=o.seed,
            request_id_header=header_name(getattr(o, "request_id_header", REQUEST_ID_HEADER)),
            arrivals=ArrivalSettings.from_options(o),
            output=parse_lengths(output_spec, "--output-tokens") if output_spec else None,
            tokenizer=tokenizer_name(getattr(o, "tokenizer", "")),
        )


# Each numeric option's range: (lowest allowed, whether the lowest itself is allowed). A negative
# count or a NaN would otherwise run a whole test wrongly (--max-tokens -5 ran 60 s).
RANGES: dict[str, tuple[float, bool]] = {
    "max_tokens": (0, True),
    "system_prompt_tokens": (0, True),
    "max_context_tokens": (-1, True),
    "turns_mean": (0, False),
    "turns_max": (1, True),
    "think_mean": (0, True),
    "think_p90": (0, True),
    "reading_speed": (0, True),
    "event_interval": (0, True),
    "max_retries": (0, True),
    "retry_cap": (0, True),
    "connect_timeout": (0, False),
    "first_token_timeout": (0, False),
    "request_timeout": (0, False),
    "scrape_interval": (0, False),
}


def check_ranges(o: Any) -> None:
    """UsageError (one line) for the first numeric option out of its range (RANGES) or not finite."""
    for name, (low, inclusive) in RANGES.items():
        value = getattr(o, name, None)
        if value is None:
            continue
        ok = math.isfinite(value) and (value >= low if inclusive else value > low)
        if not ok:
            raise UsageError(f"--{name.replace('_', '-')} must be {'>=' if inclusive else '>'} {low:g} (got {value!r})")


def header_name(name: str) -> str:
    """A valid HTTP header name, or "" (no header); anything else is a UsageError."""
    name = (name or "").strip()
    if name and not _TOKEN_CHARS.fullmatch(name):
        raise UsageError(f"--request-id-header {name!r} is not a valid HTTP header name")
    return name


def tokenizer_name(name: str) -> str:
    """--tokenizer, checked before any load: the optional package is there and a tokenizer.json path
    exists (a hub name is only tried when the first user starts: it may need the network)."""
    name = (name or "").strip()
    if not name:
        return ""
    if importlib.util.find_spec("tokenizers") is None:
        raise UsageError("--tokenizer needs the 'tokenizers' package: pip install 'loadline[tokenizer]'")
    if name.endswith(".json") and not Path(name).is_file():
        raise UsageError(f"--tokenizer {name}: no such file")
    return name
