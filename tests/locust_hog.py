"""Single-shot chat users plus a CPU hog in the same process: a generator that is busy half the time.

The hog greenlet busy-loops (never yielding to the event loop) for HOG_BUSY_S every HOG_PERIOD_S,
so every token that arrives meanwhile waits in its socket: what a saturated generator does to its
reads. Used by tests/e2e/test_kernel_clock.py; bounded by the test's run time and HOG_MAX_S.
"""

import time

import gevent
from locust import events

import loadline.runtime.plugin  # noqa: F401
from loadline.client.users import SingleShotUser  # noqa: F401

HOG_BUSY_S = 0.05
HOG_PERIOD_S = 0.1
HOG_MAX_S = 120.0

_hog: list = []


def _busy_half_the_time() -> None:
    deadline = time.monotonic() + HOG_MAX_S
    while time.monotonic() < deadline:
        busy_until = time.perf_counter() + HOG_BUSY_S
        while time.perf_counter() < busy_until:
            pass
        gevent.sleep(HOG_PERIOD_S - HOG_BUSY_S)


@events.test_start.add_listener
def _start_hog(environment, **_kwargs) -> None:
    _hog.append(gevent.spawn(_busy_half_the_time))


@events.test_stop.add_listener
def _stop_hog(environment, **_kwargs) -> None:
    for greenlet in _hog:
        greenlet.kill(block=False)
