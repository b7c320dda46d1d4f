"""The master's (or local process's) side of a run: the run folder from test start to test stop.

One RunCollector per process; each test start opens a new run folder (the web UI can start and
stop many tests), each test stop closes it with counts in the manifest.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import gevent

from loadline.core import runfolder
from loadline.core.identity import worker_id
from loadline.core.manifest import start_manifest
from loadline.core.records import COLUMNS
from loadline.core.runfolder import ActiveRun, CsvAppender
from loadline.core.runsettings import time_scale_of_options
from loadline.runtime.clocksync import ClockSync, offset_warnings
from loadline.runtime.fleet import Fleet
from loadline.runtime.live import LiveStats
from loadline.runtime.timeline import active_timeline, close_timeline
from loadline.runtime.transport import FlushCoordinator

log = logging.getLogger("loadline")

# How a run ended (manifest `ended_by`; analysis/verdict/ending.py reads it): the test ended on its own
# (its shape, --run-time, the stop rule; status `finished`), or a person pressed STOP in the web UI
# (status `stopped`). `loadline run` writes `signal` with status `interrupted` (SIGINT/SIGTERM).
ENDED_BY_TEST = "test"
ENDED_BY_USER = "user"
STOPPED = "stopped"

START_WALL = COLUMNS.index("start_wall")
# worker wall-clock columns, put on the master's clock as rows arrive (runtime/clocksync.py)
WALL_COLUMNS = (START_WALL, COLUMNS.index("due_wall"))


class RunCollector:
    def __init__(self, environment, distributed: bool) -> None:
        self.environment = environment
        self.distributed = distributed
        self.run_dir: Path | None = None
        self.appender: CsvAppender | None = None
        self.rows_by_worker: dict[str, int] = {}
        self.sidecars: list = []  # things with .stop(), started per run (scraper, ...)
        self._local_loop: gevent.Greenlet | None = None
        self.flush: FlushCoordinator | None = None  # on a master
        self.clock: ClockSync | None = None  # on a master: worker clock offsets (clocksync.py)
        self.fleet: Fleet | None = None  # on a master: lost workers, workers that cannot run (fleet.py)
        self.local_errors: list[dict] = []  # a local run's users that failed at start (local_checks.py)
        # A batch of records that could not be written whole (disk full): the run is not finished, even
        # when the end can be recorded after all (a failed write gives up the columnar copy, freeing room)
        self.write_error = ""
        self.ended_by = ENDED_BY_TEST  # the web UI's STOP sets ENDED_BY_USER (webui.py)

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> Path:
        options = self.environment.parsed_options
        explicit = getattr(options, "run_dir", "") if options else ""
        if explicit:
            run_dir = Path(explicit)
            run_dir.mkdir(parents=True, exist_ok=True)
        else:
            users = sorted(self.environment.user_classes_by_name or ["run"])
            run_dir = runfolder.new_run_dir(getattr(options, "out", "runs") or "runs", "-".join(users)[:40])
        # Absolute: the web UI hands this path to Flask, which resolves a relative one inside the
        # locust package (the LLM tab's links answered 500 without --out).
        run_dir = run_dir.absolute()
        self.run_dir = run_dir
        self.rows_by_worker = {}
        self.local_errors = []
        self.write_error = ""
        self.ended_by = ENDED_BY_TEST
        for part in (self.clock, self.fleet):
            if part is not None:
                part.start_run()
        self.environment.loadline_live = LiveStats(time_scale_of_options(options))  # gap retention in model time
        self.appender = runfolder.requests_appender(run_dir)
        runfolder.write_json_atomic(run_dir / runfolder.MANIFEST, start_manifest(self.environment, run_dir))
        runfolder.set_active(ActiveRun(run_dir, time.time()))
        if not self.distributed:
            self._local_loop = gevent.spawn(self._drain_local_forever)
        log.info("loadline: run folder %s", run_dir)
        return run_dir

    def stop(self) -> None:
        if self.run_dir is None:
            return
        lost: list[str] = []
        if self.flush is not None:
            lost = self.flush.drain()
            if self.fleet is not None:
                self.fleet.no_flush(lost)
        if self._local_loop is not None:
            self._local_loop.kill(block=True)
            self._local_loop = None
        self._write_local()
        for sidecar in self.sidecars:
            try:
                sidecar.stop()
            except Exception as exc:  # a sidecar must never cost us the run folder
                log.warning("loadline: %s did not stop cleanly: %s", type(sidecar).__name__, exc)
        self.sidecars = []
        close_phase_timeline(self.environment)  # normally done at test_stopping already; idempotent
        assert self.appender is not None
        self.appender.close()
        stopped = self.ended_by == ENDED_BY_USER
        fields = {
            "ended_at": time.time(),
            "status": STOPPED if stopped else "finished",
            "ended_by": self.ended_by,
            "requests_written": self.appender.rows_written,
            "rows_by_worker": self.rows_by_worker,
            "workers_lost": lost,
        }
        fields.update(self._worker_facts())  # a master's lost workers replace the bare ids of `lost`
        if self.write_error:
            fields.update(status="failed", write_error=self.write_error)
        try:
            runfolder.update_manifest(self.run_dir, **fields)
        except OSError as exc:  # disk full: the manifest keeps status=running, the records stay readable
            log.error("loadline: cannot finish %s in %s: %s", runfolder.MANIFEST, self.run_dir, exc.strerror or exc)
        log.info("loadline: %d request records in %s", self.appender.rows_written, self.run_dir)
        runfolder.set_active(None)
        self.last_run_dir, self.run_dir = self.run_dir, None

    def _worker_facts(self) -> dict:
        """Manifest fields of a distributed run: lost workers, worker errors, clock offsets (+ warnings)."""
        if self.fleet is None or self.clock is None:  # a local run: only its users that failed at start
            return {"worker_errors": list(self.local_errors), "status": "failed"} if self.local_errors else {}
        timeline = active_timeline()
        active = runfolder.active()
        started = active.started_wall if active else 0.0
        phases = [row for row in (timeline.rows if timeline else []) if row.end_wall and row.end_wall >= started]
        facts = self.fleet.manifest_fields(phases)
        offsets = self.clock.manifest(set(self.rows_by_worker) | set(self.clock.estimates))
        # every phase has its end (kept above); the check says so to mypy
        shortest = min((row.end_wall - row.start_wall for row in phases if row.end_wall is not None), default=None)
        fraction = float(getattr(self.environment.parsed_options, "clock_offset_warn", 0) or 0)
        warnings = offset_warnings(offsets, shortest, fraction)
        for line in warnings:
            log.warning("loadline: %s", line)
        if facts["worker_errors"]:
            facts["status"] = "failed"
        return {**facts, "clock_offsets": offsets, "clock_warnings": warnings}

    # -- rows ----------------------------------------------------------------------------------------
    def on_records(self, environment, msg, **_) -> None:
        """Master: a batch from a worker (custom message handler; keep it quick)."""
        data = msg.data or {}
        rows, worker = data.get("rows") or [], str(data.get("worker", msg.node_id))
        if self.fleet is not None:
            self.fleet.heard(msg.node_id, worker, data.get("in_flight"), len(rows))
        if self.clock is not None:  # onto the master's clock before anything joins rows to phases
            self.clock.correct(worker, rows, WALL_COLUMNS)
        self.write(rows, worker)

    def write(self, rows: list[list], worker: str) -> None:
        if not rows:
            return
        if self.appender is None or self.appender.closed:
            log.warning("loadline: %d records arrived after the run folder closed; dropped", len(rows))
            return
        try:
            self.appender.write_rows(rows)
        except OSError as exc:  # still raised: the run cannot go on writing (run_outcome.py names the disk)
            self.write_error = self.write_error or (
                f"{exc.strerror or exc}: a batch of {len(rows)} records could not be written whole"
            )
            raise
        self.rows_by_worker[worker] = self.rows_by_worker.get(worker, 0) + len(rows)
        self.environment.loadline_live.ingest(rows)
        for observer in getattr(self.environment, "loadline_observers", ()):
            observer(rows)

    def _write_local(self) -> None:
        self.write(self.environment.loadline_records.drain(), worker_id())

    def _drain_local_forever(self) -> None:
        while True:
            gevent.sleep(1.0)
            self._write_local()


def close_phase_timeline(environment) -> None:
    try:
        close_timeline(environment)
    except Exception as exc:
        log.warning("loadline: could not close the phase timeline: %s", exc)
