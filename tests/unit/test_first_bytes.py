"""The first-bytes watch (first_bytes.py): an OS thread's peeks keep each arrival's own kernel stamp.

Real loopback sockets with receive stamps; the writer stamps `time.time()` right before each write
(its truth). The reads come after both writes, as a busy generator's would: without the peeks, TCP
has merged the two writes under the later stamp (the control in each test).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from types import SimpleNamespace

import pytest
from gevent.hub import get_hub

from loadline.client import body_reader
from loadline.client.first_bytes import PEEK_SIZE, POLL_S, FirstBytesWatch
from loadline.client.watch_budget import WINDOW_S, WatchBudget
from loadline.core.kernel_stamps import ANC_SPACE, request_stamps, stamp_of

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_TIMESTAMPNS is Linux's")
GAP_S = 0.05
WAIT_S = 5.0  # the thread peeks within its GIL switch interval; this bounds a test on a very busy box


@pytest.fixture
def pair():
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    listener.close()
    assert request_stamps(client)
    client.setblocking(False)
    yield client, server
    client.close()
    server.close()


@pytest.fixture
def watch():
    watch = FirstBytesWatch()
    yield watch
    watch.stop()


def seen(watch: FirstBytesWatch, fd: int, count: int) -> None:
    """Until the thread has peeked `count` arrivals on `fd` (bounded in time)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        with watch.lock:
            if len(watch._seen.get(fd, ())) >= count:
                return
        time.sleep(0.001)
    raise AssertionError(f"the watch saw fewer than {count} arrivals in {WAIT_S} s")


def write(server: socket.socket, data: bytes) -> float:
    sent = time.time()
    server.sendall(data)
    return sent


def read(client: socket.socket, size: int) -> tuple[bytes, float]:
    data, ancdata, _, _ = client.recvmsg(size, ANC_SPACE)
    return data, stamp_of(ancdata)


def test_two_writes_read_late_keep_their_own_stamps(pair, watch):
    client, server = pair
    watch.watch(client.fileno(), client)
    t_a = write(server, b"first")
    seen(watch, client.fileno(), 1)
    time.sleep(GAP_S)
    t_b = write(server, b"second")
    seen(watch, client.fileno(), 2)
    with watch.lock:
        (size_a, stamp_a), (size_b, stamp_b), rest = (watch.next_piece(client.fileno()) for _ in range(3))
        data_a, merged_stamp = read(client, size_a)
        data_b, _ = read(client, size_b)
    assert (data_a, data_b) == (b"first", b"second")
    assert 0 <= stamp_a - t_a < 0.005 and 0 <= stamp_b - t_b < 0.005
    assert rest == (PEEK_SIZE, 0.0)  # nothing more seen: the next read keeps its own stamp
    assert merged_stamp - t_a > GAP_S / 2  # the control: the read's own stamp is the second write's


def test_a_watch_again_starts_from_nothing_and_unwatch_stops_the_peeks(pair, watch):
    client, server = pair
    fd = client.fileno()
    watch.watch(fd, client)
    write(server, b"old reply")
    seen(watch, fd, 1)
    with watch.lock:
        size, _ = watch.next_piece(fd)
        read(client, size)
    watch.watch(fd, client)  # the next request on this kept-alive connection: armed again, nothing seen
    assert watch.next_piece(fd) == (PEEK_SIZE, 0.0)
    t = write(server, b"new")
    seen(watch, fd, 1)
    with watch.lock:
        size, stamp = watch.next_piece(fd)
    assert size == 3 and 0 <= stamp - t < 0.005
    read(client, size)

    watch.unwatch(fd)
    write(server, b"unwatched")
    time.sleep(GAP_S)  # long enough for the thread to have peeked, had it still watched
    assert watch.next_piece(fd) == (PEEK_SIZE, 0.0)


def test_a_socket_closed_while_watched_is_let_go_quietly(pair, watch):
    client, server = pair
    fd = client.fileno()
    watch.watch(fd, client)
    client.close()  # the kernel takes it off the epoll set
    write(server, b"late bytes")
    watch.unwatch(fd)  # no error: already off the set
    assert watch.next_piece(fd) == (PEEK_SIZE, 0.0)


