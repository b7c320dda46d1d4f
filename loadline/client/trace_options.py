"""The trace user's and trace shape's Locust options: which trace, and how it is warped.

Two ways in: `--trace-schedule`, a schedule already warped (what `loadline run --trace FILE` writes),
which every host reads at its path; or `--trace-file` with the warp options, read and warped by the
master at test start (shapes/trace.py), each worker sent its share, so only the master needs the file.
"""

from __future__ import annotations

from typing import Any

from loadline.core.trace import FORMATS


def add_trace_arguments(parser: Any) -> None:
    parser.add_argument(
        "--trace-schedule",
        default="",
        include_in_web_ui=True,
        help="trace users (locustfiles/trace.py with the trace shape): the schedule `loadline run --trace FILE` "
        "writes, or a JSONL trace replayed as recorded; every host reads it at this path",
    )
    add_trace_file_arguments(parser)


def add_trace_file_arguments(parser: Any) -> None:
    """The trace shape's own reading of a trace (shapes/trace.py): a raw trace, warped on the master at
    test start, each worker sent its share (so only the master needs the file)."""
    add = parser.add_argument
    add(
        "--trace-file",
        default="",
        include_in_web_ui=True,
        help="trace users with the trace shape: a trace file (Mooncake, Qwen Bailian or Loadline JSONL; Azure, "
        "BurstGPT or Loadline CSV or Parquet), warped by the options below on the master at test start; only the master needs the file",
    )
    add("--trace-format", default="auto", choices=["auto", *FORMATS], include_in_web_ui=True,
        help="--trace-file's format (auto: from the file)")  # fmt: skip
    add("--trace-speed", type=float, default=1.0, include_in_web_ui=True,
        help="--trace-file's replay speed: 4 = four times the trace's rate")  # fmt: skip
    add("--trace-window", default="", include_in_web_ui=True,
        help="replay part of --trace-file, START..END from its first request: 2h..3h, 600..1200, 90m..")  # fmt: skip
    add("--trace-surge", default="", include_in_web_ui=True,
        help="surges on top of --trace-file: FACTORx@OFFSET+DURATION in trace time from the window's start, "
        "comma-separated, e.g. 3x@10m+2m")  # fmt: skip
    add("--trace-block-tokens", type=int, default=0, include_in_web_ui=True,
        help="tokens per hash_ids block of --trace-file (0: the format's, 512; Bailian 16)")  # fmt: skip
