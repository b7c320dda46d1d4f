"""Keep the garbage collector's full collections off the token path.

A full (generation-2) collection walks every container object the process holds and stops the event
loop meanwhile. After Locust and Loadline are imported a worker holds ~59,000 of them: a full
collection then takes 48 ms here (measured: `gc.collect()` after the imports), two to five token
gaps (10-25 ms, REFERENCE-serving.md) during which no socket is read, so tokens that arrive meanwhile
are read together and the earlier ones get the later stamp. CPython starts one once the objects
that survived since the last exceed a quarter of the long-lived ones, which a long run (a soak)
reaches; in 60 s light runs none came after the start.

At the start of each test the process collects once (what a previous test of a web-UI session left
is freed, not frozen), then moves every object alive into the permanent generation (`gc.freeze`):
later full collections walk only what the test itself keeps (0.01 ms right after, measured the same
way). Per-request objects are acyclic and freed by reference counting, so that stays small.
"""

from __future__ import annotations

import gc


def freeze_startup_heap() -> None:
    """Collect, then hide everything alive now from later collections (see the module docstring)."""
    gc.collect()
    gc.freeze()
