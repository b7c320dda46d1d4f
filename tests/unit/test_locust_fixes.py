"""Locust's --csv writer greenlet ends quietly when Locust closed its files at exit, and its tables
can be written once more at exit with the final stats (loadline.runtime.locust_fixes)."""

from __future__ import annotations

import csv
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


def _csv_counts(path) -> dict[str, int]:
    with open(path, newline="") as handle:
        return {row["Name"]: int(row.get("Request Count") or row.get("Occurrences")) for row in csv.DictReader(handle)}


@pytest.mark.parametrize("late_requests", [1, 7])
def test_the_final_write_shows_requests_the_writer_has_not_seen_yet(tmp_path, late_requests):
    """Requests logged after the writer's last turn reach the files at once, not a second later; a turn
    of its loop after that, and the close, leave the same rows."""
    env = Environment()
    writer = StatsCSVFileWriter(env, [0.5, 0.95], str(tmp_path / "locust"), full_history=False)
    greenlet = gevent.spawn(writer.stats_writer)
    try:
        env.stats.log_request("E2E", "/early", 10, 5)
        gevent.sleep(0.05)  # its first turn: the early request, then asleep for a second
        for _ in range(late_requests):
            env.stats.log_request("E2E", "/late", 20, 5)
        env.stats.log_error("E2E", "/late", "boom")
        assert "/late" not in _csv_counts(tmp_path / "locust_stats.csv")  # the gap the write closes
        assert locust_fixes.write_final_csv_stats()
        counts = _csv_counts(tmp_path / "locust_stats.csv")
        assert counts == {"/early": 1, "/late": late_requests, "Aggregated": 1 + late_requests}
        assert _csv_counts(tmp_path / "locust_failures.csv") == {"/late": 1}
        gevent.sleep(1.1)  # its next turn writes the same rows over them
        assert _csv_counts(tmp_path / "locust_stats.csv") == counts
    finally:
        writer.close_files()
        greenlet.join(timeout=5)
    assert _csv_counts(tmp_path / "locust_stats.csv") == counts
    assert not locust_fixes.write_final_csv_stats()  # closed: the caller waits for the writer instead


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
