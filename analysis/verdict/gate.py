"""The SLO gate: every criterion with its threshold, measured value, verdict and why it applies.

The criteria and the comparison are the one SLO judge's (loadline/core/judge.py): streaming runs
are judged on TTFT and per-token time, request-response runs on E2E, the error rate always, and a
value exactly at its limit passes. Latency and error criteria are judged per phase and the run
passes one only if *every* phase does ("P95 stayed under 1,500 ms"); the measured value is the worst
phase's, named (the comparison is monotone, so the worst phase decides). So a stepped run that is
pushed past its break point fails the gate by design; gate CI on a constant-load run at the target
rate. The throughput criterion (only with `target_qps`) takes the best phase that met every other
criterion. An open-loop run also passes only if every phase was offered its arrival rate, on
time (`open_loop_criteria`, from analysis/stats/arrivals.py's phases): replies timed from when a
request was sent prove nothing about a rate that was not sent, or sent late. A criterion with no data (e.g. TTFT from a plain Locust CSV) is "not judged": it does not
fail the gate, `gate_note` says the pass is incomplete, and the report calls such a run INCOMPLETE
with exit 1, never a silent PASS: an SLO file that sets the criterion to "none"
gates without it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from loadline.analysis.stats import compliance
from loadline.core.arrival_rate import MIN_ACHIEVED
from loadline.core.judge import ERROR_RATE, LATENCY, applicability, judge
from loadline.core.slo import SLO


@dataclass
class Criterion:
    name: str
    threshold: str  # human form, e.g. "<= 1500 ms"
    limit: float
    measured: float | None
    passed: bool | None  # None: not judged (no data)
    where: str = ""  # the phase (or server series) that decided it
    unit: str = "ms"  # ms | fraction | req/s | restarts
    why: str = ""  # why the criterion applies to this run

    def as_dict(self) -> dict:
        measured = None if self.measured is None or math.isnan(self.measured) else round(self.measured, 6)
        return {
            "name": self.name,
            "threshold": self.threshold,
            "limit": self.limit,
            "measured": measured,
            "passed": self.passed,
            "where": self.where,
            "unit": self.unit,
            "why": self.why,
        }


def _worst(table: pd.DataFrame, column: str) -> tuple[float | None, str]:
    values = pd.to_numeric(table[column], errors="coerce").dropna() if column in table else pd.Series(dtype=float)
    if values.empty:
        return None, ""
    at = values.idxmax()
    return float(values.loc[at]), str(table.loc[at, "label"])


def evaluate(table: pd.DataFrame, slo: SLO, streaming: bool | None = None) -> list[Criterion]:
    """The gate's criteria over a phase table in model time; `streaming`: the run's traffic (None: unknown)."""
    judged = compliance.judged(table)
    worst = {key: _worst(judged, key) for key in (*LATENCY, ERROR_RATE)}
    judgement = judge(slo, {key: value for key, (value, _) in worst.items()}, streaming)
    criteria = [
        Criterion(
            c.name,
            c.threshold,
            c.limit,
            c.measured,
            c.passed,
            worst[c.key][1] if c.measured is not None else "no data in any phase",
            c.unit,
            c.why,
        )
        for c in judgement.checks
    ]
    if slo.target_qps is not None:
        need = slo.target_qps * slo.safety_factor
        good = compliance.compliant_phases(table, slo, streaming)
        best, where = _worst(good, "rps")
        criteria.append(
            Criterion(
                "throughput within SLO",
                f">= {need:g} req/s ({slo.target_qps:g} x {slo.safety_factor:g})",
                need,
                best if best is not None else 0.0,
                (best or 0.0) >= need,
                where,
                unit="req/s",
                why="target_qps is set: the best phase that met every other criterion",
            )
        )
    return criteria


def recovery_criteria(entries: list[dict], recovery_s_max: float | None) -> list[Criterion]:
    """The drill objective `recovery_s_max` (SLO file) as a gate criterion; [] when not set."""
    if recovery_s_max is None:
        return []
    threshold = f"< {recovery_s_max:g} s"
    if not entries:
        return [Criterion("recovery time", threshold, recovery_s_max, None, None, "no surge or fault in the run", "s")]
    stuck = [e for e in entries if not e["recovered"]]
    if stuck:
        worst = stuck[0]
        where = f"{worst['phase']}: not recovered before the phase ended (>= {worst['phase_s'] - worst['disturbance_at_s']:g} s)"
        return [
            Criterion(
                "recovery time",
                threshold,
                recovery_s_max,
                worst["phase_s"] - worst["disturbance_at_s"],
                False,
                where,
                "s",
            )
        ]
    worst = max(entries, key=lambda e: e["recovery_s"])
    return [
        Criterion(
            "recovery time",
            threshold,
            recovery_s_max,
            worst["recovery_s"],
            worst["recovery_s"] < recovery_s_max,
            worst["phase"],
            "s",
        )
    ]


def open_loop_criteria(phases: list[dict], lateness_limit_ms: float | None) -> list[Criterion]:
    """Open loop (analysis/stats/arrivals.py phase rows, model time): the rate offered and the schedule kept.

    The worst phase decides each: the smallest share of its target rate sent (short = below 98 % of it by
    more than the arrival process's noise, loadline/core/arrival_rate.py) and the largest lateness P95."""
    rated = [p for p in phases if (_finite(p.get("target_rate")) or 0) > 0]
    if not rated:
        return []
    share = {p["phase"]: (_finite(p.get("achieved_rate")) or 0.0) / p["target_rate"] for p in rated}
    short = [p["phase"] for p in rated if p.get("short")]
    where = short[0] if short else min(share, key=share.__getitem__)
    out = [
        Criterion(
            "arrival rate offered",
            f">= {MIN_ACHIEVED:.0%} of each phase's target, beyond the arrival noise",
            MIN_ACHIEVED,
            share[where],
            not short,
            where,
            unit="fraction",
            why="open loop: latency measured at a rate that was not sent says nothing about that rate",
        )
    ]
    late = {p["phase"]: v for p in rated if (v := _finite(p.get("lateness_p95_ms"))) is not None}
    if lateness_limit_ms is not None and late:
        worst = max(late, key=late.__getitem__)
        out.append(
            Criterion(
                "arrival lateness P95",
                f"<= {lateness_limit_ms:g} ms",
                lateness_limit_ms,
                late[worst],
                late[worst] <= lateness_limit_ms,
                worst,
                why="open loop: a request sent late was felt late by its user; latency is timed "
                "from sent (10 % of the SLO's latency budget, analysis/stats/arrivals.py)",
            )
        )
    return out


def _finite(value: object) -> float | None:
    """A number from a phase row (to_dict turns a missing value into NaN), else None."""
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def not_applied(slo: SLO, streaming: bool | None) -> list[dict]:
    """The latency criteria the SLO sets that do not apply to this run, each with the reason."""
    _, skipped = applicability(slo, streaming)
    return [{"name": LATENCY[key], "why": why} for key, why in skipped.items()]


def unjudged(criteria: list[Criterion]) -> list[str]:
    """The judge's criteria that apply to this run but had no data (e.g. TTFT from a plain Locust CSV).

    Only the judge's criteria count (they carry `why`); server-side ones (GPU memory, OOM restarts)
    are documented as judged only when scraped and say "not measured" in their own row."""
    return [c.name for c in criteria if c.passed is None and c.why]


def gate_note(criteria: list[Criterion]) -> str | None:
    """Said beside a pass that rests on fewer criteria than the SLO asks for (None when all were judged)."""
    missing = unjudged(criteria)
    if not missing or any(c.passed is False for c in criteria):
        return None
    return f"the SLO gate passed without judging {', '.join(missing)} (no data in this run)"


def gate_passed(criteria: list[Criterion]) -> bool:
    return all(c.passed is not False for c in criteria)
