"""Trace replay: each request of a trace sent at its (warped) time with its lengths and shared prefixes.

One `TraceUser` per process replays that process's share of the schedule (loadline/core/trace_warp.py)
from the start the master set (loadline/runtime/trace.py): the share the master sent (`--trace-file`,
warped on the master), or its share of the schedule file (`--trace-schedule`, written by `loadline
run --trace`). Open loop, as arrival-rate users: the prompt is built before its due
time, then at the due time the request goes to a greenlet with its own keep-alive connection (a
`Lane`), up to this process's share of --max-inflight; a request held by a full pool is sent late
and its lateness (due -> sent) is recorded, never hidden.

Lengths: the prompt is the trace's input length in the target's tokens, template included, its
text built from the request's hash_ids blocks (loadline/client/trace_prompts.py); the reply's is
sent as max_tokens with ignore_eos and min_tokens (vLLM, SGLang, llama.cpp honour them).
"""

from __future__ import annotations

import logging
import time
from typing import ClassVar

import gevent
from gevent.pool import Pool

from loadline.client.trace_control import CONTROL
from loadline.client.trace_prompts import BlockTexts
from loadline.client.users.base import Lane, LLMUser, PromptPlan
from loadline.core.errors import UsageError
from loadline.core.runsettings import wall_span
from loadline.core.trace_warp import Scheduled, load, share

log = logging.getLogger("loadline")

STOP_GRACE_S = 1.0
# A request's greenlet is handed its lane this long before its due time and waits out the rest itself,
# the last SPIN_S by yielding to the loop (gevent.sleep(0)) rather than on a timer: a timer wakes up
# to a loop iteration late, and the handoff (spawn, lane) must not come out of the request's time.
HANDOFF_S = 0.005
SPIN_S = 0.002
NO_START_WARNING_S = 10.0
_schedules: dict[str, tuple[dict, list[Scheduled]]] = {}  # per process: a schedule file read once


def schedule_file(path: str) -> tuple[dict, list[Scheduled]]:
    if path not in _schedules:
        _schedules[path] = load(path)
    return _schedules[path]


class TraceUser(LLMUser):
    """Replays a trace (`loadline run --trace FILE`): one user per process, each with its share."""

    kind = "trace"
    live: ClassVar[set[TraceUser]] = set()

    def on_start(self) -> None:
        super().on_start()
        self.lanes: list[Lane] = []
        self.pool: Pool | None = None

    def on_stop(self) -> None:
        TraceUser.live.discard(self)
        if self.pool is not None:
            self.pool.kill(timeout=STOP_GRACE_S)
        for lane in self.lanes:
            lane.conn.close()
        super().on_stop()

    def replay(self) -> None:
        self.check_settings()
        s = self.settings
        assert s is not None and s.arrivals is not None
        if TraceUser.live:  # one replayer per process: its share is the process's
            log.warning("trace user: one per process replays the trace; this one idles")
            self._idle()
        TraceUser.live.add(self)
        options = self.environment.parsed_options
        path = str(getattr(options, "trace_schedule", "") or "")
        header: dict = {}
        requests: list[Scheduled] = []
        if not path and not getattr(options, "trace_file", ""):
            log.error("loadline: trace users need --trace-file FILE or --trace-schedule (loadline run --trace FILE)")
            self._idle()
        try:
            if path:  # read before the start: the master's message then finds it ready
                header, requests = schedule_file(path)
        except UsageError as exc:
            log.error("loadline: %s", exc)
            self._idle()
        waited = time.monotonic()
        while not CONTROL.ready.wait(1.0):
            if time.monotonic() - waited > NO_START_WARNING_S:
                log.warning("trace user: the master has not started the replay (is the trace shape running?)")
                waited = time.monotonic()
        start = CONTROL.start_wall
        assert start is not None  # set with ready
        if CONTROL.requests is not None:  # the master warped the trace (--trace-file) and sent this share
            mine, block = CONTROL.requests, CONTROL.block_tokens
        else:
            mine, block = share(requests, CONTROL.share, CONTROL.shares), int(header.get("block_tokens", 512))
        self.pool = Pool(max(1, -(-s.arrivals.max_inflight // CONTROL.shares)))
        texts = BlockTexts(self.tokens, block or 512, seed=self.text_rng.getrandbits(32))
        scale = s.time_scale
        log.info("trace share %d/%d: %d requests", CONTROL.share + 1, CONTROL.shares, len(mine))
        for r in mine:
            messages, counted = texts.messages(r.hash_ids, r.input_tokens)
            plan = PromptPlan(messages, counted, max(1, r.output_tokens))
            body = self.body(messages, plan.max_tokens)
            body["ignore_eos"], body["min_tokens"] = True, plan.max_tokens
            due = start + wall_span(r.due_s, scale)  # the schedule is model time, the wait wall time
            wait = due - time.time() - HANDOFF_S
            if wait > 0:
                gevent.sleep(wait)
            lane = self.lanes.pop() if self.lanes else self.open_lane()
            lane.due_wall, lane.trace_index = due, r.trace_index
            self.pool.spawn(self._send, lane, body, plan, r)  # blocks while the pool is full: sent late
            # the next prompt is built once this one is on its way: building it now would hold the loop
            # (milliseconds for a long prompt) just when this request is due
            _until(due)
            gevent.sleep(0)
        self.pool.join()
        log.info("trace share %d/%d: all %d requests sent", CONTROL.share + 1, CONTROL.shares, len(mine))
        self._idle()

    def _send(self, lane: Lane, body: dict, plan: PromptPlan, r: Scheduled) -> None:
        try:
            _until(lane.due_wall or 0.0)
            self.send(body, r.session, r.turn, lane=lane, plan=plan)
        finally:
            lane.due_wall = lane.trace_index = None
            self.lanes.append(lane)

    @staticmethod
    def _idle() -> None:
        """The replay is done (or cannot run): wait for the test's end without running the task again."""
        while True:
            gevent.sleep(3600)


def _until(due_wall: float) -> None:
    """Wait until time.time() reaches due_wall: a timer for most of it, yields for the last SPIN_S."""
    for _ in range(1_000_000):  # bounded: ~1 us per yield, far beyond SPIN_S + HANDOFF_S
        left = due_wall - time.time()
        if left <= 0:
            return
        gevent.sleep(left - SPIN_S if left > SPIN_S else 0)


TraceUser.tasks = [TraceUser.replay]
