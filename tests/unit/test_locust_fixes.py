"""Locust's --csv writer greenlet ends quietly when Locust closed its files at exit (loadline.runtime.locust_fixes)."""

from __future__ import annotations

import gevent
from locust.env import Environment
from locust.stats import StatsCSVFileWriter

import loadline.runtime.plugin  # noqa: F401  (installs the fixes, as every entry file does)


def test_writer_greenlet_ends_without_error_after_the_files_close(tmp_path):
    writer = StatsCSVFileWriter(Environment(), [0.5, 0.95], str(tmp_path / "locust"), full_history=False)
    greenlet = gevent.spawn(writer.stats_writer)
    gevent.sleep(0.05)  # it wrote its headers and sleeps until the next cycle
    writer.close_files()
    greenlet.join(timeout=5)  # wakes on closed files: must end, not raise
    assert greenlet.dead and greenlet.successful(), greenlet.exception


def test_other_value_errors_still_surface(tmp_path, monkeypatch):
    writer = StatsCSVFileWriter(Environment(), [0.5, 0.95], str(tmp_path / "locust"), full_history=False)

    def broken(*_args, **_kwargs):
        raise ValueError("not about closed files")

    monkeypatch.setattr(writer, "_requests_data_rows", broken)
    greenlet = gevent.spawn(writer.stats_writer)
    greenlet.join(timeout=5)
    assert isinstance(greenlet.exception, ValueError)
    writer.close_files()
