"""The one SLO judge: which criteria apply to a window of traffic, and did each pass?

Pure Python (no pandas): the stepped shape's stop rule (shapes/stop_rule.py), the web UI tab
(loadline/runtime/webui.py) and the report's gate (analysis/verdict/gate.py) all call `judge`, so
a window gets the same answer live and in the report.

Which criteria apply (DOMAIN.md "Pass criteria": E2E P95/P99 for request-response calls, TTFT for
streaming):
- streaming traffic: TTFT P95/P99 and per-token time (ITL and TPOT P95/P99); TTFO P95/P99 (the
  answer's first token, after any reasoning) when the SLO sets them (loadline/core/slo.py says why
  TTFT is the default). E2E P95/P99 only when the SLO sets `gate_e2e_on_streams = true`: a healthy
  256-token stream takes seconds end to end.
- request-response traffic (`--non-streaming`): E2E P95/P99. TTFT, ITL and TPOT do not apply (one
  body, no first token or token gaps worth the name).
- unknown (e.g. a plain Locust CSV): every latency criterion the SLO sets.
- the error rate, always.

The comparison, everywhere: a criterion passes iff measured <= limit (`within`). A criterion that
applies but has no measured value (no data) is "not judged": it neither passes nor fails, and the
judgement says so (`Judgement.passed` is None then, never True).

Measured values are given in the SLO's units and clock: milliseconds of model time (a time-scaled
run's latencies already multiplied by its scale, loadline/core/timescale.py) and the error rate as a
fraction. Their keys are the SLO field names without the `max_` (`ttft_p95_ms`, `error_rate`), as in
the live window (loadline.runtime.live.WindowSummary) and the report's phase table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from loadline.core.slo import SLO

PASSED, FAILED, NOT_JUDGED = "passed", "failed", "not judged"

# SLO field (= measured key) -> display name, in report order
LATENCY = {
    "e2e_p95_ms": "E2E P95",
    "e2e_p99_ms": "E2E P99",
    "ttft_p95_ms": "TTFT P95",
    "ttft_p99_ms": "TTFT P99",
    "itl_p95_ms": "ITL P95",
    "itl_p99_ms": "ITL P99",
    "tpot_p95_ms": "TPOT P95",
    "tpot_p99_ms": "TPOT P99",
    "ttfo_p95_ms": "TTFO P95",
    "ttfo_p99_ms": "TTFO P99",
}
E2E = ("e2e_p95_ms", "e2e_p99_ms")
ERROR_RATE = "error_rate"
# per-request percentiles and their quantile; ITL pools every token gap of a window (many per request)
PER_REQUEST_Q = {
    "e2e_p95_ms": 0.95,
    "e2e_p99_ms": 0.99,
    "ttft_p95_ms": 0.95,
    "ttft_p99_ms": 0.99,
    "tpot_p95_ms": 0.95,
    "tpot_p99_ms": 0.99,
    "ttfo_p95_ms": 0.95,
    "ttfo_p99_ms": 0.99,
}
RANK_WIDTHS = 2.0  # ~95 % of sample quantiles fall within two rank widths of the true one


def min_samples(q: float) -> int:
    """The fewest values whose q-quantile is not simply the maximum (or minimum) of the window.

    The rank of a sample quantile from n values scatters by sqrt(n q (1-q)) ranks; the estimate
    stands apart from the extremes only when the n (1-q) values beyond it exceed two of those
    widths: n >= 4 q / (1-q). A P95 needs 76 (with fewer it is one or two hiccups), a median 4.
    """
    return math.ceil(RANK_WIDTHS**2 * q / (1 - q) - 1e-9)


def too_few_samples(key: str, requests: float) -> bool:
    """A per-request percentile from fewer requests than `min_samples`: its value is the slowest one's."""
    q = PER_REQUEST_Q.get(key)
    return q is not None and requests < min_samples(q)


def within(value: float, limit: float) -> bool:
    """The one SLO comparison: a value exactly at its limit passes."""
    return value <= limit


def format_value(value: float, unit: str) -> str:
    """A criterion's value as the report prints it: "53.39%" for a fraction, "912 ms" for a latency."""
    return f"{value:.2%}" if unit == "fraction" else f"{value:,.0f} {unit}"


@dataclass(frozen=True)
class Check:
    """One criterion judged on one window."""

    key: str  # measured key / SLO field, e.g. "ttft_p95_ms", "error_rate"
    name: str  # "TTFT P95", "error rate"
    limit: float
    measured: float | None  # None: no data
    outcome: str  # PASSED | FAILED | NOT_JUDGED
    why: str  # why the criterion applies to this traffic
    unit: str = "ms"  # "ms" | "fraction"

    @property
    def passed(self) -> bool | None:
        return None if self.outcome == NOT_JUDGED else self.outcome == PASSED

    @property
    def threshold(self) -> str:
        return f"<= {self.limit:.2%}" if self.unit == "fraction" else f"<= {self.limit:g} ms"

    def describe(self) -> str:
        """One line: "TTFT P95 912 ms > 800 ms", "E2E P95 not judged (no data)"."""
        if self.measured is None:
            return f"{self.name} not judged (no data; limit {self.threshold})"
        return (
            f"{self.name} {format_value(self.measured, self.unit)} {'<=' if self.outcome == PASSED else '>'} "
            f"{format_value(self.limit, self.unit)}"
        )