def test_a_stopped_watch_ends_its_thread_and_lets_go_quietly(pair):
    client, server = pair
    watch = FirstBytesWatch()
    watch.watch(client.fileno(), client)
    watch.stop()
    deadline = time.monotonic() + POLL_S + WAIT_S
    while not watch._epoll.closed and time.monotonic() < deadline:  # the thread closes it as it ends
        time.sleep(0.01)
    assert watch._epoll.closed
    write(server, b"after the stop")
    watch.unwatch(client.fileno())  # a response of the replaced reader letting go: no error
    assert watch.next_piece(client.fileno()) == (PEEK_SIZE, 0.0)


@pytest.mark.parametrize(
    ("environ", "mode"),
    [
        ({}, body_reader.WATCH_WITHIN_BUDGET),
        ({"LOADLINE_FIRST_BYTES_WATCH": ""}, body_reader.WATCH_WITHIN_BUDGET),
        ({"LOADLINE_FIRST_BYTES_WATCH": "1"}, body_reader.WATCH_ON),
        ({"LOADLINE_FIRST_BYTES_WATCH": " 1\n"}, body_reader.WATCH_ON),
        ({"LOADLINE_FIRST_BYTES_WATCH": "0"}, body_reader.WATCH_OFF),
        ({"LOADLINE_FIRST_BYTES_WATCH": " 0 "}, body_reader.WATCH_OFF),
        ({"LOADLINE_FIRST_BYTES_WATCH": "auto"}, body_reader.WATCH_WITHIN_BUDGET),
        ({"LOADLINE_FIRST_BYTES_WATCH": "yes"}, body_reader.WATCH_WITHIN_BUDGET),
    ],
)
def test_the_watch_is_on_within_its_budget_unless_told_always_or_never(environ, mode):
    """Within its budget by default (it rests while its GIL hand-overs cost the loop too much); =1 on
    whatever it costs, =0 off; anything else is the default."""
    assert body_reader.watch_mode(environ) == mode


@pytest.mark.parametrize(
    "readers",
    [
        [],
        [SimpleNamespace(pid=os.getpid(), hub=get_hub(), first_bytes=None)],
        [SimpleNamespace(pid=-1, first_bytes=SimpleNamespace(resting=True))],
    ],
)
def test_without_a_watch_of_this_process_there_is_no_rest_to_sample(monkeypatch, readers):
    """No reader yet, a reader without a watch (=0), a forked parent's reader: the column stays empty."""
    monkeypatch.setattr(body_reader, "_reader", readers)
    assert body_reader.watch_resting() is None


def test_a_watch_whose_thread_waits_for_a_core_rests_and_new_replies_are_not_watched(monkeypatch):
    """The real thread, told it waited 300 ms of every second for a core (what beside two busy processes
    measured): within a window or two it rests, and `first_bytes_watch` hands new requests no watch."""
    clock = {"waited": 0.0}

    def busy() -> float:
        clock["waited"] += 0.6  # read about once a second: more than half of it spent waiting
        return clock["waited"]

    watch = FirstBytesWatch(WatchBudget(), waited=busy)
    monkeypatch.setattr(body_reader, "ENABLED", True)
    monkeypatch.setattr(body_reader, "FIRST_BYTES_WATCH", body_reader.WATCH_WITHIN_BUDGET)
    monkeypatch.setattr(body_reader, "reader", lambda: SimpleNamespace(first_bytes=watch))  # this watch's reader
    monkeypatch.setattr(
        body_reader, "_reader", [SimpleNamespace(pid=os.getpid(), hub=get_hub(), first_bytes=watch)]
    )  # its sample
    try:
        assert body_reader.first_bytes_watch() is watch  # not rested yet
        assert body_reader.watch_resting() is False  # what the self-check writes to generator_metrics.csv
        deadline = time.monotonic() + 3 * WINDOW_S + WAIT_S
        while not watch.resting and time.monotonic() < deadline:
            time.sleep(0.02)
        assert watch.resting and watch.budget.pauses == 1
        assert body_reader.first_bytes_watch() is None
        assert body_reader.watch_resting() is True
    finally:
        watch.stop()


def test_a_watch_forced_on_never_rests():
    watch = FirstBytesWatch(None, waited=lambda: 1e9)
    try:
        assert watch.budget is None and not watch.resting
    finally:
        watch.stop()
