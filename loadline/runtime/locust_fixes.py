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
_csv_writers: list[StatsCSVFileWriter] = []  # the process's --csv writer, once its greenlet has started


def _stats_writer_until_closed(self: StatsCSVFileWriter) -> None:
    """Locust's --csv writer greenlet, ending quietly once Locust has closed its files.

    At exit Locust's main() closes the CSV files while this greenlet is still asleep; when the hub
    runs it once more (a slow shutdown: seen when the target was killed mid-run) it seeks a closed
    file and Locust prints a ValueError traceback after a run that ended normally.
    """
    _csv_writers[:] = [self]
    try:
        _stats_writer(self)
    except ValueError:
        if not self.requests_csv_filehandle.closed:
            raise


StatsCSVFileWriter.stats_writer = _stats_writer_until_closed  # type: ignore[method-assign]  # a deliberate patch (see above)


def write_final_csv_stats() -> bool:
    """Rewrite Locust's --csv request and failure tables now, from the final stats; False when no
    writer runs. Locust rewrites them once a second and not again at exit, so they could miss the
    last second of requests; waiting for its next turn cost every run 1.3 s at exit. Written through
    the writer's own file handles (a seek flushes what it buffered first), as its loop writes them:
    a turn of its loop after this writes the same rows."""
    for writer in _csv_writers:
        tables = (
            (writer.requests_csv_filehandle, writer.requests_csv, writer.requests_csv_writer),
            (writer.failures_csv_filehandle, writer.failures_csv, writer.failures_csv_writer),
        )
        for handle, write_table, csv_writer in tables:
            if handle.closed:
                return False
            handle.seek(0)
            write_table(csv_writer)  # its header, then its rows
            handle.truncate()
            handle.flush()
    return bool(_csv_writers)


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

    def handler(signum, frame) -> None:
        if greenlet.getcurrent() is main:
            raise KeyboardInterrupt
        gevent.get_hub().loop.run_callback(main.throw, KeyboardInterrupt)

    signal.signal(signal.SIGINT, handler)
