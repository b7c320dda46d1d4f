"""Every streamed body of a process read by one greenlet: one wake-up per batch of ready sockets.

Why: when each user's greenlet reads its own socket, every token costs a gevent wake-up of that
greenlet (an I/O watcher started and stopped, two greenlet switches, a read that meets EAGAIN
before the one that reads), which is most of the generator's CPU per token and, once its core is
full, the delay that makes reads carry several tokens under one stamp (docs/benchmarks.md, "The
token path's own connection"). Here one reader greenlet waits on an epoll set of every body being
read; when it wakes it reads each ready socket once (whatever arrived, with its kernel stamp) and
turns the events into the reply's record right there, through the same `streaming.Reply` the
pull path uses. The user's greenlet sleeps from its headers to the end of its reply.

The reader handles the framing every engine sends (one-line `data:` events, LF line endings;
other events through sseclient-py one at a time). A CR in the stream, an event the body ends
without its blank line, or [DONE] before the end of the body hand the reply back to its user's
greenlet (`PULL`, `DONE`), which goes on reading it the pull way. Whatever goes wrong with one reply
(a reset, a malformed chunk) is raised in its user's greenlet, never in the reader; a stall, a total
timeout or a stop reaches the user's greenlet as before and takes the reply off the set.
`LOADLINE_PUSH_READS=0` reads every body in its user's greenlet (to compare the two: benchmarks/).
"""

from __future__ import annotations

import os

import gevent
from gevent.hub import Waiter, get_hub
from gevent.monkey import get_original

from loadline.client.sse import slow_event
from loadline.client.streaming import DONE, END, PULL, Reply

try:
    _epoll = get_original("select", "epoll")  # gevent's patched select has none: the original, Linux only
except AttributeError:
    _epoll = None
ENABLED = _epoll is not None and os.environ.get("LOADLINE_PUSH_READS", "1") != "0"
_DATA = b"data: "


class _Follow:
    """One reply the reader follows: its response (socket, parser, stamps), its record, its user."""

    __slots__ = ("response", "reply", "waiter", "pending")

    def __init__(self, response, reply: Reply, waiter) -> None:  # type: ignore[no-untyped-def]
        self.response = response
        self.reply = reply
        self.waiter = waiter
        self.pending = b""  # an event's first bytes, waiting for its blank line

    def take_decoded(self) -> str | None:
        """The events of the bytes the parser decoded since the last call, stamped with the read that
        brought them; DONE, END or PULL when the reader's turn with this reply is over, else None."""
        response, reply = self.response, self.reply
        decoded = response.decoded
        if decoded:
            data = bytes(decoded)
            del decoded[:]
            reply.last_arrival = response.arrival
            reply.last_data = data
            buffer = self.pending + data if self.pending else data
            if b"\r" in buffer:  # CR line endings: sseclient-py frames the rest (streaming.read_stream)
                return self._hand_back(buffer)
            start = 0
            take = reply.take
            while (end := buffer.find(b"\n\n", start)) >= 0:
                event = buffer[start:end]
                start = end + 2
                if event.startswith(_DATA) and event.find(b"\n", 6) < 0:
                    if take(event[6:]):
                        return DONE
                elif event and any(take(data) for data in slow_event(event)):
                    return DONE
            self.pending = buffer[start:]
            reply.read_done()
        if response.complete:
            if self.pending.strip():  # an event without its blank line: sseclient-py dispatches it
                return self._hand_back(self.pending)
            reply.clean_eof = True
            return END
        return None

    def _hand_back(self, rest: bytes) -> str:
        self.response.decoded[:0] = rest  # read again by the pull path, with the same stamp
        self.pending = b""
        return PULL


class BodyReader:
    """The reader of one process (one gevent hub): an epoll set, the replies on it, its greenlet."""

    def __init__(self) -> None:
        self.hub = get_hub()
        self.pid = os.getpid()  # a forked worker makes its own: an epoll set is shared across a fork
        self._epoll = _epoll()  # type: ignore[misc]
        self._ready = self.hub.loop.io(self._epoll.fileno(), 1)  # readable: some socket in the set is
        self._replies: dict[int, _Follow] = {}
        self._greenlet: gevent.Greenlet | None = None

    def follow(self, response, reply: Reply) -> str:  # type: ignore[no-untyped-def]
        """Read `response`'s body into `reply` from the reader greenlet; DONE, END or PULL (the rest
        is the caller's to read). Raises what cut the body, in the caller's greenlet."""
        follow = _Follow(response, reply, _Waiter(self.hub))
        outcome = follow.take_decoded()  # the bytes that came with the headers
        if outcome is not None:
            return outcome
        fd = response.fileno()
        self._epoll.register(fd, 1)  # EPOLLIN
        self._replies[fd] = follow
        if self._greenlet is None or self._greenlet.dead:
            self._greenlet = gevent.spawn(self._run)
        stall = response.stall
        stall.waiting = True  # a stall raises ReadTimeout here, as it would in a read of our own
        try:
            outcome = follow.waiter.get()
        finally:
            stall.waiting = False
            if self._replies.get(fd) is follow:  # still on the set: a timeout, a stop, a cancellation
                del self._replies[fd]
                self._epoll.unregister(fd)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _run(self) -> None:
        replies, poll, wait, ready = self._replies, self._epoll.poll, self.hub.wait, self._ready
        try:
            while replies:
                wait(ready)
                for fd, _ in poll(0):
                    follow = replies.get(fd)
                    if follow is None:
                        continue
                    try:
                        outcome = follow.take_decoded() if follow.response.read_ready() else None
                    except Exception as exc:  # this reply's own end (a reset, a bad chunk): raised in its user
                        outcome = exc
                    if outcome is not None:
                        del replies[fd]
                        self._epoll.unregister(fd)
                        follow.waiter.deliver(outcome)
        finally:
            # not a reply's fault (a bug, or this greenlet killed): its users read on the pull way
            for fd, follow in list(replies.items()):
                del replies[fd]
                self._epoll.unregister(fd)
                follow.waiter.deliver(follow._hand_back(follow.pending))


class _Waiter:
    """Where a user's greenlet waits for the reader to be done with its reply."""

    __slots__ = ("_waiter", "_loop")

    def __init__(self, hub) -> None:  # type: ignore[no-untyped-def]
        self._waiter = Waiter(hub)
        self._loop = hub.loop

    def get(self):  # type: ignore[no-untyped-def]
        return self._waiter.get()

    def deliver(self, outcome: object) -> None:
        # through the hub (a Waiter is switched from there); a user that left meanwhile (timeout,
        # stop) leaves it in a waiter nobody reads
        self._loop.run_callback(self._waiter.switch, outcome)


_reader: list[BodyReader] = []


def follow(response, reply: Reply) -> str:  # type: ignore[no-untyped-def]
    """The process's reader follows `response` (connection.Response.follow)."""
    if not _reader or _reader[0].pid != os.getpid() or _reader[0].hub is not get_hub():
        _reader[:] = [BodyReader()]
    return _reader[0].follow(response, reply)
