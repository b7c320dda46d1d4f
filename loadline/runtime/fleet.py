"""The master's view of its workers: which were lost mid-run, which could not run at all.

Lost: Locust marks a worker `missing` when its heartbeats stop (~3-5 s; a SIGKILL, a node gone). The
master polls for that state and records, for each lost worker, when it was last heard from, when it
was declared lost, and what it probably took with it: the requests it had in flight at its last
message and the records it had finished but not shipped (about one shipping interval's worth: its
last batch). Workers report both with every record batch and clock reply (transport.py,
clocksync.py). The phases whose time span meets [last heard, declared lost] are the affected ones.

Cannot run: a worker whose options fail (a dataset file missing on its host, a bad value) or whose
test start raises sends its one-line reason; the master logs it, stops the test and, headless,
exits 2 (the Loadline convention for unusable input), so a Kubernetes Job or
`docker compose --exit-code-from master` fails instead of reporting an empty success.
A worker whose locustfile does not even import never connects: the master gives up after
--expect-workers-max-wait (Locust exits 1 then).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import gevent

from loadline.runtime import refusal

log = logging.getLogger("loadline")

ERROR_MSG = "loadline_worker_error"
POLL_S = 1.0
MAX_RUNTIME_S = 7 * 24 * 3600.0
EXIT_UNUSABLE = 2


@dataclass
class WorkerSeen:
    """What the master last heard from one worker (master clock)."""

    node: str  # Locust's client id
    worker: str  # Loadline's worker id (the records' worker_id)
    last_seen: float
    in_flight: int | None = None
    last_batch_rows: int = 0  # rows of its last batch: about what it finishes per shipping interval
    unshipped: int = 0  # its buffer at its last clock reply


@dataclass
class LostWorker:
    worker: str
    node: str
    last_seen: float | None  # master clock: the last message from it
    lost_at: float  # master clock: when the master declared it lost
    in_flight: int | None  # requests in flight at its last message (never recorded)
    unshipped_estimate: int  # finished records it had not shipped: about its last batch
    how: str = "missing"  # "missing" (heartbeats stopped) or "no flush at stop"
    phases: list[str] = field(default_factory=list)
    rejoined_at: float | None = None

    @property
    def requests_lost_estimate(self) -> int:
        return int(self.in_flight or 0) + int(self.unshipped_estimate or 0)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "requests_lost_estimate": self.requests_lost_estimate}


def affected_phases(phases: list[Any], start: float | None, end: float) -> list[str]:
    """Labels of the phase rows (start_wall, end_wall, label) whose span meets [start, end]."""
    start = end if start is None else start
    out = []
    for row in phases:
        row_end = row.end_wall if row.end_wall is not None else float("inf")
        if row.start_wall <= end and row_end >= start:
            out.append(f"{row.index}:{row.label}")
    return out


class Fleet:
    """Master side. `active()` says whether a test run is collecting (losses between runs are ignored)."""

    def __init__(
        self,
        environment: Any,
        active: Callable[[], bool],
        wall: Callable[[], float] = time.time,
        annotate: Callable[[str], None] | None = None,
    ) -> None:
        self.environment = environment
        self.runner = environment.runner
        self.active = active
        self.wall = wall
        self.annotate = annotate  # adds a note to the open phase (timeline), if any
        self.seen: dict[str, WorkerSeen] = {}  # by Locust node id
        self.lost: dict[str, LostWorker] = {}  # by Locust node id, this run
        self.errors: list[dict[str, Any]] = []  # this run
        self._greenlet: gevent.Greenlet | None = None

    def install(self) -> Fleet:
        self.runner.register_message(ERROR_MSG, self.on_error)
        self._greenlet = gevent.spawn(self._loop)
        return self

    def start_run(self) -> None:
        self.lost = {}
        self.errors = []

    # -- what workers tell us --------------------------------------------------------------------
    def heard(
        self, node: str, worker: str, in_flight: Any = None, batch_rows: int | None = None, unshipped: Any = None
    ) -> None:
        """A batch (batch_rows) or a clock reply (unshipped: the worker's buffer then) from a worker."""
        entry = self.seen.get(node)
        if entry is None:
            entry = self.seen[node] = WorkerSeen(node, worker, self.wall())
        entry.worker, entry.last_seen = worker, self.wall()
        if isinstance(in_flight, int):
            entry.in_flight = in_flight
        if batch_rows:
            entry.last_batch_rows = batch_rows
        if isinstance(unshipped, int):
            entry.unshipped = unshipped

    def on_error(self, environment: Any, msg: Any, **_: Any) -> None:
        data = msg.data or {}
        worker, reason = str(data.get("worker") or msg.node_id), str(data.get("reason") or "unknown error")
        first = not self.errors
        self.errors.append({"worker": worker, "reason": reason, "at": self.wall()})
        log.error("loadline: worker %s cannot run: %s", worker, reason)
        if not first:
            return
        if environment.web_ui is None:  # headless: stop with the unusable-input exit code
            environment.process_exit_code = EXIT_UNUSABLE
            gevent.spawn(environment.runner.quit)
        else:  # web UI: stop this test; the LLM tab shows why
            refusal.refuse(environment, f"worker {worker} cannot run: {reason}")
            gevent.spawn(environment.runner.stop)

    # -- losses ------------------------------------------------------------------------------------
    def _loop(self) -> None:
        deadline = time.monotonic() + MAX_RUNTIME_S
        while time.monotonic() < deadline:
            gevent.sleep(POLL_S)
            try:
                self.check()
            except Exception as exc:  # noqa: BLE001 - the watch must never break the master
                log.warning("loadline: worker watch failed: %s", exc)

    def check(self) -> list[LostWorker]:
        """Record workers newly marked missing (and note ones that came back); returns the new losses."""
        new = []
        states = {c.id: c.state for c in list(self.runner.clients.all)}
        for node, state in states.items():
            known = self.lost.get(node)
            if state == "missing" and known is None and self.active():
                new.append(self._declare(node, "missing"))
            elif state != "missing" and known is not None and known.how == "missing" and known.rejoined_at is None:
                known.rejoined_at = self.wall()
                log.warning("loadline: worker %s is back (heartbeats resumed)", known.worker)
        return new

    def _declare(self, node: str, how: str) -> LostWorker:
        seen = self.seen.get(node)
        lost = LostWorker(
            worker=seen.worker if seen else node,
            node=node,
            last_seen=seen.last_seen if seen else None,
            lost_at=self.wall(),
            in_flight=seen.in_flight if seen else None,
            unshipped_estimate=max(seen.last_batch_rows, seen.unshipped) if seen else 0,
            how=how,
        )
        self.lost[node] = lost
        log.warning(
            "loadline: worker %s lost (%s); about %d request(s) in flight or unshipped will not be recorded "
            "unless it comes back",
            lost.worker,
            how,
            lost.requests_lost_estimate,
        )
        if self.annotate is not None:
            self.annotate(f"worker {lost.worker} lost")
        return lost

    def no_flush(self, nodes: list[str]) -> None:
        """Workers that did not acknowledge the stop's flush: their last records never arrived."""
        for node in nodes:
            if node not in self.lost:
                self._declare(node, "no flush at stop")

    def manifest_fields(self, phases: list[Any]) -> dict[str, Any]:
        """workers_lost: gone for good; workers_back: missed heartbeats, then came back (no records lost,
        but Locust took its users away meanwhile); worker_errors: could not run."""
        lost: list[dict[str, Any]] = []
        back: list[dict[str, Any]] = []
        for entry in self.lost.values():
            entry.phases = affected_phases(phases, entry.last_seen, entry.rejoined_at or entry.lost_at)
            (back if entry.rejoined_at else lost).append(entry.as_dict())
        return {
            "workers_lost": sorted(lost, key=lambda e: e["lost_at"]),
            "workers_back": sorted(back, key=lambda e: e["lost_at"]),
            "worker_errors": list(self.errors),
        }


def report_error(runner: Any, worker_id: str, reason: str) -> None:
    """Worker side: tell the master why this worker cannot run (one line)."""
    line = " ".join(str(reason).split())[:500]
    try:
        runner.send_message(ERROR_MSG, {"worker": worker_id, "reason": line})
    except Exception as exc:  # noqa: BLE001 - the log line below still says it
        log.error("loadline: could not tell the master: %s", exc)
