"""Locustfile of benchmarks/master_intake.py: workers that produce chat-sized records, and no traffic.

Each user puts `INTAKE_RATE` records per second (environment variable, per user) into the worker's
record buffer in 20 ms steps; the worker's own shipper (loadline/runtime/transport.py) sends them to
the master once a second, as in a real run. The rows are built once: the master's side, not the
worker's, is what the benchmark measures. A record is what a 64-token streamed chat reply writes.
"""

from __future__ import annotations

import os
import random
import time

import gevent
from locust import User, constant, task

import loadline.runtime.plugin  # noqa: F401  (the run folder, the shipper, clock sync, the fleet watch)
from loadline.core.identity import worker_id
from loadline.core.records import RequestRecord

STEP_S = 0.02
TOKENS = 64


def chat_record(index: int) -> RequestRecord:
    rng = random.Random(index)
    gaps = [rng.randint(8_000, 30_000) for _ in range(TOKENS - 1)]
    ttft = rng.uniform(80.0, 400.0)
    e2e = ttft + sum(gaps) / 1000.0
    return RequestRecord(
        request_id=f"{worker_id()}-{index:012d}",
        worker_id=worker_id(),
        user_id="u1",
        user_class="ChatSessionUser",
        session_id="s1",
        turn=2,
        endpoint="/v1/chat/completions",
        model="loadline/tiny-sim",
        start_wall=time.time(),
        http_status=200,
        content_type="text/event-stream",
        connect_ms=0.4,
        ttfb_ms=ttft,
        ttft_ms=ttft,
        e2e_ms=e2e,
        tpot_ms=(e2e - ttft) / (TOKENS - 1),
        itl_mean_ms=sum(gaps) / len(gaps) / 1000.0,
        itl_p50_ms=sorted(gaps)[len(gaps) // 2] / 1000.0,
        itl_p99_ms=max(gaps) / 1000.0,
        itl_max_ms=max(gaps) / 1000.0,
        prompt_tokens=512,
        output_tokens=TOKENS,
        tokens_source="usage",
        content_chunks=TOKENS,
        finish_reason="stop",
        clock="kernel",
        read_delay_ms=0.3,
        itl_us=" ".join(map(str, gaps)),
        output_tokens_requested=TOKENS,
        token_counter="server",
        ttfo_ms=ttft,
    )


class IntakeUser(User):
    wait_time = constant(0)

    def on_start(self) -> None:
        self.rate = float(os.environ.get("INTAKE_RATE", "1000"))
        self.rows = [chat_record(i).to_row() for i in range(64)]  # 64 distinct rows, reused
        self.owed = 0.0

    @task
    def produce(self) -> None:
        buffer = self.environment.loadline_records
        started = time.monotonic()
        gevent.sleep(STEP_S)
        self.owed += self.rate * (time.monotonic() - started)
        n = int(self.owed)
        self.owed -= n
        now = time.time()
        for i in range(n):
            row = list(self.rows[i % len(self.rows)])
            row[8] = now  # start_wall: the master puts it on its clock and files it in a phase
            buffer._rows.append(row)  # the buffer's own list: RecordBuffer.add would rebuild the row
        buffer.added += n
        buffer.begun += n
