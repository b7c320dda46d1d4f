"""A trace replay's start and shares, from the master to every process's trace users.

At the replay's first phase the master picks a start a little ahead (LEAD_S: the workers get the
message and open their schedule first) and sends each worker a `loadline_trace` message: its share
(k of n, workers in Locust's client-id order) and the start on that worker's clock (the master's
start plus the worker's clock offset, loadline/runtime/clocksync.py, when one is known yet).
When the master warped the trace itself (`--trace-file`), the message also carries the worker's
share of the schedule (rows as the schedule file writes them), so no worker needs the file.
"""

from __future__ import annotations

import logging
import time

from locust.runners import MasterRunner

from loadline.client.trace_control import CONTROL
from loadline.core.trace_warp import Scheduled, share

log = logging.getLogger("loadline")

TRACE_MSG = "loadline_trace"
LEAD_S = 2.0  # wall seconds from the decision to the first due time
_replay: dict[str, float] = {}  # on the master: "start" while a replay runs


def install_master(environment) -> None:
    environment.events.worker_connect.add_listener(_late_worker)


def _late_worker(client_id: str, **_) -> None:
    """Locust hands a worker that joins mid-run some users, moved from the others: the shares were cut
    at the start, so the moved user's share stops and the newcomer has none. Said, not hidden; the
    report counts what was not sent as never sent."""
    if "start" in _replay:
        log.warning(
            "loadline: worker %s joined during the trace replay: Locust moves users to it, so a share may stop "
            "there (the report counts those requests as never sent); start every worker before the replay",
            client_id,
        )


def install_worker(runner) -> None:
    runner.register_message(TRACE_MSG, _on_trace)


def _on_trace(environment, msg, **_) -> None:
    data = msg.data or {}
    rows = data.get("rows")
    requests = [Scheduled.of_row(row) for row in rows] if rows is not None else None
    CONTROL.set(float(data["start_wall"]), int(data.get("share", 0)), int(data.get("shares", 1)), requests,
                int(data.get("block_tokens") or 0))  # fmt: skip


def publish(
    environment, lead_s: float = LEAD_S, requests: list[Scheduled] | None = None, block_tokens: int = 0
) -> float:
    """Start the replay `lead_s` from now in every process; returns the start on the master's clock.
    `requests`: the schedule to hand out (each worker its share), when the workers do not read a file."""
    runner = environment.runner
    if isinstance(runner, MasterRunner):
        clients = sorted(c.id for c in runner.clients.all if c.state != "missing")
        clock = getattr(getattr(environment, "loadline_collector", None), "clock", None)
        rows = [[r.row() for r in share(requests, k, len(clients))] if requests is not None else None
                for k in range(len(clients))]  # fmt: skip
        start = time.time() + lead_s  # after the shares are cut: their time does not come out of the lead
        for k, client in enumerate(clients):
            offset = clock.node_offset(client) if clock is not None else None
            data: dict = {"start_wall": start + (offset or 0.0), "share": k, "shares": len(clients)}
            if rows[k] is not None:
                data.update(rows=rows[k], block_tokens=block_tokens)
            runner.send_message(TRACE_MSG, data, client_id=client)
        log.info("trace replay starts in %.1f s, split over %d workers", lead_s, len(clients))
        _replay["start"] = start
    else:
        start = time.time() + lead_s
        CONTROL.set(start, 0, 1, requests, block_tokens)
    return start


def stop() -> None:
    CONTROL.reset()
    _replay.clear()
