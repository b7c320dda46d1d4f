"""When is the load generator too busy to measure honestly? The thresholds, shared by the live web UI
(loadline/runtime/webui.py, no pandas) and the report's judge (analysis/verdict/generator.py).

Saturation: sustained, not a blip. A gevent process is single-threaded, so 90 % of one core leaves
no room for bursts of token events; 20 ms of loop lag is larger than typical ITLs (10-25 ms,
REFERENCE-serving.md), so every gap measured while it lasts is the client's, not the server's.
The 90 % is of the generator's *demand* for its core: the time it ran plus the time it was ready
to run but waited for a core that a neighbour held (Linux schedstat's run delay). On a shared
machine a starved generator gets only its share (65 % of a core beside two busy processes on 2
cores, measured in this suite's CI) and never reaches 90 % of CPU, yet every read it makes waits
as long as if its own work had filled the core: the waiting counts like the running. (Run-queue
latency is the CPU's saturation metric in Brendan Gregg's USE method; schedstat's run delay is that
latency for one thread.) Measured in this suite's CI (2 cores, three test processes): light chat
generators reach 35-80 % demand, mostly waiting; the 160-user generator 100 %.
"Sustained" = the median over a rolling window of samples, so single GC pauses or a noisy
neighbour's spike do not flag a run.

Behind (read delay, `read_delay_ms` per kernel-stamped record: how long bytes of a read may have
waited in the socket): TCP merges segments that wait together and the merged read keeps only
the newest segment's stamp (loadline/client/kernel_clock.py); a read that carried several writes
counts its oldest bytes' bound (loadline/client/connection.py). A read delay below one gap between
server writes means one write per read, so every stamp is exact; once a phase's read delay p99
exceeds the phase's typical gap (its ITL p50), at least 1 % of replies had tokens stamped late (the
earlier tokens of a merged read get the later stamp) and TTFT/ITL are no longer the server's alone.
Without an ITL (non-streaming, one-token replies) the loop-lag bound above stands in.
A server that writes several tokens together (an engine catching up after a stall, as the simulator
does on a busy host; a proxy that buffers SSE) gives the same reads as a late generator, with true
stamps. What tells them apart is what the generator was doing: a merged read counts its oldest bytes
only for as long as the process was busy (on a core or waiting for one) since the body reader last
saw its sockets empty (loadline/client/idle_clock.py). An idle generator's merged reads so stay
below a gap; a busy one's keep their bound, which errs on the side of doubt.
"""

from typing import Any, overload

CPU_SATURATED_PCT = 90.0
LOOP_LAG_SATURATED_MS = 20.0
SUSTAIN_SAMPLES = 5
READ_DELAY_QUANTILE = 0.99  # "at least 1 % of replies"
READ_DELAY_FALLBACK_MS = LOOP_LAG_SATURATED_MS  # no ITL to compare with
READ_DELAY_MIN_RECORDS = 20  # a p99 of fewer kernel-stamped replies is one outlier's value


@overload
def demand_percent(cpu_percent: float, wait_percent: float) -> float: ...
@overload
def demand_percent(cpu_percent: Any, wait_percent: Any) -> Any: ...  # pandas Series (no pandas import in core)
def demand_percent(cpu_percent: Any, wait_percent: Any) -> Any:
    """A worker's demand for its core, % of it: the time it ran plus the time it waited for it (above).
    Numbers or pandas Series alike (the web UI's row and the report's judge); a wait not measured is 0."""
    return cpu_percent + wait_percent
