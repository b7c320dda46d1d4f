"""`loadline sim`: serve the simulated OpenAI-compatible inference server."""

from __future__ import annotations

import argparse
import asyncio
import os

from loadline.core.errors import UsageError
from loadline.core.lifeline import die_with_parent
from loadline.simulator.admin import check_admin_bind
from loadline.simulator.config import DEFAULT_PROFILE, build_config, known_profiles, parse_assignment
from loadline.simulator.server import ServeOptions, serve

HELP = f"""Serve a simulated OpenAI-compatible LLM inference server (vLLM-like engine model, /metrics,
faults, ground-truth log). Profiles: {", ".join(known_profiles())}.
The first stdout line is 'loadline-sim listening on http://HOST:PORT'. See docs/simulator.md."""

# Shortcut options: --name maps to the profile key name_with_underscores (same as --set key=value).
SHORTCUTS: dict[str, str] = {
    "replicas": "number of engine replicas behind the load balancer",
    "lb": "load balancing policy: round_robin or least_conn",
    "time_scale": "divide every engine time constant by this (30: a 30-minute scenario runs in ~1 minute)",
    "seed": "seed of the output-length and fault randomness",
    "max_num_seqs": "most sequences in the running batch (vLLM --max-num-seqs)",
    "max_num_batched_tokens": "token budget of one engine step, prefill chunks included",
    "num_gpu_blocks": "KV-cache blocks (0: derive from GPU memory and gpu_memory_utilization)",
    "block_size": "tokens per KV-cache block",
    "max_model_len": "longest prompt + output accepted (longer requests get 400)",
    "model_name": "served model name (in /v1/models, responses and metric labels)",
    "restart_delay_s": "model reload time after a kill or OOM, in model seconds",
    "error_rate": "fault: fraction of requests that fail (HTTP 500 before the first token, else in-stream)",
    "latency_spike": "fault: multiply every engine step time (1 = off)",
    "leak_blocks_per_s": "fault: KV blocks leaked per model second until the replica OOM-restarts",
    "max_connections": "fault: gateway cap on open connections; excess requests get 503 and a close",
    "accept_delay_ms": "fault: slow accept, delay before a new connection is read (model ms)",
    "quirks": "real-server behaviours, '+'-separated: close-after-stream, uuid-request-id, interrupt "
    "(llama.cpp's; simulator/quirks.py)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--profile",
        default=DEFAULT_PROFILE,
        help=f"profile name in configs/sim/ or a path to a TOML file (default {DEFAULT_PROFILE})",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to bind; 0 picks a free one (default 8000)")
    parser.add_argument("--truth", metavar="FILE", help="append one JSON line per request to FILE (ground truth)")
    parser.add_argument(
        "--api-key",
        help="require 'Authorization: Bearer KEY' on /v1 routes (or set LOADLINE_SIM_API_KEY; never logged)",
    )
    parser.add_argument(
        "--admin",
        action="store_true",
        help="serve the fault/replica admin API on 127.0.0.1 (printed on the second stdout line)",
    )
    parser.add_argument("--admin-port", type=int, default=0, help="admin API port (default: a free one)")
    parser.add_argument(
        "--admin-host",
        default="127.0.0.1",
        help="address of the admin API (default 127.0.0.1); another one needs --admin-token, "
        "e.g. for drills run by a master on another host",
    )
    parser.add_argument(
        "--admin-token",
        default=None,
        help="require 'Authorization: Bearer TOKEN' on the admin API (or set "
        "LOADLINE_SIM_ADMIN_TOKEN, which drills send; never logged)",
    )
    parser.add_argument(
        "--max-queue",
        type=int,
        metavar="N",
        help="cap on waiting requests per replica; beyond it: 503 + Retry-After "
        "(= --set max_num_queued_reqs=N; queue_full_status=429 to answer 429)",
    )
    parser.add_argument(
        "--set",
        dest="assignments",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override any profile key, repeatable (e.g. --set max_num_seqs=4)",
    )
    for name, text in SHORTCUTS.items():
        parser.add_argument("--" + name.replace("_", "-"), dest="opt_" + name, metavar="VALUE", help=text)


def overrides_from(args: argparse.Namespace) -> dict[str, object]:
    overrides: dict[str, object] = {}
    for text in args.assignments:
        name, value = parse_assignment(text)
        overrides[name] = value
    for name in SHORTCUTS:
        given = getattr(args, "opt_" + name, None)
        if given is not None:
            overrides[name] = given
    if args.max_queue is not None:
        overrides["max_num_queued_reqs"] = args.max_queue
    return overrides


def main(args: argparse.Namespace) -> int:
    die_with_parent()  # started by `loadline run`: end with it, even when it is killed
    config = build_config(args.profile, overrides_from(args))
    if not 0 <= args.port <= 65535 or not 0 <= args.admin_port <= 65535:
        raise UsageError("ports must be within 0..65535")
    if args.truth:
        try:
            open(args.truth, "a").close()  # fail now with a clear line, not later in the event loop
        except OSError as exc:
            raise UsageError(f"cannot write the truth log {args.truth}: {exc.strerror}") from None
    admin_token = args.admin_token or os.environ.get("LOADLINE_SIM_ADMIN_TOKEN") or None
    if args.admin:
        check_admin_bind(args.admin_host, admin_token)
    options = ServeOptions(
        host=args.host,
        port=args.port,
        truth_path=args.truth,
        api_key=args.api_key or os.environ.get("LOADLINE_SIM_API_KEY") or None,
        admin=args.admin,
        admin_port=args.admin_port,
        admin_host=args.admin_host,
        admin_token=admin_token,
    )
    runner = asyncio.run
    # The stdlib loop unless asked: uvloop starts reading a new connection before its protocol can hand
    # the reading to simulator/kernel_rx.py, so there a connection's first request would carry the
    # parse-time stamp in the truth's `arrival`; and it was within noise of the stdlib loop's speed
    # (docs/benchmarks.md).
    if os.environ.get("LOADLINE_SIM_EVENT_LOOP", "asyncio") == "uvloop":
        try:  # imported here, not at the top: uvloop is optional and only wanted when this variable asks for it
            import uvloop

            runner = uvloop.run
        except ImportError:  # not a requirement: the stdlib loop serves
            pass
    try:
        return runner(serve(config, options))
    except OSError as exc:
        raise UsageError(f"cannot serve on {args.host}:{args.port}: {exc.strerror or exc}") from None
