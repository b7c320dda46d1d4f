"""How `loadline run` reads the end of a Locust run: a run that did not run ends in one line and exit 2.

Locust's exit code alone does not say why a run ended; the run folder does (the manifest's status and
the worker errors the master wrote, loadline/runtime/fleet.py), and so does the disk it was written to.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from loadline.core import runfolder
from loadline.core.errors import UsageError


def raise_if_not_run(run_dir: Path, code: int) -> None:
    """UsageError (exit 2) naming why, when Locust (exit `code`) did not run the test to an end."""
    if code != 0 and disk_full(run_dir):
        raise UsageError(
            f"the disk holding {run_dir} is full (No space left on device): the run folder could not be "
            f"finished; what was written is kept and readable: loadline report {run_dir} --out DIR"
        )
    worker_error = worker_error_of(run_dir)
    if code == 2 and worker_error:
        raise UsageError(f"{worker_error}; what was measured is kept in {run_dir}")
    if code == 2 or not (run_dir / runfolder.REQUESTS).exists():
        raise UsageError(
            f"locust stopped before the test ran (exit {code}); see the messages above. Run folder: {run_dir}"
        )
    status = manifest_status(run_dir)
    if code not in (0, 1) or status not in ("finished", "interrupted"):
        raise UsageError(
            f"locust ended abnormally (exit {code}, run folder status {status!r}); "
            f"what was measured is kept in {run_dir}"
        )


DISK_FULL_BYTES = 1 << 20  # less than this free after a failed run: the disk filled up (a run writes MBs)


def disk_full(run_dir: Path) -> bool:
    try:
        return shutil.disk_usage(run_dir).free < DISK_FULL_BYTES
    except OSError:
        return False


def worker_error_of(run_dir: Path) -> str:
    """The first worker error the master wrote (runtime/fleet.py), as one line; '' when none."""
    try:
        errors = json.loads((run_dir / runfolder.MANIFEST).read_text()).get("worker_errors") or []
    except (OSError, ValueError):
        return ""
    first = errors[0] if errors and isinstance(errors[0], dict) else None
    return f"worker {first.get('worker')} cannot run: {first.get('reason')}" if first else ""


def manifest_status(run_dir: Path) -> str:
    try:
        return str(json.loads((run_dir / runfolder.MANIFEST).read_text()).get("status"))
    except (OSError, ValueError):
        return "missing"
