"""The self-check on a shared core (real processes, real scheduler): a worker starved by a neighbour
is saturated by its demand for the core (CPU + the wait for it, loadline/core/saturation.py) although
its own CPU % stays at its share; a light worker beside the same neighbour is not. Linux only
(/proc/self/schedstat)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from loadline.core.saturation import CPU_SATURATED_PCT

REPO = Path(__file__).resolve().parents[2]
SECONDS = 3.0

WORKER = """
import json, os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
from gevent import monkey
monkey.patch_all()
import gevent
from loadline.runtime.selfcheck import SelfCheck

mode, seconds = sys.argv[2], float(sys.argv[3])
check = SelfCheck("w", interval_s=0.25).start()


def work():
    end = time.monotonic() + seconds
    for _ in range(10**7):  # bounded: ends on time well before the count
        if time.monotonic() >= end:
            break
        started = time.perf_counter()
        while time.perf_counter() - started < (0.001 if mode == "busy" else 0.0005):
            pass  # CPU work in 1 ms (busy) or 0.5 ms (light) slices, the hub runs between them
        gevent.sleep(0 if mode == "busy" else 0.02)


gevent.spawn(work).join()
check.stop()
print(json.dumps(check.sample_rows()))
"""

HOG = (
    "import os, sys, time\nos.sched_setaffinity(0, {int(sys.argv[1])})\nend = time.monotonic() + float(sys.argv[2])\n"
    "while time.monotonic() < end:\n    pass\n"
)


def sample(mode: str, hog: bool) -> tuple[float, float]:
    """(median CPU %, median CPU + wait %) of a worker pinned to one core, with or without a CPU hog on it."""
    core = max(os.sched_getaffinity(0))
    neighbour = subprocess.Popen([sys.executable, "-c", HOG, str(core), str(SECONDS + 2)]) if hog else None
    try:
        done = subprocess.run(
            [sys.executable, "-c", WORKER, str(core), mode, str(SECONDS)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        if neighbour is not None:
            neighbour.kill()
            neighbour.wait(10)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(done.stdout.strip().splitlines()[-1])[1:]  # the first sample spans the start-up
    assert len(rows) >= 5, rows
    cpu = [r[2] for r in rows]
    demand = [r[2] + r[6] for r in rows]
    return statistics.median(cpu), statistics.median(demand)


pytestmark = pytest.mark.skipif(not Path("/proc/self/schedstat").exists(), reason="Linux schedstat only")


def test_a_busy_worker_sharing_its_core_with_a_hog_is_saturated_at_its_share():
    cpu, demand = sample("busy", hog=True)
    assert cpu < CPU_SATURATED_PCT - 15, cpu  # the scheduler shares the core: CPU % alone would not tell
    assert demand >= CPU_SATURATED_PCT, (cpu, demand)


def test_a_busy_worker_alone_on_its_core_is_saturated_by_its_cpu():
    cpu, demand = sample("busy", hog=False)
    assert demand >= CPU_SATURATED_PCT, (cpu, demand)


def test_a_light_worker_beside_the_same_hog_is_not_saturated():
    cpu, demand = sample("light", hog=True)
    assert cpu < 30 and demand < CPU_SATURATED_PCT - 20, (cpu, demand)
