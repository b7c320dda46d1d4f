"""Load-generator self-check: is this worker fast enough to measure the server honestly?

A gevent worker that is out of CPU, or whose event loop is blocked, stamps token arrivals late:
its TTFT and ITL grow although the server did nothing different. Each worker samples, once a
second, its own process CPU % (psutil), the share of the second it was ready to run but waited for
a core (Linux schedstat: a neighbour held it) and the event-loop lag (how much later than asked a
`gevent.sleep` returns); the master writes the rows to generator_metrics.csv and the verdict
flags the run (analysis/verdict/generator.py; the thresholds are in loadline/core/saturation.py).
No pandas here: this runs in every worker.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gevent
import psutil
from gevent.event import Event

from loadline.client import body_reader
from loadline.core import runfolder
from loadline.core.saturation import CPU_SATURATED_PCT, LOOP_LAG_SATURATED_MS, SUSTAIN_SAMPLES, demand_percent

log = logging.getLogger("loadline.runtime.selfcheck")

SAMPLE_INTERVAL_S = runfolder.GENERATOR_SAMPLE_INTERVAL_S
MAX_BUFFERED_ROWS = 100_000  # if the master stops collecting, keep the newest rows only
MAX_RUNTIME_S = 7 * 24 * 3600.0
REPORT_KEY = "loadline_generator"  # rows ride on Locust's periodic worker report (every ~3 s)
LOCAL_DRAIN_S = 2.0
# The main thread's (the gevent hub's) scheduler statistics: nanoseconds on a core, nanoseconds ready
# to run but waiting for one, time slices (Documentation/scheduler/sched-stats.rst). Linux only.
SCHEDSTAT = "/proc/self/schedstat"


def core_wait_ns(path: str = SCHEDSTAT) -> int | None:
    """How long this process's main thread has waited for a core since it started (ns); None off Linux."""
    try:
        with open(path, "rb") as handle:
            return int(handle.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class SelfCheck:
    """Sample this process every `interval_s` in a greenlet; `sample_rows()` drains the rows."""

    worker_id: str
    interval_s: float = SAMPLE_INTERVAL_S
    users_fn: Callable[[], int] | None = None
    inflight_fn: Callable[[], int] | None = None
    watch_fn: Callable[[], bool | None] | None = None  # is the first-bytes watch resting (body_reader)

    def __post_init__(self) -> None:
        self._rows: list[tuple] = []
        self._greenlet: gevent.Greenlet | None = None
        self._stopping: Event | None = None
        self.last_cpu_percent: float | None = None

    def start(self) -> SelfCheck:
        self._process = psutil.Process()
        self._process.cpu_percent(None)  # the first call only sets the reference point
        self._stopping = Event()
        self._greenlet = gevent.spawn(self._loop)
        return self

    def _call(self, fn: Callable[[], int | bool | None] | None) -> int | None:
        if fn is None:
            return None
        try:
            value = fn()
            return None if value is None else int(value)
        except Exception:  # noqa: BLE001 - a broken probe must not kill the self-check
            return None

    def _loop(self) -> None:
        deadline = time.monotonic() + MAX_RUNTIME_S
        assert self._stopping is not None  # start() made it before spawning this loop
        while time.monotonic() < deadline and not self._stopping.is_set():
            asked, waited = time.perf_counter(), core_wait_ns()
            gevent.sleep(self.interval_s)
            now, wait_ns = time.perf_counter(), core_wait_ns()
            lag_ms = max(0.0, (now - asked - self.interval_s) * 1000.0)
            cpu = float(self._process.cpu_percent(None))
            wait = None if wait_ns is None or waited is None else min(100.0, (wait_ns - waited) / 1e7 / (now - asked))
            self.last_cpu_percent = cpu
            row = (
                round(time.time(), 3),
                self.worker_id,
                round(cpu, 1),
                round(lag_ms, 2),
                self._call(self.users_fn),
                self._call(self.inflight_fn),
                None if wait is None else round(wait, 1),
                self._call(self.watch_fn),
            )
            self._rows.append(row)
            if len(self._rows) > MAX_BUFFERED_ROWS:
                del self._rows[: len(self._rows) - MAX_BUFFERED_ROWS]

    def sample_rows(self) -> list[tuple]:
        """Rows in GENERATOR_COLUMNS order collected since the last call."""
        rows, self._rows = self._rows, []
        return rows

    def stop(self) -> None:
        if self._greenlet is not None:
            assert self._stopping is not None  # start() made it with the greenlet
            self._stopping.set()
            self._greenlet.kill(block=True, timeout=self.interval_s + 1.0)
            self._greenlet = None


class GeneratorWriter:
    """Master/local side: rows from every worker into the active run folder's generator_metrics.csv."""

    def __init__(self, environment: Any = None):
        self.environment = environment
        self.latest_cpu: dict[str, float] = {}
        self._recent: dict[str, deque] = {}  # worker -> its last SUSTAIN_SAMPLES (cpu %, wait %, loop lag ms)
        self.saturated_once: set[str] = set()  # workers saturated at some point since start
        self.watch_resting: dict[str, bool] = {}  # worker -> its first-bytes watch rested at its last sample
        self._appender: runfolder.CsvAppender | None = None
        self._path: Path | None = None

    def write(self, rows: list) -> int:
        if not rows:
            return 0
        for row in rows:
            self.latest_cpu[str(row[1])] = float(row[2])
            recent = self._recent.setdefault(str(row[1]), deque(maxlen=SUSTAIN_SAMPLES))
            wait = row[6] if len(row) > 6 else None
            recent.append((float(row[2]), float(wait) if wait is not None else 0.0, float(row[3])))
            self.watch_resting[str(row[1])] = len(row) > 7 and row[7] == 1
            if len(recent) == SUSTAIN_SAMPLES and _saturated(recent):
                self.saturated_once.add(str(row[1]))
        exporter = getattr(self.environment, "loadline_exporter", None)
        if exporter is not None:
            for worker, cpu in self.latest_cpu.items():
                exporter.set_worker_cpu(worker, cpu)
        active = runfolder.active()
        if active is None:
            return 0  # between runs: nothing to attach the samples to
        path = Path(active.path) / runfolder.GENERATOR_METRICS
        if path != self._path:
            if self._appender is not None:
                self._appender.close()
            self._appender, self._path = runfolder.CsvAppender(path, runfolder.GENERATOR_COLUMNS), path
        rows = [r for r in rows if r[0] >= active.started_wall - LOCAL_DRAIN_S]
        assert self._appender is not None  # made above with _path, which is this path
        return self._appender.write_rows(rows)

    def status(self) -> str:
        """The web UI's line: each worker's CPU, wait for a core and loop lag (medians of its last
        samples), and whether that is saturated by the report's own thresholds (loadline/core/saturation.py)."""
        if not self._recent:
            return "-"
        parts = []
        for worker, recent in sorted(self._recent.items()):
            cpu, wait, lag = (statistics.median(v) for v in zip(*recent))
            hot = " SATURATED: numbers not trustworthy" if len(recent) == SUSTAIN_SAMPLES and _saturated(recent) else ""
            waiting = f" (+{wait:.0f} % waiting for a core)" if wait >= 1 else ""
            rests = (
                ", first-bytes watch resting (its thread waits for a core)" if self.watch_resting.get(worker) else ""
            )
            parts.append(f"{worker}: CPU {cpu:.0f} %{waiting}, loop lag {lag:.0f} ms{rests}{hot}")
        return "; ".join(parts)


def _saturated(recent: deque) -> bool:
    """The rolling medians of the worker's demand for its core (CPU + wait) and of its loop lag."""
    demand = statistics.median(demand_percent(cpu, wait) for cpu, wait, _ in recent)
    lag = statistics.median(lag for _, _, lag in recent)
    return demand >= CPU_SATURATED_PCT or lag >= LOOP_LAG_SATURATED_MS


def install(environment: Any, worker_id: str, on_worker: bool) -> SelfCheck:
    """Start the self-check in a worker (`on_worker`: rows go to the master) or a local runner (rows go to disk)."""
    runner = environment.runner
    check = SelfCheck(worker_id, users_fn=lambda: runner.user_count, watch_fn=body_reader.watch_resting).start()
    environment.loadline_selfcheck = check
    if on_worker:

        def _report(client_id: str, data: dict) -> None:
            data[REPORT_KEY] = check.sample_rows()

        environment.events.report_to_master.add_listener(_report)
    else:
        writer = GeneratorWriter(environment)
        environment.loadline_generator_writer = writer

        def _drain() -> None:
            deadline = time.monotonic() + MAX_RUNTIME_S
            while time.monotonic() < deadline:
                gevent.sleep(LOCAL_DRAIN_S)
                writer.write(check.sample_rows())

        gevent.spawn(_drain)
    return check


def install_master(environment: Any, to_master_clock: Callable[[list], list] | None = None) -> GeneratorWriter:
    """On a distributed master: collect the workers' self-check rows from their periodic reports.

    `to_master_clock` puts each row's `ts` (the worker's clock) on the master's (runtime/clocksync.py).
    """
    writer = GeneratorWriter(environment)
    environment.loadline_generator_writer = writer

    def _on_report(client_id: str, data: dict) -> None:
        try:
            rows = data.get(REPORT_KEY) or []
            writer.write(to_master_clock(rows) if to_master_clock is not None and rows else rows)
        except Exception as exc:  # noqa: BLE001 - the self-check must never break the master
            log.warning("loadline: generator self-check rows dropped: %s", exc)

    environment.events.worker_report.add_listener(_on_report)
    return writer
