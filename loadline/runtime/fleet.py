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

A worker whose users fail at start (worker_checks.py) reports it the same way; a worker that runs
users but sends no records while the others do is found by the master (silence.py). Both are worker
errors, unless the run was started with --allow-partial-workers: then the run goes on, the master
logs it and writes it in the manifest (`worker_shortfalls`: who, why, how many of the planned users
were missing from when, the phases from then on), and the report says which share of the planned
users ran; those phases are not used as knee, break point or max compliant load without saying so.
A worker started with its own Loadline option values, which the master's replace, is warned about
(`worker_option_mismatches`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import gevent

from loadline.runtime import refusal
from loadline.runtime.silence import Activity, SilenceRule
from loadline.runtime.transport import FLUSH_INTERVAL_S

log = logging.getLogger("loadline")

ERROR_MSG = "loadline_worker_error"
OPTIONS_MSG = "loadline_worker_options"  # worker_checks.py sends it
POLL_S = 1.0
MAX_RUNTIME_S = 7 * 24 * 3600.0
EXIT_UNUSABLE = 2
SHAPE_STOP_WAIT_S = 5.0


@dataclass
class WorkerSeen:
    """What the master last heard from one worker (master clock)."""

    node: str  # Locust's client id
    worker: str  # Loadline's worker id (the records' worker_id)
    last_seen: float
    in_flight: int | None = None
    last_batch_rows: int = 0  # rows of its last batch: about what it finishes per shipping interval
    unshipped: int = 0  # its buffer at its last clock reply
    rows: int = 0  # records it sent this run


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


def add_arguments(parser: Any) -> None:
    parser.add_argument(
        "--allow-partial-workers",
        action="store_true",
        default=False,
        help="go on when a worker cannot run all its users (its users fail at start, or it runs users but "
        "sends no records while the others do): the report then says which share of the planned users ran "
        "and sets the phases from then on aside. Default: such a worker stops the run (exit 2 headless)",
    )


def record_error(environment: Any, errors: list[dict], worker: str, reason: str, kind: str, at: float) -> None:
    """A worker (or a local run's users) cannot run: the manifest's `worker_errors` entry, the log line,
    and, for the run's first such error, the stop."""
    first = not errors
    errors.append({"worker": worker, "reason": reason, "kind": kind, "at": at})
    log.error("loadline: worker %s cannot run: %s", worker, reason)
    if first:
        stop_unusable(environment, f"worker {worker} cannot run: {reason}")


def stop_unusable(environment: Any, line: str) -> None:
    """Stop a run that cannot measure what was asked: exit 2 when headless; in the web UI this test
    stops and the LLM tab shows `line`."""
    if environment.web_ui is None:
        environment.process_exit_code = EXIT_UNUSABLE
        quit_headless(environment)
    else:
        refusal.refuse(environment, line)
        gevent.spawn(environment.runner.stop)


def quit_headless(environment: Any) -> None:
    """End a headless run the way its own end does. A shape run ends from its shape greenlet (its next
    tick says None, and Locust's shape worker quits): Locust's main waits on that greenlet and exits
    when it ends, so a quit from any other greenlet kills it, and main exits while the run folder's
    last flush still waits on a worker (one that died a moment before holds it for seconds): the
    manifest then stays `running`. A shape greenlet busy ramping users ticks late: after
    SHAPE_STOP_WAIT_S the run is quit from here anyway."""
    runner = environment.runner
    shape = getattr(environment, "shape_class", None)
    greenlet = getattr(runner, "shape_greenlet", None)
    if shape is None or greenlet is None or greenlet.dead:
        gevent.spawn(runner.quit)
        return
    shape.tick = lambda: None
    gevent.spawn_later(SHAPE_STOP_WAIT_S, _quit_unless_stopping, runner)


def _quit_unless_stopping(runner: Any) -> None:
    if getattr(runner, "state", None) not in ("stopping", "stopped", "cleanup"):
        runner.quit()


def planned_users(runner: Any) -> int:
    return int(getattr(runner, "target_user_count", 0) or 0)


def activity(runner: Any, seen: dict[str, WorkerSeen], now: float) -> list[Activity]:
    """Connected workers' users now (Locust's per-worker counts), records this run, when last heard."""
    out = []
    for client in list(runner.clients.all):
        if client.state == "missing":
            continue
        users = sum((getattr(client, "user_classes_count", None) or {}).values())
        entry = seen.get(client.id)
        if entry is None:  # not heard from yet: its users cannot have finished anything
            out.append(Activity(client.id, client.id, users, 0, float("inf")))
            continue
        out.append(Activity(client.id, entry.worker, users, entry.rows, now - entry.last_seen))
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
        self.shortfalls: list[dict[str, Any]] = []  # this run, with --allow-partial-workers
        self.option_mismatches: dict[str, dict[str, list[Any]]] = {}  # by worker, this run
        self.silence = SilenceRule(FLUSH_INTERVAL_S)
        self._greenlet: gevent.Greenlet | None = None

    def install(self) -> Fleet:
        self.runner.register_message(ERROR_MSG, self.on_error)
        self.runner.register_message(OPTIONS_MSG, self.on_options)
        self._greenlet = gevent.spawn(self._loop)
        return self

    def start_run(self) -> None:
        self.lost = {}
        self.errors = []
        self.shortfalls = []
        self.option_mismatches = {}
        self.silence.reset()
        for entry in self.seen.values():
            entry.rows = 0

    @property
    def allow_partial(self) -> bool:
        return bool(getattr(getattr(self.environment, "parsed_options", None), "allow_partial_workers", False))

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
            entry.rows += batch_rows
        if isinstance(unshipped, int):
            entry.unshipped = unshipped

    def on_error(self, environment: Any, msg: Any, **_: Any) -> None:
        data = msg.data or {}
        worker, reason = str(data.get("worker") or msg.node_id), str(data.get("reason") or "unknown error")
        kind, short = data.get("kind"), data.get("users_short")
        if kind and isinstance(short, int) and self.allow_partial and self.active():
            self._short(worker, reason, str(kind), short)
            return
        self._fail(environment, worker, reason, str(kind or "cannot run"))

    def _fail(self, environment: Any, worker: str, reason: str, kind: str) -> None:
        record_error(environment, self.errors, worker, reason, kind, self.wall())

    def _short(self, worker: str, reason: str, kind: str, users_short: int) -> None:
        """--allow-partial-workers: the run goes on without these users; said in the log and manifest."""
        planned = planned_users(self.runner)
        share = max(0.0, 1.0 - users_short / planned) if planned else None
        self.shortfalls.append(
            {
                "worker": worker,
                "reason": reason,
                "kind": kind,
                "at": self.wall(),
                "users_short": users_short,
                "users_planned": planned,
                "share_ran": None if share is None else round(share, 4),
            }
        )
        ran = f"; {share:.0%} of the {planned} planned users ran from now on" if share is not None else ""
        log.warning("loadline: worker %s %s; going on (--allow-partial-workers)%s: %s", worker, kind, ran, reason)
        if self.annotate is not None:
            self.annotate(f"worker {worker}: {kind}")

    def on_options(self, environment: Any, msg: Any, **_: Any) -> None:
        """A worker's own option values that the master's replaced (worker_checks.py): warned, not fatal."""
        data = msg.data or {}
        worker, differ = str(data.get("worker") or msg.node_id), data.get("differ") or {}
        if not isinstance(differ, dict) or not differ:
            return
        self.option_mismatches[worker] = differ
        shown = ", ".join(f"--{k.replace('_', '-')} {v[0]!r} (ran with {v[1]!r})" for k, v in differ.items())
        log.warning(
            "loadline: WARNING worker %s was started with its own option values, which Locust replaced with the "
            "master's: %s; give options to the master (see deploy/README.md)",
            worker,
            shown,
        )

    # -- losses ------------------------------------------------------------------------------------
    def _loop(self) -> None:
        deadline = time.monotonic() + MAX_RUNTIME_S
        while time.monotonic() < deadline:
            gevent.sleep(POLL_S)
            try:
                self.check()
                self.check_silence()
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

    def check_silence(self) -> None:
        """Workers that run users but send no records while the others do (silence.py)."""
        if not self.active():
            return
        now = self.wall()
        for silent in self.silence.update(now, activity(self.runner, self.seen, now)):
            kind = "sends no records"
            if self.allow_partial:
                self._short(silent.worker, silent.reason, kind, silent.users)
            else:
                self._fail(self.environment, silent.worker, silent.reason, kind)

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
        but Locust took its users away meanwhile); worker_errors: could not run; worker_shortfalls: ran
        below its users, allowed (--allow-partial-workers), with the phases from then on;
        worker_option_mismatches: own option values the master's replaced."""
        lost: list[dict[str, Any]] = []
        back: list[dict[str, Any]] = []
        for entry in self.lost.values():
            entry.phases = affected_phases(phases, entry.last_seen, entry.rejoined_at or entry.lost_at)
            (back if entry.rejoined_at else lost).append(entry.as_dict())
        return {
            "workers_lost": sorted(lost, key=lambda e: e["lost_at"]),
            "workers_back": sorted(back, key=lambda e: e["lost_at"]),
            "worker_errors": list(self.errors),
            "worker_shortfalls": [
                {**entry, "phases": affected_phases(phases, entry["at"], float("inf"))} for entry in self.shortfalls
            ],
            "worker_option_mismatches": dict(self.option_mismatches),
        }


def report_error(runner: Any, worker_id: str, reason: str, kind: str = "", users_short: int | None = None) -> None:
    """Worker side: tell the master why this worker cannot run (one line); `kind` and `users_short`
    for users that could not run (the master may go on without them: --allow-partial-workers)."""
    line = " ".join(str(reason).split())[:500]
    data: dict[str, Any] = {"worker": worker_id, "reason": line}
    if kind:
        data.update(kind=kind, users_short=users_short)
    try:
        runner.send_message(ERROR_MSG, data)
    except Exception as exc:  # noqa: BLE001 - the log line below still says it
        log.error("loadline: could not tell the master: %s", exc)
