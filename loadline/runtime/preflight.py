"""Before the load: can this machine give trustworthy numbers at the requested time scale?

A time-scaled run (`--time-scale X`) multiplies every millisecond the client adds by X: a 20x run on
a machine whose scheduler makes a process wait 5 ms reports 100 ms of "model time" the engine never
had. So before any load, `loadline run` measures how late this machine wakes a process: how much
longer than asked a 1 ms sleep takes, over ~0.3 s (the same quantity the generator's self-check
samples as event-loop lag during the run). That delay x scale is compared with the smallest
per-request SLO limit (TTFT/E2E; the stamps of one request carry it whole).

The threshold is the metrology "rule of ten" (an instrument ten times finer than the tolerance it
checks): stricter than the report's 4:1 (analysis/verdict/validity.py) because this is a lower
bound, measured before the run's own load (generator, simulator) competes for the same cores. The
report then measures the real floor (truth log or loop lag) and says whether it mattered.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from loadline.core.runsettings import model_value
from loadline.core.slo import SLO

SAMPLES = 150
SLEEP_S = 0.001
RULE_OF_TEN = 10.0
PER_REQUEST_LIMITS = ("ttft_p95_ms", "ttft_p99_ms", "e2e_p95_ms", "e2e_p99_ms")


@dataclass(frozen=True)
class WakeDelay:
    p50_ms: float
    p95_ms: float
    samples: int


def wake_delay(samples: int = SAMPLES, sleep_s: float = SLEEP_S) -> WakeDelay:
    """How much later than asked this process wakes from a short sleep (ms), bounded to ~samples x 2 ms."""
    late = []
    for _ in range(samples):
        start = time.perf_counter()
        time.sleep(sleep_s)
        late.append(max(0.0, (time.perf_counter() - start - sleep_s) * 1000))
    late.sort()
    return WakeDelay(late[len(late) // 2], late[min(len(late) - 1, int(0.95 * len(late)))], len(late))


def smallest_limit(slo: SLO) -> tuple[str, float] | None:
    """(field, ms) of the tightest per-request latency limit the SLO sets."""
    limits = [(name, float(getattr(slo, name))) for name in PER_REQUEST_LIMITS if getattr(slo, name, None) is not None]
    return min(limits, key=lambda item: item[1]) if limits else None


def timescale_warning(delay: WakeDelay, scale: float, slo: SLO) -> str | None:
    """One line when delay x scale takes more than a tenth of the smallest per-request limit, else None."""
    limit = smallest_limit(slo)
    if limit is None or delay.p95_ms <= 0:
        return None
    name, ms = limit
    model_ms = model_value("p95_ms", delay.p95_ms, scale)
    if model_ms * RULE_OF_TEN <= ms:
        return None
    trustworthy = ms / RULE_OF_TEN / delay.p95_ms
    advice = (
        f"use --time-scale {max(1.0, trustworthy):.0f} or lower"
        if trustworthy >= 1
        else "even real time is marginal on this machine now: free some CPU"
    )
    label = name.removesuffix("_ms").replace("_", " ").upper()
    return (
        f"at --time-scale {scale:g} this machine's wake-up delay (P95 {delay.p95_ms:.1f} ms before any load) is "
        f"{model_ms:,.0f} ms of model time, {model_ms / ms:.0%} of the smallest SLO limit ({label} {ms:,.0f} ms): "
        f"latencies will carry the client's own delay; {advice} (the report measures the real floor)"
    )
