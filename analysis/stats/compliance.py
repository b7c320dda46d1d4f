"""Which phases meet the SLO's latency and error criteria, by the one SLO judge (loadline/core/judge.py).

The knee and the gate both ask it of a phase table in model time; the gate (analysis/verdict/gate.py)
adds the run-wide criteria on top.
"""

from __future__ import annotations

import pandas as pd

from loadline.core.judge import ERROR_RATE, LATENCY, Judgement, judge
from loadline.core.slo import SLO


def judged(table: pd.DataFrame) -> pd.DataFrame:
    """The phases that finished at least one request (ok or error): a phase with none has nothing to judge."""
    return table[(table["ok"].fillna(0) + table["errors"].fillna(0)) > 0]


def judge_phase(row: pd.Series, slo: SLO, streaming: bool | None) -> Judgement:
    """One phase-table row (model time) judged by the one SLO judge."""
    return judge(slo, {key: row.get(key) for key in (*LATENCY, ERROR_RATE)}, streaming)


def phase_violations(row: pd.Series, slo: SLO, streaming: bool | None = None) -> list[str]:
    """Why one phase breaks the SLO's latency/error criteria ([] when it meets them)."""
    return [check.describe() for check in judge_phase(row, slo, streaming).failed]


def compliant_phases(table: pd.DataFrame, slo: SLO, streaming: bool | None = None) -> pd.DataFrame:
    table = judged(table)
    keep = [not phase_violations(row, slo, streaming) for _, row in table.iterrows()]
    return table[keep] if len(table) else table
