"""The bridge from a sequence to its HTTP connection: writes the response and the truth record.

`deliver` is called by the engine once per step in which the sequence produced tokens, finished
or failed; everything due in that step goes out in one socket write. Wall-clock stamps for the
truth log are taken right before those writes. Headers go out with the first token, as in vLLM
(whose streaming response starts when the engine yields its first output), so a request that
fails before its first token still gets a plain HTTP error status.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from loadline.simulator.http import LAST_CHUNK, STREAM_HEAD, Connection, chunk, response
from loadline.simulator.openai_api import Generation
from loadline.simulator.reasoning import ReplyShape
from loadline.simulator.sequence import Sequence
from loadline.simulator.wire import DONE, ChunkTemplates, error_body, full_response, stream_error


class ResponseSink:
    __slots__ = (
        "conn",
        "gen",
        "templates",
        "response_id",
        "created",
        "sent",
        "headers_sent",
        "truth",
        "on_done",
        "finished",
        "head",
        "shape",
    )

    def __init__(
        self,
        conn: Connection,
        gen: Generation,
        response_id: str,
        created: int,
        truth: dict,
        on_done: Callable[[ResponseSink, dict], None],
        head: bytes = STREAM_HEAD,
        shape: ReplyShape | None = None,
    ) -> None:
        self.conn = conn
        self.shape = shape  # reasoning / tool-call reply (reasoning.py); None: plain content
        self.head = head  # the streamed response's status line and headers
        self.gen = gen
        self.response_id = response_id
        self.created = created
        self.templates = ChunkTemplates.build(gen.chat, response_id, created, gen.model) if gen.stream else None
        self.sent = 0
        self.headers_sent = False
        self.truth = truth  # the request's truth record, completed here
        self.on_done = on_done
        self.finished = False

    def deliver(self, seq: Sequence) -> None:
        if self.finished or self.conn.closed:
            return
        if seq.error is not None:
            self._fail(seq)
        elif (t := self.templates) is not None:  # built exactly when gen.stream
            self._stream(seq, t)
        elif seq.done:
            body = full_response(
                self.gen.chat,
                self.response_id,
                self.created,
                self.gen.model,
                seq.prompt_len,
                seq.generated,
                seq.finish_reason or "stop",
            )
            now = time.time()
            self.conn.write(response(200, body, keep_alive=self.conn.keep_alive))
            self.truth["first_token"] = self.truth["last_token"] = now
            self.truth["first_write_s"] = self.truth["last_write_s"] = round(time.time() - now, 6)
            self._done(seq, 200, "ok")

    def _stream(self, seq: Sequence, t: ChunkTemplates) -> None:
        tail: list[bytes] = []
        if seq.done:
            shape = self.shape
            reason = seq.finish_reason or "stop"
            tail.append(t.finish(shape.finish_reason(reason) if shape else reason))
            if self.gen.include_usage:
                extra = shape.usage_extra(seq.cached_tokens or 0) if shape else None
                tail.append(t.usage(seq.prompt_len, seq.generated, extra))
            tail.append(DONE)
        self._write_tokens(seq, t, tail, seq.done)
        if seq.done:
            self._done(seq, 200, "ok")

    def _write_tokens(self, seq: Sequence, t: ChunkTemplates, tail: list[bytes], last: bool) -> None:
        """The tokens not yet sent (after the headers and role chunk on the first write), then `tail`."""
        parts = [] if self.headers_sent else ([t.role()] if t.chat else [])
        shape = self.shape
        if shape is None:
            parts.extend(t.token(i) for i in range(self.sent, seq.generated))
        else:
            parts.extend(shape.token(t, i) for i in range(self.sent, seq.generated))
        parts.extend(tail)
        data = chunk(b"".join(parts))
        if not self.headers_sent:
            data = self.head + data
        if last:
            data += LAST_CHUNK
        now = time.time()
        self.conn.write(data)
        # The kernel took the bytes somewhere in [now, now + took]: a write call that took long was
        # preempted around the send, and that bounds how far the stamp can be from the wire.
        took = round(time.time() - now, 6)
        if shape is not None:
            shape.stamp(self.truth, self.sent, seq.generated, now)
        if not self.headers_sent:
            self.headers_sent = True
            self.truth["first_token"], self.truth["first_write_s"] = now, took
            if shape is None and seq.generated:  # a plain reply: its first token is its answer's
                self.truth["first_answer_token"] = now
        self.truth["last_token"], self.truth["last_write_s"] = now, took
        self.sent = seq.generated

    def interrupt(self, seq: Sequence, abort: Callable[[Sequence], None]) -> None:
        """Cut the stream as llama-cpp-python does when a new request arrives (simulator/quirks.py):
        what was generated, then [DONE] with no finish_reason; the engine frees the sequence."""
        if self.finished or self.conn.closed:
            return
        abort(seq)
        t = self.templates
        assert t is not None  # only streams are interrupted (app.py registers streaming sinks only)
        self._write_tokens(seq, t, [DONE], True)
        self._done(seq, 200, "interrupted")

    def _fail(self, seq: Sequence) -> None:
        message = seq.error or "error"
        if self.headers_sent:
            self.conn.write(chunk(stream_error(message) + DONE) + LAST_CHUNK)
            status = 200
        else:
            self.conn.keep_alive = False
            self.conn.write(response(500, error_body(message, 500), keep_alive=False))
            status = 500
        self._done(seq, status, seq.error_outcome)

    def client_gone(self, seq: Sequence, abort: Callable[[Sequence], None]) -> None:
        """The connection closed under the stream: free the engine's blocks, log the disconnect."""
        if self.finished:
            return
        abort(seq)
        self._done(seq, 200 if self.headers_sent else 499, "client_disconnected")

    def _done(self, seq: Sequence, status: int, outcome: str) -> None:
        self.finished = True
        reason = seq.finish_reason
        if outcome == "ok" and reason and self.shape is not None:
            reason = self.shape.finish_reason(reason)
        self.truth.update(
            status=status,
            outcome=outcome,
            output_tokens=seq.generated,
            cached_tokens=seq.cached_tokens,
            finish_reason=reason if outcome == "ok" else (seq.finish_reason or "abort"),
            queue_start=seq.queue_start_wall,
            queue_end=seq.queue_end_wall,
            preemptions=seq.preempted,
        )
        self.on_done(self, self.truth)
        if outcome != "client_disconnected":
            self.conn.finish_response()
