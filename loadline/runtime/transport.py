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

from loadline.core.records import RequestRecord

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
        self.begun = 0  # attempts started (client/users/base.py); every attempt ends as one added row

    def begin(self) -> None:
        self.begun += 1

    def add(self, rec: RequestRecord) -> None:
        self._rows.append(rec.to_row())
        self.added += 1

    @property
    def in_flight(self) -> int:
        return max(0, self.begun - self.added)

    def __len__(self) -> int:
        return len(self._rows)

    def drain(self) -> list[list]:
        rows, self._rows = self._rows, []
        return rows

    def put_back(self, rows: list[list]) -> None:
        self._rows[:0] = rows


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
        buffer = self.environment.loadline_records
        rows = buffer.drain()
        # An empty batch is sent too: it tells the master what is in flight (its estimate if we die).
        try:
            # in_flight: what this worker would take with it if it died now (the master's loss estimate)
            self.environment.runner.send_message(
                RECORDS_MSG, {"worker": self.worker_id, "rows": rows, "in_flight": buffer.in_flight}
            )
        except Exception as exc:  # e.g. the master is reconnecting: keep the rows for the next try
            buffer.put_back(rows)
            if rows:
                log.warning("loadline: could not ship %d records yet: %s", len(rows), exc)
            return
        self.sent += len(rows)

    def status(self) -> dict:
        """In flight and finished-but-unshipped counts, sent with each clock reply (clocksync.py)."""
        buffer = self.environment.loadline_records
        return {"in_flight": buffer.in_flight, "unshipped": len(buffer)}

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
        runner.send_message(FLUSHED_MSG, {"worker": self.worker_id, "sent": self.sent})


class FlushCoordinator:
    """Master side of the quit path: ask running workers to flush, wait (bounded) for their acks."""

    def __init__(self, runner) -> None:
        self.runner = runner
        self._acked: set[str] = set()
        runner.register_message(FLUSHED_MSG, self._on_ack)

    def _on_ack(self, environment, msg, **_) -> None:
        self._acked.add(msg.node_id)

    def _waiting_for(self, pending: set[str]) -> set[str]:
        """Workers asked to flush that have neither acknowledged nor left (a worker that quit shipped first)."""
        connected = {c.id for c in self.runner.clients.all if c.state != "missing"}
        return (pending - self._acked) & connected

    def drain(self) -> list[str]:
        """Returns the ids of workers that did not acknowledge in time (their last second is lost)."""
        # Every live worker, even one reporting 0 users: that count lags by a report interval and the
        # worker may still hold its last second of rows.
        clients = [c for c in self.runner.clients.all if c.state not in ("missing", "stopped")]
        if not clients:
            return []
        pending = {c.id for c in clients}
        self._acked.clear()
        for client in clients:
            self.runner.send_message(FLUSH_MSG, None, client_id=client.id)
        # a worker's stop waits up to --stop-timeout for its users before it ships the last rows
        deadline = time.monotonic() + FLUSH_WAIT_S + float(self.runner.environment.stop_timeout or 0)
        while self._waiting_for(pending) and time.monotonic() < deadline:
            gevent.sleep(0.05)
        lost = sorted(self._waiting_for(pending))
        if lost:
            log.warning("loadline: %d worker(s) did not flush their records within %.0f s", len(lost), FLUSH_WAIT_S)
        return lost
