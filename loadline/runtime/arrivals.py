"""The target arrival rate, from the master to every process's arrival-rate users.

How a worker learns its share: the master knows how many workers it runs (`runner.worker_count`);
Locust's spawn message does not carry it (only this worker's own user counts), so the master sends
a `loadline_rate` custom message {rate, workers, scale} to every worker at test start (before the
spawn message, on the same ordered connection) and again whenever a rate shape changes the rate.
Each worker then sends rate / workers (loadline/client/arrivals.py RateControl). A local
(single-process) runner sets its own control directly.
"""

from __future__ import annotations

import logging

from locust.runners import MasterRunner

from loadline.client.arrivals import CONTROL
from loadline.core.runsettings import time_scale_of_options

log = logging.getLogger("loadline")

RATE_MSG = "loadline_rate"


def install_worker(runner) -> None:
    runner.register_message(RATE_MSG, _on_rate)


def _on_rate(environment, msg, **_) -> None:
    data = msg.data or {}
    CONTROL.set(float(data.get("rate", 0.0)), int(data.get("workers", 1)), float(data.get("scale", 1.0)))


def publish(environment, rate: float) -> None:
    """Set the total target rate (model-time requests/s) in every process of this run."""
    runner = environment.runner
    scale = time_scale_of_options(environment.parsed_options)
    if isinstance(runner, MasterRunner):
        workers = max(1, runner.worker_count)
        runner.send_message(RATE_MSG, {"rate": float(rate), "workers": workers, "scale": scale})
        log.info("arrival rate %.3g/s split over %d workers", rate, workers)
    CONTROL.set(rate, 1, scale)  # the master's own copy (a local runner's users read it)


def stop() -> None:
    CONTROL.reset()
