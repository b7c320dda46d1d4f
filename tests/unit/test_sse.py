"""sse.py's fast path frames exactly what sseclient-py frames, however the bytes are split into reads."""

from __future__ import annotations

import pytest
import sseclient

from loadline.client.sse import event_data

TOKEN = b'data: {"choices":[{"delta":{"content":" hi"}}]}'
STREAMS = {
    "lf": TOKEN + b"\n\n" + TOKEN + b"\n\ndata: [DONE]\n\n",
    "crlf": TOKEN + b"\r\n\r\n" + TOKEN + b"\r\n\r\ndata: [DONE]\r\n\r\n",
    "cr": TOKEN + b"\r\r" + TOKEN + b"\r\rdata: [DONE]\r\r",
    "comments and fields": b": keep-alive\n\nevent: message\nid: 7\n" + TOKEN + b"\n\nretry: 10\n\n" + TOKEN + b"\n\n",
    "multi-line data": b"data: line one\ndata: line two\n\n" + TOKEN + b"\n\n",
    "no space after the colon": b'data:{"a":1}\n\ndata:  two spaces\n\n',
    "empty data and a CR mid-stream": b"data: \n\n" + TOKEN + b"\n\ndata: x\r\n\r\n",
    "no blank line at the end": TOKEN + b"\n\n" + TOKEN + b"\n",
    "not utf-8 on the fast path": b"data: \xff\xfe\n\n",
    "a CR right before the blank line": TOKEN + b"\r\n\n" + TOKEN + b"\n\n",
    "an empty event, then a field line": b"data: \n\n" + b"data: a\nid: 1\n\n" + TOKEN + b"\n\n",
}


def as_text(values) -> list[str]:
    return [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in values]


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_every_split_gives_the_librarys_events(name):
    stream = STREAMS[name]
    try:
        expected = [e.data for e in sseclient.SSEClient([stream]).events()]
    except UnicodeDecodeError:
        expected = None  # the library refuses it; the fast path hands the bytes on for orjson to refuse
    for cut in range(len(stream) + 1):
        for second in (cut, min(len(stream), cut + 7)):
            reads = [part for part in (stream[:cut], stream[cut:second], stream[second:]) if part]
            got = list(event_data(reads))
            if expected is None:
                assert got == [b"\xff\xfe"]
            else:
                assert as_text(got) == expected, (name, cut, second)


def test_fast_path_events_are_handed_over_as_bytes_and_as_soon_as_complete():
    seen: list[int] = []

    def reads():
        for k, part in enumerate((TOKEN + b"\n", b"\n" + TOKEN[:10], TOKEN[10:] + b"\n\n")):
            seen.append(k)
            yield part

    events = event_data(reads())
    assert next(events) == TOKEN[6:] and seen == [0, 1]  # complete with the second read, not later
    assert next(events) == TOKEN[6:] and seen == [0, 1, 2]
