"""TTFO, reasoning share and prompt-cache hits in the phase table and the SLO judge: columns appear
only for runs that have them (or an SLO that gates TTFO), and TTFO is gated only when set."""

from __future__ import annotations

import numpy as np
import pytest
from synthetic import make_requests, write_run

from loadline.analysis.data.load import load_run
from loadline.analysis.report import formatting
from loadline.analysis.stats.phases import PHASE_TABLE_COLUMNS, phase_table
from loadline.core.judge import judge
from loadline.core.slo import SLO

T0 = 1_700_000_000.0
PHASE = {
    "index": 0,
    "label": "hold",
    "kind": "hold",
    "start_wall": T0,
    "end_wall": T0 + 100,
    "target_users": 4,
    "spawn_rate": 1,
    "users_start": 4,
    "users_end": 4,
    "note": "",
}


def run_of(tmp_path, **columns):
    n = 100
    requests = make_requests(
        T0 + np.arange(n) * 0.5,
        np.full(n, 900.0),
        ttft_ms=np.linspace(10, 109, n),
        output_tokens=20,
        prompt_tokens=100,
        **columns,
    )
    return load_run(write_run(tmp_path / "run", requests, [PHASE], {"name": "t", "streaming": True}))


def test_a_plain_run_gets_no_new_columns(tmp_path):
    table = phase_table(run_of(tmp_path, ttfo_ms=np.linspace(10, 109, 100)))
    assert list(table.columns) == PHASE_TABLE_COLUMNS
    assert formatting.phase_columns(table.to_dict(orient="records")) == formatting.PHASE_COLUMNS


def test_a_reasoning_run_gets_ttfo_and_reasoning_share_and_cache_hits(tmp_path):
    run = run_of(
        tmp_path,
        ttfo_ms=np.linspace(510, 609, 100),
        reasoning_ms=500.0,
        reasoning_tokens=5,
        cached_tokens=np.r_[np.full(50, 64.0), np.full(50, np.nan)],
    )
    row = phase_table(run).iloc[0]
    assert row["ttfo_p95_ms"] == pytest.approx(np.percentile(np.linspace(510, 609, 100), 95))
    assert row["reasoning_share"] == pytest.approx(5 / 20)
    assert row["prompt_cache_hit_share"] == pytest.approx(64 / 100)  # over the replies that reported
    titles = [title for title, _, _ in formatting.phase_columns([row.to_dict()])]
    assert titles[-3:] == ["TTFO P95", "reasoning", "cache hits"]


def test_an_slo_that_gates_ttfo_gets_its_column_on_a_plain_run(tmp_path):
    table = phase_table(run_of(tmp_path, ttfo_ms=np.linspace(10, 109, 100)), SLO(ttfo_p95_ms=100.0))
    assert {"ttfo_p95_ms", "ttfo_p99_ms"} <= set(table.columns)
    assert "reasoning_share" not in table.columns


def test_ttft_is_gated_by_default_and_ttfo_only_when_set():
    measured = {"ttft_p95_ms": 300.0, "ttfo_p95_ms": 5000.0, "error_rate": 0.0}
    assert [c.key for c in judge(SLO(), measured, True).checks] == ["ttft_p95_ms", "error_rate"]
    gated = judge(SLO(ttfo_p95_ms=4000.0), measured, True)
    assert gated.passed is False and [c.name for c in gated.failed] == ["TTFO P95"]
    assert "ttfo_p95_ms" not in [c.key for c in judge(SLO(ttfo_p95_ms=4000.0), measured, False).checks]
