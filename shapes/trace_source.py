"""Where the trace shape's schedule comes from, and where it is kept for the report.

Two sources, one of them per run:
- `--trace-file FILE` (the web UI's form, or `locust -f`): a raw trace in any supported format,
  read, checked and warped by `--trace-speed`, `--trace-window`, `--trace-surge` and
  `--trace-block-tokens` on the master at test start (loadline/core/trace_files.py); the master
  then sends every worker its share with the start (loadline/runtime/trace.py), so only the
  master's host needs the file;
- `--trace-schedule FILE`: a schedule `loadline run --trace` wrote (already warped), or a JSONL
  trace replayed as recorded; every process reads it at that path.
The warp options belong to --trace-file: given with --trace-schedule they would be silently
ignored, so they are refused.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gevent

from loadline.core import runfolder
from loadline.core.errors import UsageError
from loadline.core.trace_files import warped
from loadline.core.trace_warp import Scheduled, load, write_rows

log = logging.getLogger("loadline")

SAVE_WAIT_S = 10.0  # the run folder is opened at test_start, just after the shape's first tick


@dataclass
class TraceSource:
    header: dict[str, Any]
    requests: list[Scheduled]
    shipped: bool  # the master hands the workers their shares (else each reads --trace-schedule)


def _text(options: Any, name: str) -> str:
    return str(getattr(options, name, "") or "").strip()


def source_of(options: Any) -> TraceSource:
    """The run's schedule from Locust's options (UsageError, one line, for any bad one)."""
    file, path = _text(options, "trace_file"), _text(options, "trace_schedule")
    speed = getattr(options, "trace_speed", 1.0)
    block = getattr(options, "trace_block_tokens", 0) or 0
    fmt = _text(options, "trace_format") or "auto"
    window, surge = _text(options, "trace_window"), _text(options, "trace_surge")
    if file and path:
        raise UsageError("--trace-file and --trace-schedule: give one trace")
    if file:
        try:
            speed, block = float(speed), int(block)
        except (TypeError, ValueError):
            raise UsageError(f"--trace-speed and --trace-block-tokens are numbers (got {speed!r}, {block!r})") from None
        schedule = warped(file, fmt, block, speed, window, surge)
        return TraceSource(schedule.header(), schedule.requests, shipped=True)
    if not path:
        raise UsageError("--shape trace replays a trace: --trace-file FILE (or loadline run --trace FILE)")
    if window or surge or block or fmt != "auto" or float(speed or 1.0) != 1.0:
        raise UsageError(
            "--trace-speed/--trace-window/--trace-surge/--trace-format/--trace-block-tokens apply to --trace-file; "
            "--trace-schedule is replayed as written"
        )
    header, requests = load(path)
    return TraceSource(header, requests, shipped=False)


def save_for_report(source: TraceSource) -> None:
    """Write the schedule into the run folder once it is open, unless `loadline run` already did."""

    def save() -> None:
        for _ in range(int(SAVE_WAIT_S / 0.05)):
            active = runfolder.active()
            if active is not None:
                target = Path(active.path) / runfolder.TRACE_SCHEDULE
                if not target.exists():
                    try:
                        write_rows(source.header, source.requests, target)
                    except OSError as exc:
                        log.warning("trace schedule not written to the run folder: %s", exc)
                return
            gevent.sleep(0.05)
        log.warning("trace schedule not written: no run folder within %.0f s", SAVE_WAIT_S)

    gevent.spawn(save)
