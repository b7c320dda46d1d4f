"""Every streamed body of a process read by one greenlet: one wake-up per batch of ready sockets.

Why: when each user's greenlet reads its own socket, every token costs a gevent wake-up of that
greenlet (an I/O watcher started and stopped, two greenlet switches, a read that meets EAGAIN
before the one that reads), which is most of the generator's CPU per token and, once its core is
full, the delay that makes reads carry several tokens under one stamp (docs/benchmarks.md, "Where
the generator's CPU per token goes"). Here one reader greenlet waits on an epoll set of every body being
read; when it wakes it reads each ready socket once (whatever arrived, with its kernel stamp) and
turns the events into the reply's record right there, through the same `streaming.Reply` the
pull path uses. The user's greenlet sleeps from its request's send to the end of its reply: the
reader reads the status line and headers too (`await_head`), since many engines send them only
with the first token. Replies still waiting for their first token sit on a set of their own, looked
at between every few reads of the others and by every user that starts waiting: TCP merges a
token that waits in its socket with the next one under the later stamp (kernel_clock.py), so a
first token read a token gap late would give TTFT a gap too long. When the loop is busy all the same
(a collection, a long turn of another greenlet), an OS thread stamps those first bytes as they
arrive (first_bytes.py; within a budget by default, watch_budget.py; LOADLINE_FIRST_BYTES_WATCH=1
always, =0 never), and the reader then reads them in the pieces that thread saw. Before it sleeps,
the reader notes when it found every socket empty (idle_clock.py): a read that then carries several
tokens cannot have waited longer than the process was busy since (a server that wrote them together).

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
import sys
from collections.abc import Mapping
from time import time

import gevent
from gevent.event import AsyncResult
from gevent.hub import get_hub
from gevent.monkey import get_original

from loadline.client.first_bytes import FirstBytesWatch
from loadline.client.idle_clock import IdleClock
from loadline.client.sse import Framer
from loadline.client.streaming import DONE, END, PULL, Reply
from loadline.client.watch_budget import WatchBudget

try:
    _epoll = get_original("select", "epoll")  # gevent's patched select has none: the original, Linux only
except AttributeError:
    _epoll = None
ENABLED = _epoll is not None and os.environ.get("LOADLINE_PUSH_READS", "1") != "0"
# TCP merges a token that waits in its socket with the next one under the later stamp
# (kernel_clock.py), and at 256 streams one pass over the ready sockets takes 20-30 ms, two or three
# token gaps (docs/benchmarks.md): replies awaiting their first token are looked at again after this
# many reads of the others (~0.5 ms at ~35 us a read), so that a first token is read within about
# a millisecond of its arrival while the reader keeps up at all.
FIRST_TOKEN_LOOK_EVERY = 16
MAX_PIECES = 64  # a bound: a socket has as many pieces as writes arrived before the reader came


WATCH_OFF, WATCH_ON, WATCH_WITHIN_BUDGET = "off", "on", "within budget"


def watch_mode(environ: Mapping[str, str]) -> str:
    """Whether an OS thread also stamps first tokens as they arrive, whatever the loop is doing
    (first_bytes.py). By default within its budget: it rests while its hand-overs of the GIL cost the
    loop more than watch_budget.BUDGET of its time. LOADLINE_FIRST_BYTES_WATCH=1 keeps it on whatever
    it costs, =0 turns it off. Without it, a first token read late takes a later token's stamp:
    TTFT error p99 9.3 ms at 256 streams and 37 ms at 16 beside a CPU hog, against 0.06 and 0.45 ms
    with it, at the same tokens/s and CPU per token (docs/benchmarks.md, "First-bytes watch: what it buys and what it costs")."""
    value = environ.get("LOADLINE_FIRST_BYTES_WATCH", "").strip()
    return WATCH_ON if value == "1" else WATCH_OFF if value == "0" else WATCH_WITHIN_BUDGET


FIRST_BYTES_WATCH = watch_mode(os.environ)
HEAD = "head"  # the reply's status line and headers are in (`await_head`)


class _Follow:
    """One reply the reader follows: its response (socket, parser, stamps), its record, its user."""

    __slots__ = ("response", "reply", "done", "framer", "fresh")

    def __init__(self, response, reply: Reply | None) -> None:
        self.response = response
        self.reply = reply
        self.done = AsyncResult()  # the reader's outcome, or the reply's own failure, for its user
        self.framer = Framer()
        self.fresh = True  # no content yet: on the reader's set of replies awaiting their first token

    def after_read(self) -> str | None:
        """HEAD when following a reply's head and it is complete; else what `take_decoded` says."""
        if self.reply is None:
            if not self.response.has_head:
                return None
            if self.response.decoded:  # tokens came with the head: their events are counted in `follow`
                self.response.hold_idle()
            return HEAD
        return self.take_decoded()

    def take_decoded(self) -> str | None:
        """The events of the bytes the parser decoded since the last call, stamped with the read that
        brought them; DONE, END or PULL when the reader's turn with this reply is over, else None."""
        response = self.response
        # no assert (this runs per read, on the per-token path): after_read returns HEAD for a head's
        reply: Reply = self.reply  # type: ignore[assignment]  # a head's _Follow (reply None) never gets here
        decoded = response.decoded
        if decoded:
            data = bytes(decoded)
            del decoded[:]
            reply.last_arrival = response.arrival
            reply.last_data = data
            found = self.framer.events(data)
            if found is None:  # CR line endings: sseclient-py frames the rest (streaming.read_stream)
                return self._hand_back()
            take = reply.take
            for event in found:
                if take(event):
                    reply.read_done()  # counted while the reply is on the set (response.merged)
                    return DONE
            reply.read_done()
        if response.complete:
            if self.framer.pending.strip():  # an event without its blank line: sseclient-py dispatches it
                return self._hand_back()
            # the end of the body: it moves the end of the reply when it came in a read of its own
            # (then it had to be waited for), as in streaming.Reply.reads
            reply.last_arrival = response.arrival
            reply.clean_eof = True
            return END
        return None

    def _hand_back(self) -> str:
        """What the framer holds goes back to the parser's buffer: the pull path reads it again, with
        the same stamp (connection.Response.read1)."""
        self.response.decoded[:0] = self.framer.pending
        self.framer.pending = b""
        return PULL


