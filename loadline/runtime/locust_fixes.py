"""Work-arounds for Locust 2.47 behaviour that would otherwise reach our users' screens.

Installed by importing loadline.runtime.plugin (every entry file does), before Locust spawns the
greenlets they patch.
"""

from __future__ import annotations

import signal

import gevent
import greenlet
from locust.stats import StatsCSVFileWriter

_stats_writer = StatsCSVFileWriter.stats_writer


def _stats_writer_until_closed(self: StatsCSVFileWriter) -> None:
    """Locust's --csv writer greenlet, ending quietly once Locust has closed its files.

    At exit Locust's main() closes the CSV files while this greenlet is still asleep; when the hub
    runs it once more (a slow shutdown: seen when the target was killed mid-run) it seeks a closed
    file and Locust prints a ValueError traceback after a run that ended normally.
    """
    try:
        _stats_writer(self)
    except ValueError:
        if not self.requests_csv_filehandle.closed:
            raise


StatsCSVFileWriter.stats_writer = _stats_writer_until_closed


def deliver_sigint_to_main_greenlet() -> None:
    """Ctrl-C (SIGINT) raises KeyboardInterrupt in the main greenlet only.

    Python raises it in whatever greenlet runs when the signal is handled. In a loaded Locust that
    is often a user in the middle of a stream: the user's greenlet dies there (its request never
    recorded, a traceback printed) before gevent passes the interrupt on to the main greenlet,
    whose `except KeyboardInterrupt` is what stops every user cleanly (in-flight streams recorded
    as cancelled). Seen in CI: 1 request the simulator served had no record. Called from the
    Locust process's init (loadline.runtime.plugin), in its main greenlet.
    """
    main = greenlet.getcurrent()

    def handler(signum, frame) -> None:  # type: ignore[no-untyped-def]
        if greenlet.getcurrent() is main:
            raise KeyboardInterrupt
        gevent.get_hub().loop.run_callback(main.throw, KeyboardInterrupt)

    signal.signal(signal.SIGINT, handler)
