"""Locust's --csv writer greenlet ends quietly when Locust closed its files at exit (loadline.runtime.locust_fixes)."""

from __future__ import annotations

import os
import signal
import time

import gevent
import pytest
from locust.env import Environment
from locust.stats import StatsCSVFileWriter

import loadline.runtime.plugin  # noqa: F401  (installs the fixes, as every entry file does)
from loadline.runtime import locust_fixes


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


def test_ctrl_c_reaches_the_main_greenlet_and_spares_the_busy_user():
    """SIGINT handled while a user's greenlet runs: that greenlet finishes its work, and the
    KeyboardInterrupt lands in the main greenlet (where Locust stops every user cleanly)."""
    previous = signal.getsignal(signal.SIGINT)
    finished = []

    def busy_user() -> None:
        os.kill(os.getpid(), signal.SIGINT)
        until = time.monotonic() + 0.2
        while time.monotonic() < until:  # the signal is handled while this greenlet runs
            pass
        finished.append(True)

    try:
        locust_fixes.deliver_sigint_to_main_greenlet()
        user = gevent.spawn(busy_user)
        with pytest.raises(KeyboardInterrupt):
            user.join(timeout=5)
        user.join(timeout=5)
        assert finished and user.successful(), user.exception
    finally:
        signal.signal(signal.SIGINT, previous)
