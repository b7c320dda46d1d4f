"""Give the memory a large table's reading frees back to the OS (glibc only; elsewhere nothing).

glibc raises its mmap threshold each time a large block is freed, so after the first few the
reader's 4 MB blocks and the columns' pieces come from the heap, and freed heap memory stays in
the process: a 10 M-row report held ~1.5 GB it no longer used. A fixed threshold keeps large
blocks on mmap (returned at free), and a trim hands back what the heap has free.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import cache

_M_MMAP_THRESHOLD = -3  # mallopt parameter (malloc.h)
_MMAP_THRESHOLD_BYTES = 128 * 1024  # glibc's own starting value, kept fixed


@cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        libc.mallopt  # noqa: B018 - glibc has both; musl and others may not
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def keep_large_blocks_on_mmap() -> None:
    libc = _libc()
    if libc is not None:
        libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES)


def return_freed_memory() -> None:
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
