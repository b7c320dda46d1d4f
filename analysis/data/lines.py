"""Where a file's complete lines end: a table still being appended to (or cut by a crash) is read up
to its last newline, by the CSV reader (analysis/data/load.py) and by the columnar copy's check
(analysis/data/requests_copy.py) alike."""

from __future__ import annotations

from typing import BinaryIO


def last_newline_end(f: BinaryIO, size: int) -> int:
    """Offset just past the last b"\\n" in the file's first `size` bytes (0 when there is none)."""
    pos, block = size, 65536
    while pos > 0:
        start = max(0, pos - block)
        f.seek(start)
        chunk = f.read(pos - start)
        idx = chunk.rfind(b"\n")
        if idx >= 0:
            return start + idx + 1
        pos = start
    return 0
