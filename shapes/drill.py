"""Fault actions for drills: a stage may kill a replica or switch a fault on when it begins.

The actions go to the embedded simulator's admin API (`loadline sim --admin`, docs/simulator.md),
whose base URL is `--sim-admin-url` (`loadline run` fills it in). Against a real service there is
no admin API: inject the fault yourself (kill a pod, drain a node) at the stage's start time.

Stage keys (configs/stages/drill-kill-replica.toml):

    kill_replica = 0           # POST /admin/replicas/0/kill
    restart_after_s = 30       # ...with {"restart_after_s": 30} (model seconds); default: the sim's delay
    faults = {error_rate = 0.2}  # POST /admin/faults (any subset); faults = "clear" switches all off
    actions = [{post = "/admin/replicas/1/restart", body = {restart_after_s = 5}}]   # anything else
    fault_after_s = 10         # optional: act this many seconds into the stage (time-scaled), not at once

Actions run once, in order, when the stage begins (or `fault_after_s` later), on the master in
their own greenlet (tick() never waits on the network), each with a short timeout. Each outcome is
one typed row of the run folder's faults.csv (loadline.core.schema.FaultRow: when it was sent, the
phase, method, path, body, ok / failed / skipped and why), which analysis/stats/recovery.py reads.
It is also logged in one line and added to the phase's `note` for people
(`fault: POST /admin/replicas/0/kill ok`); nothing parses the note. A failing action never stops the run.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gevent

from loadline.core import runfolder
from loadline.core.errors import UsageError
from loadline.core.schema import FAULT_FAILED, FAULT_OK, FAULT_SKIPPED, FaultRow

logger = logging.getLogger(__name__)

DRILL_KEYS = {"kill_replica", "restart_after_s", "faults", "actions", "fault_after_s"}
NOTE_PREFIX = "fault: "  # the human-readable phase note of every action outcome
ACTION_TIMEOUT_S = 3.0
ADMIN_TOKEN_ENV = "LOADLINE_SIM_ADMIN_TOKEN"  # sent as a bearer token when set (simulator/admin.py)
MAX_ACTIONS = 20


@dataclass(frozen=True)
class FaultAction:
    path: str  # under the admin base URL, e.g. "/admin/replicas/0/kill"
    body: str = "{}"  # JSON text (a string keeps the frozen Phase hashable)
    after_s: float = 0.0  # seconds after the phase began (already time-scaled once the phase is)

    def describe(self) -> str:
        return f"POST {self.path}" + ("" if self.body == "{}" else f" {self.body}")


def _require(condition: object, message: str) -> None:
    if not condition:
        raise UsageError(message)


def _action(path: Any, body: Any, where: str) -> FaultAction:
    _require(
        isinstance(path, str) and path.startswith("/admin/") and " " not in path,
        f'{where}: an action\'s post must be an admin path like "/admin/replicas/0/kill"',
    )
    _require(isinstance(body, dict), f"{where}: an action's body must be a table, e.g. {{restart_after_s = 30}}")
    return FaultAction(path, json.dumps(body, sort_keys=True))


def parse_actions(entry: dict, where: str, duration_s: float) -> tuple[FaultAction, ...]:
    """The fault actions of one [[stage]] table (empty when it has none); UsageError when malformed."""
    actions = _parse(entry, where)
    after = entry.get("fault_after_s", 0.0)
    _require(
        isinstance(after, (int, float)) and not isinstance(after, bool) and 0 <= after < duration_s,
        f"{where}: fault_after_s must be >= 0 and shorter than the stage",
    )
    _require(bool(actions) or "fault_after_s" not in entry, f"{where}: fault_after_s without an action")
    return tuple(dataclasses.replace(action, after_s=float(after)) for action in actions)


def _parse(entry: dict, where: str) -> list[FaultAction]:
    actions: list[FaultAction] = []
    if "kill_replica" in entry:
        replica = entry["kill_replica"]
        _require(
            isinstance(replica, int) and not isinstance(replica, bool) and replica >= 0,
            f"{where}: kill_replica must be a replica index >= 0",
        )
        body: dict = {}
        if "restart_after_s" in entry:
            delay = entry["restart_after_s"]
            _require(
                isinstance(delay, (int, float)) and not isinstance(delay, bool) and delay >= 0,
                f"{where}: restart_after_s must be a number of seconds >= 0",
            )
            body["restart_after_s"] = delay
        actions.append(FaultAction(f"/admin/replicas/{replica}/kill", json.dumps(body)))
    else:
        _require("restart_after_s" not in entry, f"{where}: restart_after_s goes with kill_replica")
    if "faults" in entry:
        faults = entry["faults"]
        if faults == "clear":
            actions.append(FaultAction("/admin/faults/clear"))
        else:
            _require(
                isinstance(faults, dict) and faults,
                f'{where}: faults must be a table like {{error_rate = 0.2}} or "clear"',
            )
            actions.append(_action("/admin/faults", faults, where))
    extra = entry.get("actions", [])
    _require(isinstance(extra, list), f"{where}: actions must be a list of {{post = PATH, body = {{...}}}}")
    for item in extra:
        _require(
            isinstance(item, dict) and set(item) <= {"post", "body"} and "post" in item,
            f'{where}: each action is {{post = "/admin/...", body = {{...}}}}',
        )
        actions.append(_action(item["post"], item.get("body", {}), where))
    _require(len(actions) <= MAX_ACTIONS, f"{where}: more than {MAX_ACTIONS} actions")
    return actions


def post(admin_url: str, action: FaultAction, timeout: float = ACTION_TIMEOUT_S) -> str:
    """Send one action; "ok" or "failed: <reason>" (never raises)."""
    headers = {"Content-Type": "application/json"}
    token = os.environ.get(ADMIN_TOKEN_ENV)  # a simulator on another host (loadline sim --admin-token)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        admin_url.rstrip("/") + action.path, data=action.body.encode(), method="POST", headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read(65536)
        return "ok"
    except urllib.error.HTTPError as exc:
        detail = exc.read(300).decode("utf-8", "replace").strip().replace("\n", " ")
        return f"failed: HTTP {exc.code} {detail}".rstrip()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return f"failed: {getattr(exc, 'reason', exc)}"


def _gevent_spawn(function: Callable[[], None]) -> None:
    gevent.spawn(function)


def _gevent_sleep(seconds: float) -> None:
    gevent.sleep(seconds)


def append_fault(row: FaultRow) -> None:
    """Write one fault row to the active run folder's faults.csv (none active: the log line only)."""
    try:
        runfolder.append_to_active(runfolder.FAULTS, runfolder.FAULT_COLUMNS, [row.as_csv()])
    except OSError as exc:  # a full disk must not kill the drill's greenlet
        logger.warning("could not write %s: %s", runfolder.FAULTS, exc)


