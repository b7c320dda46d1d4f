"""The SLO gate: every criterion with its threshold, measured value and verdict.

Latency and error criteria are judged per phase and the run passes one only if *every* phase does
("P95 stayed under 1,500 ms"); the measured value is the worst phase's, named. So a stepped run
that is pushed past its break point fails the gate by design; gate CI on a constant-load run at
the target rate. The throughput criterion (only with `target_qps`) takes the best phase that met
every other criterion. A criterion with no data (e.g. TTFT from a plain Locust CSV) is reported as
not measured and does not decide the gate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

import pandas as pd

from loadline.core.slo import SLO

# SLO field -> (criterion name, phase-table column)
LATENCY_CRITERIA = {
    "e2e_p95_ms": ("E2E P95", "e2e_p95_ms"),
    "e2e_p99_ms": ("E2E P99", "e2e_p99_ms"),
    "ttft_p95_ms": ("TTFT P95", "ttft_p95_ms"),
    "ttft_p99_ms": ("TTFT P99", "ttft_p99_ms"),
    "itl_p99_ms": ("ITL P99", "itl_p99_ms"),
    "tpot_p95_ms": ("TPOT P95", "tpot_p95_ms"),
}


@dataclass
class Criterion:
    name: str
    threshold: str  # human form, e.g. "< 1500 ms"
    limit: float
    measured: float | None
    passed: bool | None  # None: not measured
    where: str = ""  # the phase (or server series) that decided it
    unit: str = "ms"  # ms | fraction | req/s | restarts

    def as_dict(self) -> dict:
        measured = None if self.measured is None or math.isnan(self.measured) else round(self.measured, 6)
        return {"name": self.name, "threshold": self.threshold, "limit": self.limit, "measured": measured,
                "passed": self.passed, "where": self.where, "unit": self.unit}


def _judged(table: pd.DataFrame) -> pd.DataFrame:
    return table[(table["ok"].fillna(0) + table["errors"].fillna(0)) > 0]


def phase_violations(row: pd.Series, slo: SLO) -> list[str]:
    """Why one phase breaks the SLO's latency/error criteria ([] when it meets them)."""
    reasons = []
    for field, (name, column) in LATENCY_CRITERIA.items():
        limit = getattr(slo, field)
        value = row.get(column)
        if limit is not None and value is not None and pd.notna(value) and not value < limit:
            reasons.append(f"{name} {value:,.0f} ms >= {limit:,.0f} ms")
    rate = row.get("error_rate")
    if rate is not None and pd.notna(rate) and rate > slo.max_error_rate:
        reasons.append(f"error rate {rate:.2%} > {slo.max_error_rate:.2%}")
    return reasons


def compliant_phases(table: pd.DataFrame, slo: SLO) -> pd.DataFrame:
    judged = _judged(table)
    keep = [not phase_violations(row, slo) for _, row in judged.iterrows()]
    return judged[keep] if len(judged) else judged


def _worst(table: pd.DataFrame, column: str) -> tuple[float | None, str]:
    values = table[column].dropna() if column in table else pd.Series(dtype=float)
    if values.empty:
        return None, ""
    at = values.idxmax()
    return float(values.loc[at]), str(table.loc[at, "label"])


def evaluate(table: pd.DataFrame, slo: SLO) -> list[Criterion]:
    judged = _judged(table)
    criteria: list[Criterion] = []
    for field, (name, column) in LATENCY_CRITERIA.items():
        limit = getattr(slo, field)
        if limit is None:
            continue
        measured, where = _worst(judged, column)
        passed = None if measured is None else measured < limit
        criteria.append(Criterion(name, f"< {limit:g} ms", float(limit), measured, passed, where))
    measured, where = _worst(judged, "error_rate")
    passed = None if measured is None else measured <= slo.max_error_rate
    criteria.append(Criterion("error rate", f"<= {slo.max_error_rate:.2%}", slo.max_error_rate, measured, passed, where,
                              unit="fraction"))
    if slo.target_qps is not None:
        need = slo.target_qps * slo.safety_factor
        good = compliant_phases(table, slo)
        best, where = _worst(good, "rps")
        criteria.append(Criterion("throughput within SLO", f">= {need:g} req/s ({slo.target_qps:g} x {slo.safety_factor:g})",
                                  need, best if best is not None else 0.0, (best or 0.0) >= need, where, unit="req/s"))
    return criteria


def gate_passed(criteria: list[Criterion]) -> bool:
    return all(c.passed is not False for c in criteria)


def junit_xml(criteria: list[Criterion | dict], suite: str = "loadline.core.slo") -> str:
    """One testcase per criterion; failures carry the measured value; unmeasured ones are skipped."""
    criteria = [Criterion(**{k: v for k, v in c.items()}) if isinstance(c, dict) else c for c in criteria]
    failures = sum(c.passed is False for c in criteria)
    skipped = sum(c.passed is None for c in criteria)
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             f'<testsuite name={quoteattr(suite)} tests="{len(criteria)}" failures="{failures}" skipped="{skipped}" errors="0">']
    for c in criteria:
        lines.append(f'  <testcase classname={quoteattr(suite)} name={quoteattr(f"{c.name} {c.threshold}")}>')
        measured = "not measured" if c.measured is None else f"{c.measured:,.3f}"
        if c.passed is False:
            message = f"measured {measured} (threshold {c.threshold}) in {c.where or 'run'}"
            lines.append(f"    <failure message={quoteattr(message)}>{escape(message)}</failure>")
        elif c.passed is None:
            lines.append(f"    <skipped message={quoteattr('not measured in this run')}/>")
        lines.append("  </testcase>")
    lines.append("</testsuite>")
    return "\n".join(lines) + "\n"
