"""A local run's users that fail at start: the run stops, as it does for a worker's.

In a distributed run, a worker whose users raise in `on_start` tells the master (worker_checks.py)
and the run stops with exit 2 naming it. A local run (`loadline run` without --workers, `locust -f`
without --master) has no master to tell, and Locust alone goes on with fewer users than asked (with
none, it measures nothing and the report would judge an idle service). The same count of failed
users (worker_checks.StartFailures) lands here instead: the manifest's `worker_errors` (so
`loadline run`, the report and the web UI say why, as for a worker) and the run stops, exit 2 when
headless. --allow-partial-workers is about workers: a local run has no other users to go on with.
"""

from __future__ import annotations

import time
from typing import Any

from loadline.core.identity import worker_id
from loadline.runtime import fleet, worker_checks


def install(environment: Any, collector: Any) -> None:
    def report(runner: Any, worker: str, reason: str, kind: str = "", users_short: int | None = None) -> None:
        if collector.run_dir is None:  # no run in progress (its options were refused): nothing to stop
            return
        fleet.record_error(environment, collector.local_errors, worker, reason, kind, time.time())

    worker_checks.StartFailures(environment, worker_id(), report=report).install()
