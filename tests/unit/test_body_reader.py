"""What only the body reader does (loadline/client/body_reader.py): many replies read by one
greenlet, each exactly as its own server wrote it; a stall, a stop or a bad chunk ends one reply
without touching the others; framings it leaves to the pull path are handed back whole.

Real loopback sockets, one scripted server per reply (test_streaming.py's), users as greenlets.
"""

from __future__ import annotations

import time

import gevent
import pytest
from test_streaming import HEAD_CHUNKED, arrived_during, chunk, event, post, scripted_server, token

from loadline.client import body_reader, streaming
from loadline.client.streaming import StreamFailure, StreamResult, chat_content, read_stream
from loadline.core.records import ErrorClass

pytestmark = pytest.mark.skipif(not body_reader.ENABLED, reason="no epoll here (Linux only)")
END = [chunk(event(b"[DONE]")), chunk(b"")]


def reply(words: list[str], pause: float) -> list:
    """A script: the head, then one token per word every `pause` s, the last one finishing."""
    script: list = [HEAD_CHUNKED]
    for k, word in enumerate(words):
        script += [pause, chunk(token(word, "stop" if k == len(words) - 1 else None))]
    return script + END


def read(url: str, read_timeout: float = 5.0) -> tuple[StreamResult, Exception | None, float]:
    """One user's request: (what arrived, the failure if any, when the request was sent)."""
    result = StreamResult()
    conn, response = post(url, read_timeout)
    try:
        read_stream(response, chat_content, result)
        return result, None, response.sent_perf
    except StreamFailure as exc:
        return result, exc, response.sent_perf
    finally:
        response.close()
        conn.close()


def read_at_once(scripts: list[list]) -> tuple[list, list[list[tuple[float, float]]]]:
    """One user per script, each against its own scripted server, all at once: (users, each
    server's send times, before and after each send: test_streaming.scripted_server says why)."""
    sent: list[list[tuple[float, float]]] = [[] for _ in scripts]
    servers = [scripted_server(script, times) for script, times in zip(scripts, sent)]
    urls = [server.__enter__() for server in servers]
    try:
        users = [gevent.spawn(read, url) for url in urls]
        gevent.joinall(users, timeout=20)
    finally:
        for server in servers:
            server.__exit__(None, None, None)
    assert all(u.successful() for u in users), [u.exception for u in users]
    return users, sent


def on_the_set() -> int:
    return sum(len(r._replies) for r in body_reader._reader)


@pytest.mark.parametrize("streams, pause", [(12, 0.02), (4, 0.05)])
def test_many_replies_in_one_reader_each_get_their_own_times_and_text(streams, pause):
    users, sent = read_at_once([reply([f" w{k}-{i}" for i in range(6)], pause * (1 + k % 3)) for k in range(streams)])
    for k, user in enumerate(users):
        result, error, _ = user.value
        assert error is None and result.text == "".join(f" w{k}-{i}" for i in range(6))
        # sent[k]: the head, then each token: every token stamped when its own bytes came
        assert arrived_during(result.arrivals, sent[k][1:7], 0.01), (k, result.arrivals, sent[k][1:7])
    assert on_the_set() == 0


def test_a_stalled_reply_times_out_alone_and_leaves_the_set():
    stalled = [HEAD_CHUNKED, chunk(token(" a")), 1.5]  # then the server closes
    with scripted_server(stalled) as slow, scripted_server(reply([" x", " y", " z"], 0.1)) as fine:
        t0 = time.perf_counter()
        users = [gevent.spawn(read, slow, 0.3), gevent.spawn(read, fine)]
        gevent.joinall(users, timeout=20)
        took = time.perf_counter() - t0
    (slow_result, slow_error, _), (fine_result, fine_error, _) = users[0].value, users[1].value
    assert isinstance(slow_error, StreamFailure) and slow_error.error_class == ErrorClass.TIMEOUT
    assert slow_result.text == " a"  # what came before the stall is kept
    assert fine_error is None and fine_result.text == " x y z"
    assert took < 1.4  # the stalled one did not wait for its server
    assert on_the_set() == 0


