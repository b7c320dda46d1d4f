"""`loadline run --trace FILE`: the trace read, checked and warped before anything starts.

The file is read and checked by loadline/core/trace_files.py (the trace shape of a plain Locust run
reads it there too). The warped schedule (loadline/core/trace_warp.py) is written into the run
folder, where every worker reads its share and the report reads what was offered.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from loadline.core import runfolder
from loadline.core.errors import UsageError
from loadline.core.trace import FORMATS
from loadline.core.trace_files import read_trace, warped
from loadline.core.trace_warp import Schedule, write

__all__ = ["read_trace", "schedule_of", "sim_overrides", "validate", "write_schedule"]

TRACE = "trace"  # --trace FILE: the trace scenario and shape (users/trace.py, shapes/trace.py)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--trace",
        default=None,
        metavar="FILE",
        help="replay a trace open loop: Mooncake or Qwen Bailian JSONL, Azure or BurstGPT CSV/Parquet, "
        "Loadline JSONL/CSV/Parquet (docs/trace-replay.md)",
    )
    p.add_argument(
        "--trace-format", choices=("auto", *FORMATS), default="auto", help="the trace's format (default: from the file)"
    )
    p.add_argument(
        "--trace-block-tokens",
        type=int,
        default=0,
        help="tokens per hash_ids block (default: the format's, 512 for Mooncake, 16 for Bailian)",
    )
    p.add_argument("--trace-speed", type=float, default=1.0, help="replay speed: 4 = four times the trace's rate")
    p.add_argument(
        "--trace-window",
        default="",
        help="replay part of the trace, START..END from its first request: 2h..3h, 600..1200",
    )
    p.add_argument(
        "--trace-surge",
        default="",
        help="lay a surge on top: FACTORx@OFFSET+DURATION in trace time from the window's start, e.g. 3x@10m+2m",
    )


def schedule_of(args: argparse.Namespace) -> Schedule:
    """The run's schedule from the command line's --trace options (UsageError for any bad one)."""
    return warped(args.trace, args.trace_format, args.trace_block_tokens, args.trace_speed, args.trace_window,
                  args.trace_surge)  # fmt: skip


def sim_overrides(schedule: Schedule, profile: str, options: list[str]) -> list[str]:
    """`--set` options that size the embedded simulator for the trace, unless the user set them:
    - max_model_len: the longest request (input + output) fits, rounded up to 1,024;
    - num_gpu_blocks: the KV cache holds every distinct block of the trace on top of the profile's
      own room, so the cache's hit rate is the trace's reuse, not the profile's memory limit (a
      smaller cache is rehearsed with --sim-option num_gpu_blocks=N)."""
    from loadline.simulator.config import DEFAULT_PROFILE, build_config

    given: dict[str, object] = {o.split("=", 1)[0].strip(): o.split("=", 1)[1] for o in options if "=" in o}
    config = build_config(profile or DEFAULT_PROFILE, given)
    out = []
    longest = max(r.input_tokens + max(1, r.output_tokens) for r in schedule.requests)
    if "max_model_len" not in given and longest > config.max_model_len:
        out.append(f"max_model_len={-(-longest // 1024) * 1024}")
    distinct = len({h for r in schedule.requests for h in r.hash_ids})
    needed = -(-distinct * schedule.block_tokens // config.block_size)
    if not {"num_gpu_blocks", "gpu_memory_utilization"} & set(given) and needed > config.num_kv_blocks() // 2:
        out.append(f"num_gpu_blocks={needed + config.num_kv_blocks()}")
    return [arg for option in out for arg in ("--set", option)]


def write_schedule(schedule: Schedule, run_dir: Path) -> Path:
    path = run_dir / runfolder.TRACE_SCHEDULE
    write(schedule, path)
    return path


def validate(args: argparse.Namespace) -> None:
    """--trace: the file read and checked, its schedule warped, before anything starts; the trace
    scenario and shape implied. Trace options without --trace are refused, not ignored."""
    args.schedule, args.trace_schedule = None, ""
    if not args.trace:
        if args.scenario == TRACE:
            raise UsageError("--scenario trace replays a trace: give --trace FILE")
        given = [flag for flag, value in (("--trace-window", args.trace_window), ("--trace-surge", args.trace_surge))
                 if value]  # fmt: skip
        if args.trace_speed != 1.0 or args.trace_block_tokens or given or args.trace_format != "auto":
            raise UsageError(
                "--trace-speed/--trace-window/--trace-surge/--trace-block-tokens/--trace-format need --trace FILE"
            )
        return
    if args.scenario not in (None, TRACE) or args.shape not in (None, TRACE):
        raise UsageError("--trace replays the trace's own schedule: no --scenario or --shape with it")
    if args.rate is not None or args.arrival is not None:
        raise UsageError("--trace sends at the trace's times: no --rate or --arrival with it")
    args.scenario = args.shape = TRACE
    args.schedule = schedule_of(args)
