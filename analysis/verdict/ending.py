"""How a run ended, read from its manifest: the one mapping from the manifest's end to the report's status.

The manifest's `status` and `ended_by` (loadline/runtime/collector.py at test stop; `loadline run`
on a signal):

| status | ended_by | meaning | report status |
|---|---|---|---|
| finished | test | the test ended on its own: its shape, --run-time, the stop rule | judged on its numbers |
| stopped | user | STOP pressed in the web UI | STOPPED BY USER |
| interrupted | signal | `loadline run` got SIGINT/SIGTERM (`interrupted_by`) | INTERRUPTED by SIGINT |
| running | - | the end was never written: the master died or was killed | INTERRUPTED |
| failed | test | a worker could not run (`worker_errors`) | INTERRUPTED |

Every end but `finished` leaves the last phase partial, so the gate's "run completed" criterion
fails (exit 1, never PASS). A folder without a status (a plain `locust --csv` export) is not judged here.
"""

from __future__ import annotations

from dataclasses import dataclass

FINISHED = "finished"
STOPPED = "stopped"
INTERRUPTED = "interrupted"
RUNNING = "running"


@dataclass(frozen=True)
class Ending:
    """A run that did not end on its own: the manifest's status, by whom, the report's word for it, why."""

    status: str
    by: str
    headline: str
    reason: str


def ending(manifest: dict | None) -> Ending | None:
    """None when the run ended on its own (or says nothing about its end); else how it ended."""
    manifest = manifest or {}
    status = manifest.get("status")
    if status is None or status == FINISHED:
        return None
    status = str(status)
    if status == STOPPED:
        return Ending(
            status,
            str(manifest.get("ended_by") or "user"),
            "STOPPED BY USER",
            "the run was stopped from the web UI before it ended: its last phase is partial",
        )
    by = str(manifest.get("interrupted_by") or "")
    headline = f"INTERRUPTED by {by}" if by else "INTERRUPTED"
    if status == INTERRUPTED:
        reason = f"the run was interrupted by {by or 'a signal'} before it ended: its last phase is partial"
    elif status == RUNNING:
        reason = "the run never recorded its end (the manifest still says running): the master died or was killed"
    elif manifest.get("write_error"):  # the disk refused a batch (runtime/collector.py): records were lost
        reason = f"the run folder could not be written whole ({manifest['write_error']}): records were lost"
    else:
        reason = f"the run ended with status {status!r}, not {FINISHED!r}"
    return Ending(status, by, headline, reason)
