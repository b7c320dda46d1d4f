"""SSE framing on the per-token path: the data of each event, as soon as a read completes it.

Every engine we drive (vLLM, SGLang, TGI, llama.cpp, the simulator) sends each chunk as one
`data: {...}` line ended by a blank line, LF only. Those events are cut out of the bytes with one
`find()` (`Framer`, fed each read) and handed over as bytes (orjson parses bytes and rejects invalid UTF-8 itself). Anything
else is left to sseclient-py, the library that frames the full format: an event with comments,
other fields or several data lines is parsed by it on its own, and once a CR appears (CRLF or CR
line endings) it frames the rest of the stream. Why not sseclient-py for everything: it splits
lines, decodes, builds an Event and logs at debug level for every event, about a quarter of the
generator's CPU at 256 streams (docs/benchmarks.md, "Client stacks").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain

import sseclient

_DATA = b"data: "


def _library(chunks: Iterable[bytes]) -> Iterator[str]:
    # sseclient-py's stub asks for an Iterator; the library only runs a for loop over it
    return (event.data for event in sseclient.SSEClient(chunks).events())  # type: ignore[arg-type]


class Framer:
    """The fast path, fed read by read: both the pull path (`event_data`) and the body reader
    (body_reader.py, which is handed reads rather than asking for them) cut events with it."""

    __slots__ = ("pending",)

    def __init__(self) -> None:
        self.pending = b""  # an event's first bytes, waiting for its blank line

    def events(self, data: bytes) -> list[bytes | str] | None:
        """The data of each event this read completes, in order; None once a CR appears (CRLF or CR
        line endings): sseclient-py must frame the rest, starting with `pending`, which then holds
        this read too."""
        if self.pending:
            buffer = self.pending + data
        elif (
            data.startswith(_DATA)
            and data.find(b"\n") == len(data) - 2
            and data.endswith(b"\n\n")
            and b"\r" not in data
        ):
            return [data[6:-2]]  # what nearly every read is: one whole one-line event (a token)
        else:
            buffer = data
        if b"\r" in buffer:
            self.pending = buffer
            return None
        found: list[bytes | str] = []
        start = 0
        while (end := buffer.find(b"\n\n", start)) >= 0:
            event = buffer[start:end]
            start = end + 2
            if event.startswith(_DATA) and event.find(b"\n", 6) < 0:
                found.append(event[6:])
            elif event:  # comments, other fields, several data lines: the library, this event alone
                found.extend(_library((event + b"\n\n",)))
        self.pending = buffer[start:]
        return found


def event_data(reads: Iterable[bytes]) -> Iterator[bytes | str]:
    """The data field of each event in the body `reads` yields, in order (bytes on the fast path,
    str from sseclient-py); an event is yielded while the read that completed it is the latest."""
    framer = Framer()
    source = iter(reads)
    for data in source:
        found = framer.events(data)
        if found is None:
            yield from _library(chain((framer.pending,), source))
            return
        yield from found
    if framer.pending.strip():  # an event the body ended without its blank line: sseclient-py dispatches it
        yield from _library((framer.pending,))