def fault_row(wall: float, phase_index: int, label: str, action: FaultAction, outcome: str) -> FaultRow:
    """The typed record of one action's outcome: "ok", "failed: <why>" (post()) or "skipped: <why>"."""
    status, _, detail = outcome.partition(": ")
    kind = {"ok": FAULT_OK, "skipped": FAULT_SKIPPED}.get(status, FAULT_FAILED)
    return FaultRow(wall, phase_index, label, "POST", action.path, action.body, kind, detail)


class ActionRunner:
    """Runs a phase's actions off the shape's tick; `spawn`, `send` and `record` are swappable for tests."""

    def __init__(
        self,
        spawn: Callable[[Callable[[], None]], Any] = _gevent_spawn,
        send: Callable[[str, FaultAction], str] = post,
        sleep: Callable[[float], None] = _gevent_sleep,
        wall: Callable[[], float] = time.time,
        record: Callable[[FaultRow], None] = append_fault,
    ):
        self.spawn = spawn
        self.send = send
        self.sleep = sleep
        self.wall = wall
        self.record = record
        self.warned = False

    def start(
        self,
        admin_url: str,
        label: str,
        actions: tuple[FaultAction, ...],
        annotate: Callable[[str], None],
        phase_index: int = -1,
    ) -> None:
        """Begin the actions of the phase `label` (`phase_index` in phases.csv); `annotate(text)` adds to its note."""
        if not actions:
            return
        if not admin_url:
            if not self.warned:
                logger.warning(
                    "the stages carry fault actions but there is no --sim-admin-url: running "
                    "without them (against a real service, inject the faults yourself)"
                )
                self.warned = True
            for action in actions:
                self.record(fault_row(self.wall(), phase_index, label, action, "skipped: no --sim-admin-url"))
            annotate(f"{NOTE_PREFIX}skipped (no --sim-admin-url)")
            return
        self.spawn(lambda: self._run(admin_url, label, actions, annotate, phase_index))

    def _run(
        self,
        admin_url: str,
        label: str,
        actions: tuple[FaultAction, ...],
        annotate: Callable[[str], None],
        phase_index: int,
    ) -> None:
        waited = 0.0
        for action in actions:
            if action.after_s > waited:
                self.sleep(action.after_s - waited)
                waited = action.after_s
            sent_at = self.wall()
            outcome = self.send(admin_url, action)
            log = logger.info if outcome == "ok" else logger.warning
            log("Fault action at %s: %s -> %s", label, action.describe(), outcome)
            self.record(fault_row(sent_at, phase_index, label, action, outcome))
            annotate(f"{NOTE_PREFIX}{action.describe()} {outcome}")