class BodyReader:
    """The reader of one process (one gevent hub): an epoll set, the replies on it, its greenlet."""

    def __init__(self) -> None:
        self.hub = get_hub()
        self.pid = os.getpid()  # a forked worker makes its own: an epoll set is shared across a fork
        self._epoll = _epoll()
        self._fresh = _epoll()  # the replies awaiting their first token
        self._epoll.register(self._fresh.fileno(), 1)  # readable when one of them is
        self._ready = self.hub.loop.io(self._epoll.fileno(), 1)  # readable: some socket in the sets is
        self._replies: dict[int, _Follow] = {}
        self._greenlet: gevent.Greenlet | None = None
        self.first_bytes = _make_watch(FIRST_BYTES_WATCH)  # stamps first tokens on arrival
        # when every socket followed was last seen empty: merged reads' bound
        self.idle = IdleClock(self.first_bytes.schedstat_fds if self.first_bytes is not None else None)

    def await_head(self, response) -> None:
        """Read `response` until its status line and headers are in. Many engines send them with the
        first token, so they are read as first tokens are: promptly (FIRST_TOKEN_LOOK_EVERY)."""
        if not response.has_head:
            self._wait(response, _Follow(response, None))

    def follow(self, response, reply: Reply) -> str:
        """Read `response`'s body into `reply` from the reader greenlet; DONE, END or PULL (the rest
        is the caller's to read). Raises what cut the body, in the caller's greenlet."""
        follow = _Follow(response, reply)
        outcome = follow.take_decoded()  # the bytes that came with the headers
        response.held_busy = None
        if outcome is not None:
            return outcome
        follow.fresh = not reply.result.arrivals
        return self._wait(response, follow)

    def _wait(self, response, follow: _Follow) -> str:
        fd = response.fileno()
        if not follow.fresh:  # its first token came with the head
            response.unwatch()
        (self._fresh if follow.fresh else self._epoll).register(fd, 1)  # EPOLLIN
        self._replies[fd] = follow
        response.idle, response.idle_first, response.idle_last = self.idle, self.idle.looks + 1, sys.maxsize
        if self._greenlet is None or self._greenlet.dead:
            self._greenlet = gevent.spawn(self._run)
        # users that finish together (replies that began together end in the same engine step) run
        # one after another between two turns of the reader: each looks at the first tokens too
        self._read_fresh()
        stall = response.stall
        stall.waiting = True  # a stall raises ReadTimeout here, as it would in a read of our own
        try:
            self._look()  # the reader may sleep until this reply's first bytes: a look it joined before
            return follow.done.get()  # raises the reply's own failure here, in its user's greenlet
        finally:
            stall.waiting = False
            if self._replies.get(fd) is follow:  # still on a set: a timeout, a stop, a cancellation
                self._drop(fd, follow)

    def _drop(self, fd: int, follow: _Follow, outcome: str | None = None) -> None:
        del self._replies[fd]
        follow.response.idle_last = self.idle.looks  # later looks no longer see this socket
        (self._fresh if follow.fresh else self._epoll).unregister(fd)
        if outcome != HEAD:  # the body is followed next, still waiting for its first token
            follow.response.unwatch()

    def _run(self) -> None:
        replies, poll, wait, ready, read = self._replies, self._epoll.poll, self.hub.wait, self._ready, self._read
        fresh, look = self._fresh.fileno(), self._look
        try:
            while replies:
                wait(ready)
                reads = 0
                for fd, _ in poll(0):
                    if fd == fresh or reads >= FIRST_TOKEN_LOOK_EVERY:
                        self._read_fresh()
                        reads = 0
                        if fd == fresh:
                            continue
                    follow = replies.get(fd)
                    if follow is not None:
                        read(fd, follow)
                        reads += 1
                look()
        finally:
            # not a reply's fault (a bug, or this greenlet killed): its users read on the pull way
            for fd, follow in list(replies.items()):
                self._drop(fd, follow)
                follow.done.set(follow._hand_back())

    def _look(self) -> None:
        """When every socket followed (the fresh set's too: it is on the main one) has no bytes waiting,
        the idle clock notes it: bytes that come after can wait only while the process is busy."""
        if not self._epoll.poll(0, 1):
            self.idle.empty(time())

    def _read_fresh(self) -> None:
        """Read the replies whose first token (or what precedes it) has come; move those that have
        their first token to the main set."""
        replies = self._replies
        for fd, _ in self._fresh.poll(0):
            follow = replies.get(fd)
            if follow is None:
                continue
            self._read(fd, follow)
            reply = follow.reply  # None: a head, which stays here until it is complete
            if reply is not None and reply.result.arrivals and replies.get(fd) is follow:
                self._fresh.unregister(fd)
                follow.response.unwatch()
                self._epoll.register(fd, 1)
                follow.fresh = False

    def _read(self, fd: int, follow: _Follow) -> None:
        response = follow.response
        try:
            if response.watch is not None:
                outcome = self._read_pieces(fd, follow, response.watch)
            else:
                outcome = follow.after_read() if response.read_ready() else None
        except Exception as exc:  # this reply's own end (a reset, a bad chunk): raised in its user
            self._drop(fd, follow)
            follow.done.set_exception(exc)
            return
        if outcome is not None:
            self._drop(fd, follow, outcome)
            follow.done.set(outcome)

    @staticmethod
    def _read_pieces(fd: int, follow: _Follow, watch: FirstBytesWatch) -> str | None:
        """Read a watched reply in the pieces its peeks saw, each with its own stamp, then the rest."""
        response = follow.response
        since = 0.0  # the first piece's bytes came after the previous read; the next ones after its peek
        for _ in range(MAX_PIECES):
            with watch.lock:  # the peeks' byte counts hold until this read
                size, peeked = watch.next_piece(fd)
                got = response.read_ready(size, peeked, since)
            outcome = follow.after_read() if got else None
            if outcome is not None or not got or not peeked:
                return outcome
            since = peeked  # what the next piece holds was not there when this one was peeked at
        return None


