"""What Locust's stats see of a request: one E2E event per finished attempt, and its token rows.

`report_attempt` fires exactly one Locust request event per finished attempt (so the Aggregated row
counts one per request; a cancelled stream fires none) and logs TTFT, TPOT and ITL straight into
rows of their own, which Locust's web UI, CSV and HTML show but which never enter the Aggregated
row. A failure's message is its error class (and HTTP status): Locust groups failures by message.

One Locust stats update per request for its inter-token gaps, instead of one `log()` per gap:

`StatsEntry.log(rt, length)` per gap cost ~4.5 % of the generator's CPU at 256 streams (the
generator's profile). Locust 2.47 has no bulk path, so `log_many` does, in one pass over a request's gaps,
exactly what that many `log(rt, 0)` calls would do to the entry: request count, per-second count,
total/min/max, and the rounded-bucket histogram (`locust.stats.bucket_response_time`, looked up
at call time because Locust lets a test replace it). The ITL row keeps its meaning: one sample
per gap, pooled across requests; only the per-second counter sees all of a request's gaps at the
second it ended (as the per-gap calls also did: they all ran when the request was finished).
"""

from __future__ import annotations

import time
from collections import Counter

import locust.stats
from locust.stats import StatsEntry

from loadline.core.records import OK, ErrorClass, RequestRecord


class LLMError(Exception):
    """What Locust's failure table shows for a failed attempt: its error class (and HTTP status).

    Kept short on purpose: Locust groups failures by message; the details are in the record."""


def report_attempt(environment, name: str, endpoint: str, rec: RequestRecord, gaps_us: list[int]) -> None:
    """One finished attempt into Locust's stats: the E2E event, then its TTFT, TPOT and ITL rows."""
    exception = None
    if rec.status != OK:
        status = f" {rec.http_status}" if rec.error_class in (ErrorClass.HTTP, ErrorClass.INVALID_REQUEST) else ""
        exception = LLMError(rec.error_class + status)
    environment.events.request.fire(
        request_type="E2E",
        name=name,
        response_time=rec.e2e_ms,
        response_length=rec.output_tokens,
        exception=exception,
        context={"request_id": rec.request_id},
        start_time=rec.start_wall,
        url=endpoint,
        response=None,
    )
    stats = environment.stats
    if rec.ttft_ms is not None:
        stats.get(name, "TTFT").log(rec.ttft_ms, rec.output_tokens)
    if rec.tpot_ms is not None:
        stats.get(name, "TPOT").log(rec.tpot_ms, rec.output_tokens)
    if gaps_us:
        # one sample per gap (pooled ITL, live), logged in one update per request
        log_many(stats.get(name, "ITL"), [gap / 1000 for gap in gaps_us])


def log_many(entry: StatsEntry, values_ms: list[float]) -> None:
    """Log every value as one sample with no content length, like `entry.log(v, 0)` for each."""
    if not values_ms:
        return
    now = time.time()
    second = int(now)
    if entry.use_response_times_cache and entry.last_request_timestamp and second > int(entry.last_request_timestamp):
        entry._cache_response_times(second - 1)  # what log() does first, once per new second
    count = len(values_ms)
    entry.num_requests += count
    entry.num_reqs_per_sec[second] += count
    entry.last_request_timestamp = now
    # Locust annotates these three times int; its own log() stores the float times it is given, as here
    entry.total_response_time += sum(values_ms)  # type: ignore[assignment]  # Locust's int: float times
    low, high = min(values_ms), max(values_ms)
    lowest = entry.min_response_time
    entry.min_response_time = low if lowest is None else min(lowest, low)  # type: ignore[assignment]  # float times
    entry.max_response_time = max(entry.max_response_time, high)  # type: ignore[assignment]  # float times
    histogram = entry.response_times
    for bucket, n in Counter(map(locust.stats.bucket_response_time, values_ms)).items():
        histogram[bucket] += n
