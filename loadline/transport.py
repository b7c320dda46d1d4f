"""Every record reaches the master's run folder exactly once.

Workers buffer rows and ship them every second with a custom Locust message; the master (or the
single local process) appends them to requests.csv. At a stop, each worker ships what is left
*before* it tells the master it stopped (messages on one socket arrive in order), so the master's
test_stop sees every row. Locust's own headless --run-time path (`quit`) fires the master's
test_stop before workers stop and gives them only 0.5 s, so on that path the master first asks each
worker to stop its users and flush, and waits (bounded) for their acknowledgements.
"""

from __future__ import annotations

import logging
import time

import gevent

from loadline.records import RequestRecord

log = logging.getLogger("loadline")

RECORDS_MSG = "loadline_records"
FLUSH_MSG = "loadline_flush"
FLUSHED_MSG = "loadline_flushed"
FLUSH_INTERVAL_S = 1.0
FLUSH_WAIT_S = 15.0


class RecordBuffer:
    """Per-process buffer of finished records, drained by the shipper or the local sink."""

    def __init__(self) -> None:
        self._rows: list[list] = []
        self.added = 0

    def add(self, rec: RequestRecord) -> None:
        self._rows.append(rec.to_row())
        self.added += 1

    def drain(self) -> list[list]:
        rows, self._rows = self._rows, []
        return rows


class WorkerShipper:
    """Worker side: sends the buffer to the master every second and at test stop."""

    def __init__(self, environment, worker_id: str) -> None:
        self.environment = environment
        self.worker_id = worker_id
        self.sent = 0
        self._greenlet: gevent.Greenlet | None = None

    def start(self) -> None:
        if self._greenlet is None or self._greenlet.dead:
            self._greenlet = gevent.spawn(self._loop)

    def _loop(self) -> None:
        while True:
            gevent.sleep(FLUSH_INTERVAL_S)
            self.ship()

    def ship(self) -> None:
        rows = self.environment.loadline_records.drain()
        if rows:
            self.environment.runner.send_message(RECORDS_MSG, {"worker": self.worker_id, "rows": rows})
            self.sent += len(rows)

    def stop(self) -> None:
        """Called from the worker's test_stop, after Locust killed the users (cancelled rows exist)."""
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None
        self.ship()

    def on_flush_request(self, environment, msg, **_) -> None:
        """Master asks (quit path): stop users now, ship everything, acknowledge."""
        runner = environment.runner
        runner.stop()  # fires our test_stop listener, which ships the rows
        self.ship()
        runner.send_message(FLUSHED_MSG, {"worker": self.worker_id, "sent": self.sent})


class FlushCoordinator:
    """Master side of the quit path: ask running workers to flush, wait (bounded) for their acks."""

    def __init__(self, runner) -> None:
        self.runner = runner
        self._acked: set[str] = set()
        runner.register_message(FLUSHED_MSG, self._on_ack)

    def _on_ack(self, environment, msg, **_) -> None:
        self._acked.add(msg.node_id)

    def drain(self) -> list[str]:
        """Returns the ids of workers that did not acknowledge in time (their last second is lost)."""
        clients = [c for c in self.runner.clients.all if getattr(c, "user_count", 0) > 0 and c.state != "missing"]
        if not clients:
            return []
        pending = {c.id for c in clients}
        self._acked.clear()
        for client in clients:
            self.runner.send_message(FLUSH_MSG, None, client_id=client.id)
        deadline = time.monotonic() + FLUSH_WAIT_S
        while pending - self._acked and time.monotonic() < deadline:
            gevent.sleep(0.05)
        lost = sorted(pending - self._acked)
        if lost:
            log.warning("loadline: %d worker(s) did not flush their records within %.0f s", len(lost), FLUSH_WAIT_S)
        return lost