def _make_watch(mode: str) -> FirstBytesWatch | None:
    if mode == WATCH_OFF:
        return None
    return FirstBytesWatch(WatchBudget() if mode == WATCH_WITHIN_BUDGET else None)


_reader: list[BodyReader] = []


def first_bytes_watch() -> FirstBytesWatch | None:
    """The watch that stamps a new reply's first bytes as they arrive, if it is on, not resting, and the
    reader reads the reply (None, without making the reader, when off: this runs for every request)."""
    if not ENABLED or FIRST_BYTES_WATCH == WATCH_OFF:
        return None
    watch = reader().first_bytes
    return None if watch is None or watch.resting else watch


def watch_resting() -> bool | None:
    """Whether this process's first-bytes watch rests now; None when it has none (off, or no reader yet).
    Sampled once a second into generator_metrics.csv (loadline/runtime/selfcheck.py)."""
    own = _own_reader()
    return None if own is None or own.first_bytes is None else own.first_bytes.resting


def _own_reader() -> BodyReader | None:
    """The reader made in this process and hub, if any (not a forked parent's, nor another hub's)."""
    return _reader[0] if _reader and _reader[0].pid == os.getpid() and _reader[0].hub is get_hub() else None


def reader() -> BodyReader:
    """The process's reader (connection.Response: `read_head`, `follow`), made at its first use."""
    if _own_reader() is None:
        if _reader and _reader[0].first_bytes is not None:
            _reader[0].first_bytes.stop()  # its thread ends at its next look (another hub's, or a parent's)
        _reader[:] = [BodyReader()]
    return _reader[0]
