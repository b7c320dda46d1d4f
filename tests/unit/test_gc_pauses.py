"""The start of a test hides the startup heap from later full collections, and frees old garbage first."""

from __future__ import annotations

import gc
import weakref

from loadline.runtime.gc_pauses import freeze_startup_heap


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


def test_old_garbage_is_freed_then_the_live_heap_is_frozen():
    garbage = Node()
    gone = weakref.ref(garbage)
    del garbage
    kept = [Node() for _ in range(20_000)]  # alive at the start: frozen, never walked again
    try:
        freeze_startup_heap()
        assert gone() is None  # collected, not frozen: a web-UI session's previous test does not leak
        assert gc.get_freeze_count() >= len(kept)
        during = [Node() for _ in range(10)]  # what the test allocates: still the collector's
        walked = gc.get_objects()  # what a full collection walks now
        assert len(walked) < 1_000 and any(node is during[0] for node in walked)
        assert not any(node is kept[0] for node in walked)
    finally:
        gc.unfreeze()
