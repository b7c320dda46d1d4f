"""One replica's engine: continuous batching over a KV block pool, stepped in (scaled) real time.

Each step follows vLLM V1's scheduler: running sequences first (one decode token each, or the next
prefill chunk), then waiting ones are admitted while fewer than `max_num_seqs` run, the
`max_num_batched_tokens` budget lasts and KV blocks are free. A running sequence that cannot get a
block preempts the most recently admitted one (recompute: its KV is dropped and it goes back to the
head of the queue). The step then lasts `costmodel.step_seconds(...) * latency_spike / time_scale`
(its per-sequence term counts every sequence in the step),
after which every sequence whose KV caught up with its tokens samples one token and the sink of
each such sequence is called once (one socket write per connection per step).
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections import Counter, deque

from loadline.simulator.config import SimConfig
from loadline.simulator.costmodel import attention_cells, fixed_seconds, step_seconds
from loadline.simulator.faults import FaultState
from loadline.simulator.kvcache import BlockPool, blocks_for
from loadline.simulator.sequence import Sequence
from loadline.simulator.stats import EngineStats

MAX_LAG_S = 0.05  # when the host falls this far behind the model clock, stop catching up


class Engine:
    def __init__(self, index: int, config: SimConfig, faults: FaultState) -> None:
        self.index = index
        self.config = config
        self.faults = faults
        self.rng = random.Random(config.seed * 1000 + index)
        self.pool = BlockPool(config.num_kv_blocks(), config.enable_prefix_caching)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.pending: set[Sequence] = set()  # in the API server's request overhead, not yet queued
        self.in_flight = 0  # requests routed here and not finished (least_conn's measure)
        self.stats = EngineStats()
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.up = True
        self.restarts: Counter = Counter()  # reason -> count
        self.gpu_util = 0.0  # set by the server's housekeeping tick
        self._wake = asyncio.Event()
        self._scale = config.time_scale
        self._epoch = 0

    # ---- requests in and out -------------------------------------------------------------
    def draw_output_len(self) -> int:
        sigma = self.config.output_len_sigma
        mu = math.log(self.config.output_len_mean) - sigma * sigma / 2  # so the mean is output_len_mean
        return max(1, min(self.config.output_len_max, round(self.rng.lognormvariate(mu, sigma))))

    def draw_fault(self, output_target: int) -> int | None:
        if self.faults.error_rate and self.rng.random() < self.faults.error_rate:
            return self.rng.randrange(0, output_target)
        return None

    @property
    def num_waiting(self) -> int:
        return len(self.waiting) + len(self.pending)

    def submit(self, seq: Sequence) -> None:
        """Accept a request: it reaches the queue after the API server's own overhead."""
        seq.replica = self.index
        seq.arrival_m = asyncio.get_running_loop().time()
        self.pending.add(seq)
        delay = self.config.request_overhead_ms * 1e-3 / self._scale
        asyncio.get_running_loop().call_later(delay, self._enqueue, seq)

    def _enqueue(self, seq: Sequence) -> None:
        self.pending.discard(seq)
        if seq.done:
            return
        if not self.up:
            self._fail(seq, f"replica {self.index} is down")
            return
        seq.queued_m = asyncio.get_running_loop().time()
        seq.queue_start_wall = time.time()
        self.waiting.append(seq)
        self._wake.set()

    def abort(self, seq: Sequence) -> None:
        """The client went away: free the sequence's blocks now."""
        if seq.done:
            return
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        self._release(seq)
        seq.done, seq.finish_reason = True, "abort"
        self.stats.success["abort"] += 1

    # ---- replica lifecycle ---------------------------------------------------------------
    def kill(self, reason: str, restart_after_s: float | None) -> bool:
        """Take the replica down, failing everything on it; come back after the delay (model time)."""
        if not self.up:
            return False
        self.up = False
        self._epoch += 1  # a restart timer from an earlier kill must not revive this one early
        self.restarts[reason] += 1
        victims = self.running + list(self.waiting)
        self.running, self.waiting = [], deque()
        for seq in victims:
            self._fail(seq, f"replica {self.index} went down ({reason})")
        self.pool = BlockPool(self.config.num_kv_blocks(), self.config.enable_prefix_caching)
        if restart_after_s is not None:
            self.schedule_start(restart_after_s)
        return True

    def schedule_start(self, after_s: float) -> None:
        """Come back after `after_s` model seconds (the model reload)."""
        epoch = self._epoch
        asyncio.get_running_loop().call_later(after_s / self._scale, self._start_if, epoch)

    def _start_if(self, epoch: int) -> None:
        if epoch == self._epoch:
            self.start()

    def shutdown(self) -> None:
        """Server stopping: every request still here ends with an error event (truth outcome error)."""
        victims = self.running + list(self.waiting) + list(self.pending)
        self.running, self.waiting, self.pending = [], deque(), set()
        for seq in victims:
            self._fail(seq, "server shutting down", outcome="error")

    def start(self) -> None:
        self.up = True
        self._wake.set()

    # ---- the step loop ------------------------------------------------------------------
    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        target = loop.time()
        while True:
            if not self.up or not (self.running or self.waiting):
                self._wake.clear()
                await self._wake.wait()
                target = loop.time()
                continue
            now = loop.time()
            batch, step_tokens, kv_read, cells = self._schedule(now)
            if not batch:  # nothing fits (a leak ate the pool): idle one step, the leak tick decides
                await asyncio.sleep(fixed_seconds(self.config) / self._scale)
                continue
            dt = step_seconds(self.config, step_tokens, kv_read, len(batch), cells)
            dt *= self.faults.latency_spike / self._scale
            # Sleep to an ideal timeline so timer granularity does not accumulate into slower steps.
            target = max(target, now - MAX_LAG_S) + dt
            await asyncio.sleep(max(0.0, target - now))
            self.stats.steps += 1
            self.stats.busy_slots += len(batch)
            self.stats.histograms["iteration_tokens_total"].observe(step_tokens)
            self._complete(batch, loop.time())
            # Busy for as long as the step really took, its tokens' delivery included: on a busy host
            # the sleep overruns and the writes take longer, the clients see the longer step, and so
            # must the GPU utilisation gauge. Counting the model's dt read an engine that always had
            # work as 81-92 % busy at x10 (the catch-up shortens the next sleep by the writes' time),
            # and the gpu-compute verdict missed DOMAIN.md's 95 %.
            self.stats.busy_seconds += loop.time() - now

    def _grow(self, seq: Sequence, tokens: int) -> bool:
        need = blocks_for(tokens, self.config.block_size) - seq.private_blocks - len(seq.shared)
        if need <= 0:
            return True
        if not self.pool.allocate(need):
            return False
        seq.private_blocks += need
        return True

    def _release(self, seq: Sequence) -> None:
        self.pool.release(seq.private_blocks, seq.shared)
        seq.private_blocks, seq.shared = 0, []

    def _preempt_last(self) -> Sequence:
        victim = self.running.pop()
        self._release(victim)
        victim.num_computed, victim.published = 0, False
        victim.preempted += 1
        self.stats.preemptions += 1
        self.waiting.appendleft(victim)
        return victim

    def _grow_or_preempt(self, seq: Sequence, tokens: int) -> bool:
        """Blocks for `tokens`, preempting from the tail of the running list; False if seq itself went."""
        while not self._grow(seq, tokens):
            if self._preempt_last() is seq:
                return False
        return True

    def _schedule(self, now: float) -> tuple[list[tuple[Sequence, int]], int, int, int]:
        """The step's sequences with their token counts, its tokens, the KV it reads and the
        (token, context token) pairs its attention computes."""
        budget = self.config.max_num_batched_tokens
        batch: list[tuple[Sequence, int]] = []
        kv_read = cells = 0
        preemptions_before = self.stats.preemptions
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = min(seq.num_tokens - seq.num_computed, budget)
            if not self._grow_or_preempt(seq, seq.num_computed + n):
                break
            batch.append((seq, n))
            budget -= n
            kv_read += seq.num_computed + n
            cells += attention_cells(seq.num_computed, n)
            i += 1
        preempted = self.stats.preemptions != preemptions_before  # vLLM admits nothing in such a step
        while not preempted and self.waiting and len(self.running) < self.config.max_num_seqs and budget > 0:
            seq = self.waiting[0]
            self._match_prefix(seq)
            n = min(seq.num_tokens - seq.num_computed, budget)
            if not self._grow(seq, seq.num_computed + n):
                self._release(seq)  # do not pin cached blocks while waiting
                seq.num_computed = 0
                break
            self.waiting.popleft()
            self.running.append(seq)
            if seq.scheduled_m is None:
                seq.scheduled_m = now
                seq.queue_end_wall = time.time()
                self.prefix_queries += len(seq.hashes) * self.config.block_size
                self.prefix_hits += len(seq.shared) * self.config.block_size
                seq.cached_tokens = len(seq.shared) * self.config.block_size
            batch.append((seq, n))
            budget -= n
            kv_read += seq.num_computed + n
            cells += attention_cells(seq.num_computed, n)
        return batch, self.config.max_num_batched_tokens - budget, kv_read, cells

    def _match_prefix(self, seq: Sequence) -> None:
        if seq.num_computed or not seq.hashes:
            return
        usable = seq.hashes[: (seq.num_tokens - 1) // self.config.block_size]  # keep >= 1 token to compute
        seq.shared = self.pool.acquire_prefix(usable)
        seq.num_computed = len(seq.shared) * self.config.block_size

    def _complete(self, batch: list[tuple[Sequence, int]], now: float) -> None:
        hist = self.stats.histograms
        itl = hist["inter_token_latency_seconds"]
        generated = 0
        for seq, n in batch:
            if seq.done:  # aborted or killed during the step
                continue
            seq.num_computed += n
            if seq.num_computed < seq.num_tokens:
                continue  # a prefill chunk; the prompt is not finished yet
            if not seq.published and seq.hashes:
                self._publish(seq)
            if seq.fault_at is not None and seq.generated == seq.fault_at:
                self._fail(seq, "simulated engine error (error_rate fault)")
                continue
            seq.num_tokens += 1
            seq.generated += 1
            generated += 1
            if seq.first_m is None:
                seq.first_m = now
                self.stats.prompt_tokens += seq.prompt_len
                hist["time_to_first_token_seconds"].observe(now - seq.arrival_m)
                assert seq.scheduled_m is not None  # scheduled before its first step
                hist["request_prefill_time_seconds"].observe(now - seq.scheduled_m)
            else:
                itl.observe(now - seq.last_m)
            seq.last_m = now
            if seq.generated >= seq.output_target:
                self._finish(seq, now)
            seq.sink.deliver(seq)
        self.stats.generation_tokens += generated
        self.running = [s for s in self.running if not s.done]

    def _publish(self, seq: Sequence) -> None:
        published = self.pool.publish(seq.hashes[len(seq.shared) :])
        seq.private_blocks -= len(published)
        seq.shared.extend(published)
        seq.published = True

    def _finish(self, seq: Sequence, now: float) -> None:
        seq.done, seq.finish_reason = True, seq.finish_reason_target
        self._release(seq)
        self.stats.success[seq.finish_reason] += 1
        h = self.stats.histograms
        assert seq.scheduled_m is not None and seq.first_m is not None  # finished: scheduled, its first token out
        h["e2e_request_latency_seconds"].observe(now - seq.arrival_m)
        h["request_queue_time_seconds"].observe(seq.scheduled_m - seq.queued_m)
        h["request_inference_time_seconds"].observe(now - seq.scheduled_m)
        h["request_decode_time_seconds"].observe(now - seq.first_m)
        if seq.generated > 1:
            h["request_time_per_output_token_seconds"].observe((now - seq.first_m) / (seq.generated - 1))
        h["request_prompt_tokens"].observe(seq.prompt_len)
        h["request_generation_tokens"].observe(seq.generated)

    def _fail(self, seq: Sequence, message: str, outcome: str = "fault") -> None:
        self._release(seq)
        seq.done, seq.finish_reason, seq.error, seq.error_outcome = True, "error", message, outcome
        self.stats.success["error"] += 1
        seq.sink.deliver(seq)
