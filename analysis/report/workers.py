"""The report's "Workers" lines: lost workers, workers that could not run or ran short, clock offsets.

Facts written by the master into manifest.json (loadline/runtime/fleet.py, clocksync.py); with the
embedded simulator's truth log the loss of a lost worker is counted exactly (its requests the
server saw and the run folder never got), else it is the master's estimate.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pandas as pd

from loadline.core.identity import request_tag_of_worker


def _clock(ts: float | None) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(ts)) + " UTC" if isinstance(ts, (int, float)) else "?"


def _unrecorded(worker: str, requests: pd.DataFrame, truth: pd.DataFrame | None) -> int | None:
    """Requests of `worker` the server logged that have no row; None without a truth log."""
    if truth is None or truth.empty or "request_id" not in truth or "request_id" not in requests:
        return None
    tag = request_tag_of_worker(worker)
    mine = truth[truth["request_id"].astype(str).str.startswith(tag)]
    return int((~mine["request_id"].isin(requests["request_id"])).sum())


def worker_lines(manifest: dict, requests: pd.DataFrame, truth: Callable[[], pd.DataFrame | None]) -> list[str]:
    lines = []
    lost = manifest.get("workers_lost") or []
    if lost and all(isinstance(entry, dict) for entry in lost):
        log = truth()
        parts = []
        for entry in lost:
            worker = str(entry.get("worker"))
            how = "heartbeats stopped" if entry.get("how") == "missing" else str(entry.get("how"))
            counted = _unrecorded(worker, requests, log)
            loss = (
                f"{counted} request(s) the server saw were never recorded (about "
                f"{entry.get('requests_lost_estimate')} estimated)"
                if counted is not None
                else f"about {entry.get('requests_lost_estimate')} request(s) in flight or unshipped were not recorded "
                f"({entry.get('in_flight')} in flight at its last message)"
            )
            phases = ", ".join(entry.get("phases") or []) or "none"
            back = f"; back at {_clock(entry['rejoined_at'])}" if entry.get("rejoined_at") else ""
            parts.append(
                f"{worker} at {_clock(entry.get('lost_at'))} ({how}; last heard {_clock(entry.get('last_seen'))})"
                f", {loss}; phases affected: {phases}{back}"
            )
        lines.append("Workers lost: " + "; ".join(parts))
    elif lost:  # an older manifest: bare ids of workers that did not flush at the stop
        lines.append("Workers lost: " + ", ".join(map(str, lost)) + " (their last records never arrived)")
    came_back = [e for e in manifest.get("workers_back") or [] if isinstance(e, dict)]
    if came_back:
        lines.append(
            "Workers missing for a while (heartbeats late, then back; their users were moved meanwhile): "
            + "; ".join(
                f"{e.get('worker')} {_clock(e.get('lost_at'))} to {_clock(e.get('rejoined_at'))}" for e in came_back
            )
        )
    for error in manifest.get("worker_errors") or []:
        lines.append(f"Worker {error.get('worker')} could not run: {error.get('reason')}")
    for short in manifest.get("worker_shortfalls") or []:
        share = short.get("share_ran")
        ran = (
            f"{share:.0%} of the {short.get('users_planned')} planned users ran from {_clock(short.get('at'))}"
            if isinstance(share, (int, float))
            else f"{short.get('users_short')} user(s) missing from {_clock(short.get('at'))}"
        )
        phases = ", ".join(short.get("phases") or []) or "the rest of the run"
        lines.append(
            f"Worker {short.get('worker')}: {short.get('kind')} (the run went on: `loadline run -- --allow-partial-workers`): "
            f"{ran}; {short.get('reason')}; phases set aside: {phases}"
        )
    for worker, differ in sorted((manifest.get("worker_option_mismatches") or {}).items()):
        shown = ", ".join(f"--{k.replace('_', '-')} {v[0]!r} (ran with {v[1]!r})" for k, v in differ.items())
        lines.append(f"Worker {worker} was started with its own option values, replaced by the master's: {shown}")
    offsets = {w: e for w, e in (manifest.get("clock_offsets") or {}).items() if e.get("offset_s") is not None}
    if offsets:
        shown = ", ".join(
            f"{w} {e['offset_s']:+.3f} s (±{e.get('uncertainty_ms')} ms)" for w, e in sorted(offsets.items())
        )
        lines.append(f"Worker clocks vs the master's: {shown}; request start times were put on the master's clock")
    lines += [f"Clock warning: {text}" for text in manifest.get("clock_warnings") or []]
    return lines