@dataclass(frozen=True)
class Judgement:
    checks: tuple[Check, ...]  # the criteria that apply, in report order
    not_applied: tuple[tuple[str, str], ...]  # (name, why not) of criteria the SLO sets that do not apply

    @property
    def failed(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.outcome == FAILED)

    @property
    def not_judged(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.outcome == NOT_JUDGED)

    @property
    def passed(self) -> bool | None:
        """False: a criterion failed; None: none failed but some could not be judged; True: all passed."""
        if self.failed:
            return False
        return None if self.not_judged else True

    def summary(self) -> str:
        if self.failed:
            return "; ".join(c.describe() for c in self.failed)
        if self.not_judged:
            names = ", ".join(c.name for c in self.not_judged)
            return f"no criterion failed, but not judged (no data): {names}"
        return "every criterion passed"


def applicability(slo: SLO, streaming: bool | None) -> tuple[dict[str, str], dict[str, str]]:
    """(latency field -> why it applies, latency field -> why not) for the fields the SLO sets."""
    applies: dict[str, str] = {}
    skipped: dict[str, str] = {}
    for key in LATENCY:
        if getattr(slo, key) is None:
            continue
        if streaming is None:
            applies[key] = "traffic kind unknown: every latency criterion set applies"
        elif key in E2E and not streaming:
            applies[key] = "non-streaming calls: end-to-end time is the user's wait"
        elif key in E2E and slo.gate_e2e_on_streams:
            applies[key] = "streaming, and the SLO sets gate_e2e_on_streams = true"
        elif key in E2E:
            skipped[key] = (
                "streaming: a long reply takes seconds by design, so streams are judged on TTFT "
                "and per-token time; gate_e2e_on_streams = true judges E2E too"
            )
        elif streaming:
            applies[key] = _STREAM_WHY[key[:4]]
        else:
            skipped[key] = "non-streaming calls have no first token or token gaps"
    return applies, skipped


_STREAM_WHY = {
    "ttft": "streaming: time to first token is the user's wait",
    "ttfo": "streaming, and the SLO sets it: time to the answer's first token (after any reasoning) is the wait",
    "itl_": "streaming: per-token time is how smoothly the reply arrives",
    "tpot": "streaming: per-token time is how smoothly the reply arrives",
}


def judges_itl(slo: SLO, streaming: bool | None) -> bool:
    """Whether an ITL criterion applies: pooled ITL percentiles are costly live, asked for only then."""
    return any(key.startswith("itl_") for key in applicability(slo, streaming)[0])


def values_of(source: object) -> dict[str, float | None]:
    """The judge's input from an object with the measured keys as attributes (a live window summary)."""
    return {key: getattr(source, key, None) for key in (*LATENCY, ERROR_RATE)}


def _value(measured: Mapping[str, float | None], key: str) -> float | None:
    value = measured.get(key)
    if value is None or isinstance(value, bool):
        return None
    value = float(value)
    return None if math.isnan(value) else value


def judge(
    slo: SLO, measured: Mapping[str, float | None], streaming: bool | None, max_error_rate: float | None = None
) -> Judgement:
    """Judge one window's `measured` values (see the module docstring for keys, units and rules).

    `max_error_rate` replaces the SLO's error limit (the stepped stop rule's `--step-max-error-rate`:
    one stray error must not end a capacity search, while the report's gate allows none).
    """
    applies, skipped = applicability(slo, streaming)
    checks = [
        _check(key, LATENCY[key], float(getattr(slo, key)), _value(measured, key), why, "ms")
        for key, why in applies.items()
    ]
    error_limit = slo.max_error_rate if max_error_rate is None else max_error_rate
    checks.append(
        _check(
            ERROR_RATE,
            "error rate",
            float(error_limit),
            _value(measured, ERROR_RATE),
            "always: failed requests are failed users",
            "fraction",
        )
    )
    return Judgement(tuple(checks), tuple((LATENCY[key], why) for key, why in skipped.items()))


def _check(key: str, name: str, limit: float, value: float | None, why: str, unit: str) -> Check:
    outcome = NOT_JUDGED if value is None else (PASSED if within(value, limit) else FAILED)
    return Check(key, name, limit, value, outcome, why, unit)


def request_limits_ms(slo: SLO) -> list[float]:
    """The per-request latency limits the SLO sets (E2E and TTFT), whatever the traffic."""
    return [getattr(slo, key) for key in (*E2E, "ttft_p95_ms", "ttft_p99_ms") if getattr(slo, key) is not None]
