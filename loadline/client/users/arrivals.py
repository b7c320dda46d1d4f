"""Open-loop users: requests (or chat sessions) start when an arrival process says, not when a reply ends.

One `ArrivalRateUser` is a scheduler: it draws the next due time from the arrival process
(loadline/client/arrivals.py) at its share of the target rate, and at that time hands the request to
a greenlet of its own with its own keep-alive connection (a `Lane`), up to its share of
--max-inflight. An arrival over the cap waits for a free slot: it is sent late, and its lateness
(due -> sent) is recorded, so the time a user would have waited is never hidden (coordinated omission).

The rate is split between processes by the master (loadline/runtime/arrivals.py: each worker takes
rate / workers), then between the ArrivalRateUsers of one process (normally one per process:
`loadline run --scenario rate` starts as many users as processes). Superposed Poisson schedulers are
again Poisson at the summed rate; constant and gamma processes are exact only with one scheduler.
"""

from __future__ import annotations

import logging
import random
import time
from time import perf_counter
from typing import ClassVar

from gevent.pool import Pool

from loadline.client.arrivals import CONTROL, next_gap
from loadline.client.users.base import Lane
from loadline.client.users.chat import ChatSessionUser
from loadline.client.users.events import event_plan

log = logging.getLogger("loadline")

NO_RATE_WARNING_S = 5.0  # a scheduler with no rate for this long says so once (no --arrival-rate, no rate shape)
STOP_GRACE_S = 1.0  # on stop, requests in flight are cancelled (recorded as such) within this


class ArrivalRateUser(ChatSessionUser):
    """Open loop: single-shot requests (or, with --arrival-sessions, chat sessions) at --arrival-rate per second.

    The arrival process is --arrival (constant, poisson, gamma with --burstiness); at most
    --max-inflight in flight over all workers. Start one user per process; rate shapes set the rate.
    """

    kind = "rate"
    live: ClassVar[set[ArrivalRateUser]] = set()  # this process's schedulers (they share its rate)

    def on_start(self) -> None:
        super().on_start()
        ArrivalRateUser.live.add(self)
        self.lanes: list[Lane] = []
        self.pool: Pool | None = None

    def on_stop(self) -> None:
        ArrivalRateUser.live.discard(self)
        if self.pool is not None:
            self.pool.kill(timeout=STOP_GRACE_S)  # in-flight requests end as `cancelled` records
        for lane in self.lanes:
            lane.conn.close()
        super().on_stop()

    def schedule(self) -> None:
        self.check_settings()
        assert self.settings is not None  # check_settings passed
        arrivals = self.settings.arrivals
        assert arrivals is not None  # UserSettings.from_options always sets it
        sharing = max(1, len(ArrivalRateUser.live))
        self.pool = Pool(max(1, CONTROL.process_cap(arrivals.max_inflight) // sharing))
        rng = random.Random(self.rng.random())  # arrivals independent of prompt choices
        perf0, wall0 = perf_counter(), time.time()
        due = perf0
        warned = False
        seen = CONTROL.version
        while True:
            rate = CONTROL.process_rate()
            if not rate:
                if CONTROL.total is None and not warned and perf_counter() - perf0 > NO_RATE_WARNING_S:
                    log.warning("arrival-rate user: no rate set (give --arrival-rate R or a rate shape)")
                    warned = True
                CONTROL.wait(0.5)
                due, seen = perf_counter(), CONTROL.version
                continue
            due += next_gap(arrivals.process, rate / max(1, len(ArrivalRateUser.live)), arrivals.burstiness, rng)
            # the rate changed, while this waited or while it was held by a full pool (a flood's backlog:
            # its unsent arrivals are not owed at the next rate): the next gap is drawn at the new rate, from now
            if CONTROL.wait(due - perf_counter()) or CONTROL.version != seen:
                due, seen = perf_counter(), CONTROL.version
                continue
            lane = self.lanes.pop() if self.lanes else self.open_lane()
            lane.due_wall = wall0 + (due - perf0)
            # blocks while the pool is full: this arrival (and the ones behind it) are sent late
            self.pool.spawn(self._arrive, lane)

    def _arrive(self, lane: Lane) -> None:
        try:
            s = self.settings
            assert s is not None and s.arrivals is not None  # spawned by schedule, which checked both
            if s.arrivals.sessions:
                self.converse(lane)
            else:
                plan = event_plan(self)
                self.send(self.body(plan.messages, plan.max_tokens), lane=lane, plan=plan)
        finally:
            lane.due_wall = None
            self.lanes.append(lane)


# Locust adds a base class's tasks to a subclass's: the chat session task must not run here.
ArrivalRateUser.tasks = [ArrivalRateUser.schedule]
