"""SSE framing on the per-token path: the data of each event, as soon as a read completes it.

Every engine we drive (vLLM, SGLang, TGI, llama.cpp, the simulator) sends each chunk as one
`data: {...}` line ended by a blank line, LF only. Those events are cut out of the bytes with one
`find()` and handed over as bytes (orjson parses bytes and rejects invalid UTF-8 itself). Anything
else is left to sseclient-py, the library that frames the full format: an event with comments,
other fields or several data lines is parsed by it on its own, and once a CR appears (CRLF or CR
line endings) it frames the rest of the stream. Why not sseclient-py for everything: it splits
lines, decodes, builds an Event and logs at debug level for every event, about a quarter of the
generator's CPU at 256 streams (docs/benchmarks.md, "Client stacks").
"""

from __future__ import annotations

from itertools import chain
from typing import Iterable, Iterator

import sseclient

_DATA = b"data: "


def _library(chunks: Iterable[bytes]) -> Iterator[str]:
    return (event.data for event in sseclient.SSEClient(chunks).events())


def slow_event(event: bytes) -> Iterator[str]:
    """The data of one complete event (its blank line cut off) that is not one `data:` line."""
    return _library((event + b"\n\n",))


def event_data(reads: Iterable[bytes]) -> Iterator[bytes | str]:
    """The data field of each event in the body `reads` yields, in order (bytes on the fast path,
    str from sseclient-py); an event is yielded while the read that completed it is the latest."""
    pending = b""
    source = iter(reads)
    for data in source:
        buffer = pending + data if pending else data
        if b"\r" in buffer:
            yield from _library(chain((buffer,), source))
            return
        start = 0
        while (end := buffer.find(b"\n\n", start)) >= 0:
            event = buffer[start:end]
            start = end + 2
            if event.startswith(_DATA) and event.find(b"\n", 6) < 0:
                yield event[6:]
            elif event:
                yield from slow_event(event)
        pending = buffer[start:]
    if pending.strip():  # an event the body ended without its blank line: sseclient-py dispatches it
        yield from _library((pending,))
