"""Memory settings for reading a large table: reuse what was freed, give it back at chosen points.

Reading a 10 M-row run allocates and frees tens of GB in blocks of a few MB. Memory the kernel hands
out fresh is zeroed first, and numpy asks for transparent huge pages on large arrays (zeroed 2 MB at
a time): with every large block mapped fresh and returned at free, a third of a 10 M-row report's CPU
went to zeroing pages (perf: clear_page_erms) and it took 117 s instead of 68. So while a report runs,
blocks up to glibc's 32 MB mmap limit come from the heap and freed ones are reused, the heap keeps up
to 16 MB free at its top, numpy's huge-page hint is off, and `return_freed_memory` hands the heap's
free pages back between the report's parts (after a column, a pass over the gaps, each guarded part
and chart), so that each part's peak starts from the table alone; a table on disk
(analysis/data/spill.py) leaves its mapped pages there too, so a part holds the columns it reads.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import cache

import numpy as np

from loadline.analysis.data import spill

_M_TRIM_THRESHOLD = -1  # mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_BYTES = 32 << 20  # glibc's largest (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit): larger blocks are mmapped
_TRIM_THRESHOLD_BYTES = 16 << 20  # free heap top kept (the gaps' pass reuses a few MB blocks)


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


def reuse_freed_memory() -> None:
    """Keep freed blocks for the next allocation instead of returning (and re-zeroing) them."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES)
        libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD_BYTES)
    hint = getattr(getattr(np, "_core", None), "multiarray", None)
    if hint is not None and hasattr(hint, "_set_madvise_hugepage"):  # NUMPY_MADVISE_HUGEPAGE=0, at run time
        hint._set_madvise_hugepage(False)


def return_freed_memory() -> None:
    spill.release_pages()  # and a table on disk leaves only the columns the next part reads
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
