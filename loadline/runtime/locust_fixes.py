"""Work-arounds for Locust 2.47 behaviour that would otherwise reach our users' screens.

Installed by importing loadline.runtime.plugin (every entry file does), before Locust spawns the
greenlets they patch.
"""

from __future__ import annotations

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