def test_a_user_stopped_mid_reply_leaves_the_set_and_the_others_read_on():
    with scripted_server(reply([" a"] * 20, 0.05)) as long, scripted_server(reply([" x", " y"], 0.2)) as other:
        stopped = gevent.spawn(read, long)
        user = gevent.spawn(read, other)
        gevent.sleep(0.2)
        stopped.kill(block=True, timeout=5)
        gevent.joinall([user], timeout=10)
    assert stopped.dead and user.value[1] is None and user.value[0].text == " x y"
    assert on_the_set() == 0


def test_a_bad_chunk_fails_its_reply_only():
    bad = [HEAD_CHUNKED, chunk(token(" a")), 0.05, chunk(event(b"{not json")), 0.5] + END
    with scripted_server(bad) as broken, scripted_server(reply([" x", " y"], 0.1)) as fine:
        users = [gevent.spawn(read, broken), gevent.spawn(read, fine)]
        gevent.joinall(users, timeout=20)
    assert users[0].value[1].error_class == ErrorClass.MALFORMED and users[0].value[0].text == " a"
    assert users[1].value[1] is None and users[1].value[0].text == " x y"


@pytest.mark.parametrize(
    "odd",
    [
        b": ping\n\n",  # a comment (sse-starlette's keep-alive)
        b"event: message\ndata: " + token(" b")[6:],  # another field before the data
        b'data: {"choices": [{"index": 0,\ndata: "delta": {"content": " b"}, "finish_reason": null}]}\n\n',  # two data lines
    ],
)
def test_unusual_events_are_read_by_the_reader_itself(odd, monkeypatch):
    def pulled(*_):
        raise AssertionError("handed back to the pull path")

    monkeypatch.setattr(streaming, "event_data", pulled)
    script = [HEAD_CHUNKED, chunk(token(" a")), 0.03, chunk(odd), 0.03, chunk(token(" c", "stop"))] + END
    with scripted_server(script) as url:
        result, error, _ = read(url)
    assert error is None and result.finish_reason == "stop"
    assert result.text == (" a c" if odd.startswith(b":") else " a b c")


@pytest.mark.parametrize("cut", ["crlf", "no blank line at the end"])
def test_framings_it_does_not_read_are_handed_back_whole(cut):
    if cut == "crlf":  # LF events first, then CRLF: sseclient-py frames the rest in the user's greenlet
        tail = [chunk(token(" b").replace(b"\n", b"\r\n")), 0.03, chunk(token(" c", "stop").replace(b"\n", b"\r\n"))]
        script = [HEAD_CHUNKED, chunk(token(" a")), 0.03, *tail, chunk(b"data: [DONE]\r\n\r\n"), chunk(b"")]
    else:  # a close-delimited body whose last event lacks its blank line
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
        script = [head, token(" a"), 0.03, token(" b"), 0.03, token(" c", "stop")[:-2]]
    with scripted_server(script) as url:
        result, error, _ = read(url)
    assert error is None and result.text == " a b c" and result.finish_reason == "stop"
    assert on_the_set() == 0


def test_replies_on_the_set_when_the_reader_dies_are_read_on_by_their_users():
    with scripted_server(reply([" a", " b", " c", " d"], 0.1)) as url:
        user = gevent.spawn(read, url)
        gevent.sleep(0.15)
        reader = body_reader._reader[0]._greenlet
        assert reader is not None and not reader.dead
        reader.kill(block=True, timeout=5)
        gevent.joinall([user], timeout=10)
    result, error, _ = user.value
    assert error is None and result.text == " a b c d" and len(result.arrivals) == 4


@pytest.mark.parametrize("interim", [b"", b"HTTP/1.1 100 Continue\r\n\r\n"])
def test_a_head_sent_with_the_first_token_is_read_by_the_reader_and_stamped_with_it(interim):
    # many engines write the status line and headers only with the first token: TTFT hangs on that read
    first = [interim] if interim else []
    script = [*first, 0.1, HEAD_CHUNKED + chunk(token(" a")), 0.03, chunk(token(" b", "stop"))] + END
    users, sent = read_at_once([script] * 8)
    for k, user in enumerate(users):
        result, error, _ = user.value
        assert error is None and result.text == " a b", (k, error)
        head_and_first = sent[k][-4]  # the write that carried the head and " a" (then " b", [DONE], end)
        assert arrived_during(result.arrivals[:1], [head_and_first], 0.01), k
        assert result.body.headers_at == result.arrivals[0] and result.body.status == 200
    assert on_the_set() == 0
