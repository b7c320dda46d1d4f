"""Worker clock offsets, NTP style: records are placed in phases by the master's clock.

A worker stamps `start_wall` (open loop: `due_wall` too; and its generator-metric `ts`) with its own
`time.time()`; phases are
timed by the master's. Hosts whose clocks disagree by a second or two put records in the wrong
phase. So the master probes every worker every few seconds: it sends t1 (its clock), the worker
answers with t2 (arrival, its clock) and t3 (departure, its clock), the master stamps t4 on
arrival. As in NTP (RFC 5905, section 8):

    offset = ((t2 - t1) + (t3 - t4)) / 2        (worker clock - master clock)
    delay  = (t4 - t1) - (t3 - t2)              (round trip spent on the wire and in queues)

The offset's error is at most delay / 2, so of the recent samples the one with the smallest round
trip is kept (a busy worker or master answers late and its sample says less). The master then
subtracts the offset from each worker timestamp as the rows arrive, before anything joins them to
phases; durations (lateness_ms too) are differences of one clock and stay as measured. The
requests.csv values are therefore on the master's clock; the worker's raw value is
`start_wall + offset_s` with the offset
the manifest lists for that worker (`clock_offsets`, with the range of offsets applied).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gevent

log = logging.getLogger("loadline")

PROBE_MSG = "loadline_clock_probe"
REPLY_MSG = "loadline_clock_reply"
# A worker says it can answer probes once its handler is registered (Locust's init event, after it has
# connected): a probe sent on connect could arrive first, and Locust logs it as an unknown message.
READY_MSG = "loadline_clock_ready"
PROBE_INTERVAL_S = 2.0  # "repeat during the run": a drifting or stepped clock is followed within a window
# A burst when a worker is ready and when a test starts: rows are corrected with the estimate known when
# they arrive, and on a loaded machine a single early probe can take hundreds of ms (its error: half that).
BURST = 5
BURST_SPACING_S = 0.05
WINDOW = 15  # samples (~30 s at 2 s): the min-delay sample of the recent ones, not of the whole run
MAX_RUNTIME_S = 7 * 24 * 3600.0
# A clock off by d moves about d / T of a T-second phase's records into its neighbour (arrivals spread
# evenly). P99, the strictest percentile the SLO gate reads, is decided by the top 1 % of a phase's
# records: beyond 1 % of the shortest phase the offset alone could decide it, so it is said out loud.
DEFAULT_WARN_FRACTION = 0.01


@dataclass(frozen=True)
class ClockSample:
    t1: float  # master sends (master clock)
    t2: float  # worker receives (worker clock)
    t3: float  # worker answers (worker clock)
    t4: float  # master receives (master clock)

    @property
    def offset_s(self) -> float:
        return ((self.t2 - self.t1) + (self.t3 - self.t4)) / 2.0

    @property
    def delay_s(self) -> float:
        return max(0.0, (self.t4 - self.t1) - (self.t3 - self.t2))


class OffsetEstimate:
    """One worker's offset: the smallest-delay sample among the last `window` ones."""

    def __init__(self, window: int = WINDOW) -> None:
        self._recent: deque[ClockSample] = deque(maxlen=window)
        self.samples = 0
        self.applied: tuple[float, float] | None = None  # (min, max) offsets subtracted from rows this run

    def add(self, sample: ClockSample) -> None:
        self._recent.append(sample)
        self.samples += 1

    def best(self) -> ClockSample | None:
        return min(self._recent, key=lambda s: s.delay_s) if self._recent else None

    @property
    def offset_s(self) -> float | None:
        best = self.best()
        return best.offset_s if best is not None else None

    def note_applied(self, offset: float) -> None:
        low, high = self.applied or (offset, offset)
        self.applied = (min(low, offset), max(high, offset))

    def summary(self) -> dict[str, Any]:
        best = self.best()
        return {
            "offset_s": round(best.offset_s, 4) if best else None,
            "uncertainty_ms": round(best.delay_s * 500.0, 2) if best else None,  # delay / 2
            "delay_ms": round(best.delay_s * 1000.0, 2) if best else None,
            "samples": self.samples,
            "applied_s": [round(v, 4) for v in self.applied] if self.applied else None,
        }


