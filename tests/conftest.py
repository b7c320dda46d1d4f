"""Shared fixtures. `sim_server` starts the simulator in a subprocess on a free port."""

from __future__ import annotations

# Patch first, as Locust itself does at import: many test modules import locust (which patches
# with gevent), and a patch that lands after ssl/urllib3 were imported by an earlier test module
# recurses inside ssl (RecursionError at collection, depending on file order).
from gevent import monkey

monkey.patch_all()

from dataclasses import dataclass  # noqa: E402 - after the patch above, on purpose
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from loadline.runtime.simprocess import SimProcess, start_simulator  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT_S = 20.0


@dataclass
class SimHandle(SimProcess):
    """The simulator process (url, admin_url, proc, stop()) plus where its truth log goes."""

    truth_path: Path = Path()


@pytest.fixture
def sim_server(tmp_path):
    """Factory: sim_server(profile="tiny", *extra_args) -> SimHandle; every server is stopped at teardown.

    Uses the same launcher as `loadline run` (loadline.runtime.simprocess): bounded startup, stderr to a file.
    """
    handles: list[SimHandle] = []

    def start(profile: str = "tiny", *extra_args: str) -> SimHandle:
        n = len(handles)
        truth = tmp_path / f"truth-{n}.jsonl"
        sim = start_simulator(
            ["--profile", profile, "--truth", str(truth), *extra_args],
            log_path=tmp_path / f"sim-{n}.stderr",
            startup_timeout=STARTUP_TIMEOUT_S,
        )
        handle = SimHandle(sim.proc, sim.url, sim.admin_url, truth)
        handles.append(handle)
        return handle

    yield start
    for handle in handles:
        handle.stop()


@pytest.fixture(autouse=True)
def _gevent_clock_now():
    """gevent's timers count from its loop's cached time, which moves only when the hub runs: after an
    earlier test computed for longer than a later test's timeout without yielding, that timeout fired
    at once (a 10 s joinall returned after 5 ms, on a loaded box). Each test starts from the present."""
    import gevent

    gevent.get_hub().loop.update_now()
    yield


TIERS = ("unit", "integration", "e2e")


def pytest_collection_modifyitems(items):
    """Each test is marked by its folder: unit (in process, no sockets to other processes),
    integration (one real local process: the simulator, a Locust runner; or a whole in-process pipeline that
    takes seconds: a report with charts, recorded exports through the full verdict), e2e (whole runs).
    docs/architecture.md "Tests" says what goes where."""
    for item in items:
        parts = Path(str(item.fspath)).parts
        for tier in TIERS:
            if tier in parts:
                item.add_marker(getattr(pytest.mark, tier))