class ClockSync:
    """Master side: probe every connected worker, keep an estimate per Loadline worker id."""

    def __init__(
        self,
        runner: Any,
        wall: Callable[[], float] = time.time,
        on_reply: Callable[[str, str, dict], None] | None = None,
    ) -> None:
        self.runner = runner
        self.wall = wall
        self.on_reply_data = on_reply  # (locust node id, worker id, reply data): liveness and in-flight counts
        self.estimates: dict[str, OffsetEstimate] = {}
        self.uncorrected: dict[str, int] = {}  # rows that arrived before the worker's first sample
        self.ready: set[str] = set()  # Locust node ids of the workers that answer probes (READY_MSG)
        self.workers: dict[str, str] = {}  # Locust node id -> worker id (its replies say it)
        self._greenlet: gevent.Greenlet | None = None

    def install(self) -> ClockSync:
        self.runner.register_message(REPLY_MSG, self.on_reply)
        self.runner.register_message(READY_MSG, self.on_ready)
        self._greenlet = gevent.spawn(self._loop)
        return self

    def burst(self, client_id: str | None = None) -> None:
        """BURST probes BURST_SPACING_S apart (to one worker, or all), in the background."""

        def probes() -> None:
            for _ in range(BURST):
                if client_id is None:
                    self.probe_all()
                else:
                    self._probe(client_id)
                gevent.sleep(BURST_SPACING_S)

        gevent.spawn(probes)

    def _loop(self) -> None:
        deadline = time.monotonic() + MAX_RUNTIME_S
        while time.monotonic() < deadline:
            self.probe_all()
            gevent.sleep(PROBE_INTERVAL_S)

    def on_ready(self, environment: Any, msg: Any, **_: Any) -> None:
        self.ready.add(msg.node_id)
        self.burst(msg.node_id)

    def probe_all(self) -> None:
        for client in list(self.runner.clients.all):
            if client.state != "missing" and client.id in self.ready:
                self._probe(client.id)

    def _probe(self, client_id: str) -> None:
        try:
            self.runner.send_message(PROBE_MSG, {"t1": self.wall()}, client_id=client_id)
        except Exception as exc:  # noqa: BLE001 - a socket hiccup must not stop the probing
            log.debug("loadline: clock probe to %s failed: %s", client_id, exc)

    def on_reply(self, environment: Any, msg: Any, **_: Any) -> None:
        t4 = self.wall()  # first thing: every later instruction would count as network delay
        data = msg.data or {}
        try:
            sample = ClockSample(float(data["t1"]), float(data["t2"]), float(data["t3"]), t4)
        except (KeyError, TypeError, ValueError):
            return
        worker = str(data.get("worker") or msg.node_id)
        self.estimates.setdefault(worker, OffsetEstimate()).add(sample)
        self.workers[msg.node_id] = worker
        if self.on_reply_data is not None:
            self.on_reply_data(msg.node_id, worker, data)

    def offset(self, worker: str) -> float | None:
        estimate = self.estimates.get(worker)
        return estimate.offset_s if estimate is not None else None

    def node_offset(self, node_id: str) -> float | None:
        """The offset of the worker behind a Locust node id (None: not heard yet)."""
        worker = self.workers.get(node_id)
        return self.offset(worker) if worker is not None else None

    def correct(self, worker: str, rows: list, columns: tuple[int, ...]) -> None:
        """Rewrite rows[i][c] for c in `columns` (worker wall times; None stays None) onto the master's clock."""
        offset = self.offset(worker)
        if offset is None:
            self.uncorrected[worker] = self.uncorrected.get(worker, 0) + len(rows)
            return
        self.estimates[worker].note_applied(offset)
        for row in rows:
            for column in columns:
                value = row[column]
                if isinstance(value, (int, float)):
                    row[column] = value - offset

    def correct_each(self, rows: list, worker_column: int, column: int) -> list[list]:
        """Rows of several workers (generator metrics: the worker id is in the row): each onto the master's clock."""
        out = []
        for row in rows:
            row = list(row)
            offset = self.offset(str(row[worker_column]))
            if offset is not None and isinstance(row[column], (int, float)):
                row[column] = row[column] - offset
            out.append(row)
        return out

    def start_run(self) -> None:
        self.uncorrected = {}
        for estimate in self.estimates.values():
            estimate.applied = None
        self.burst()

    def manifest(self, workers: set[str]) -> dict[str, dict[str, Any]]:
        """Per worker (those given, i.e. this run's): offset, its uncertainty, samples, offsets applied."""
        out = {}
        for worker in sorted(workers | set(self.uncorrected)):
            estimate = self.estimates.get(worker)
            entry = estimate.summary() if estimate else {"offset_s": None, "samples": 0}
            entry["rows_uncorrected"] = self.uncorrected.get(worker, 0)
            out[worker] = entry
        return out


def offset_warnings(offsets: dict[str, dict[str, Any]], shortest_phase_s: float | None, fraction: float) -> list[str]:
    """One sentence per worker whose clock offset exceeds `fraction` of the shortest phase."""
    if not shortest_phase_s or shortest_phase_s <= 0 or fraction <= 0:
        return []
    limit = fraction * shortest_phase_s
    warnings = []
    for worker, entry in sorted(offsets.items()):
        offset = entry.get("offset_s")
        if offset is not None and abs(offset) > limit:
            warnings.append(
                f"worker {worker}'s clock is {offset:+.3f} s off the master's, more than "
                f"{fraction:.0%} of the shortest phase ({shortest_phase_s:.1f} s); its timestamps "
                f"were corrected (to within {entry.get('uncertainty_ms')} ms)"
            )
    return warnings


def install_worker(
    runner: Any, worker_id: str, status: Callable[[], dict[str, Any]], wall: Callable[[], float] = time.time
) -> None:
    """Worker side: answer each probe at once, with this worker's id and status (in flight, unshipped)."""

    def on_probe(environment: Any, msg: Any, **_: Any) -> None:
        t2 = wall()
        data = msg.data or {}
        reply = {"worker": worker_id, **status(), "t1": data.get("t1"), "t2": t2}
        reply["t3"] = wall()
        runner.send_message(REPLY_MSG, reply)

    runner.register_message(PROBE_MSG, on_probe)
    runner.send_message(READY_MSG, {"worker": worker_id})


def add_arguments(parser: Any) -> None:
    parser.add_argument(
        "--clock-offset-warn",
        type=float,
        default=DEFAULT_WARN_FRACTION,
        help="warn (log and manifest) when a worker's clock is off the master's by more than this "
        "fraction of the shortest phase (timestamps are corrected either way); 0 = never",
    )
