"""Knee, break point and safe operating point on load curves with a known capacity."""

from __future__ import annotations

import pytest
from synthetic import Server, stepped_run

from loadline.analysis.data.load import load_run
from loadline.analysis.stats.knee import (
    find_break_point,
    find_knee,
    max_compliant_throughput,
    safe_operating_point,
)
from loadline.analysis.stats.phases import phase_table
from loadline.core.slo import SLO


@pytest.mark.parametrize(
    "server, steps, knee_users",
    [
        # capacity x unloaded latency = users at saturation: 20 req/s x 0.5 s = 10 users -> last level below is 8
        (Server(capacity_rps=20, base_ms=500), (2, 4, 8, 16, 32), 8),
        # 40 req/s x 0.5 s = 20 users -> 16
        (Server(capacity_rps=40, base_ms=500), (2, 4, 8, 16, 32, 64), 16),
        # 10 req/s x 1 s = 10 users, finer steps -> 10
        (Server(capacity_rps=10, base_ms=1000), (2, 4, 6, 8, 10, 12, 14, 16), 10),
    ],
)
def test_knee_at_the_known_saturation_point(tmp_path, server, steps, knee_users):
    table = phase_table(load_run(stepped_run(tmp_path / "run", steps, server, step_s=20)))
    knee = find_knee(table)
    assert knee["found"], knee
    assert knee["users"] == knee_users
    assert "method" in knee


def test_no_knee_when_throughput_keeps_growing(tmp_path):
    table = phase_table(load_run(stepped_run(tmp_path / "run", (1, 2, 4), Server(capacity_rps=100), step_s=20)))
    knee = find_knee(table)
    assert not knee["found"] and "no knee" in knee["reason"]


def test_too_few_levels_is_explained(tmp_path):
    table = phase_table(load_run(stepped_run(tmp_path / "run", (2, 4), step_s=10)))
    assert "at least 3" in find_knee(table)["reason"]


def test_break_point_is_first_phase_breaking_the_slo(tmp_path):
    # capacity 20 req/s, 0.5 s: E2E ~ users/20 s past 10 users -> 16 users ~ 800 ms, 32 users ~ 1,600 ms
    table = phase_table(load_run(stepped_run(tmp_path / "run", (2, 4, 8, 16, 32), step_s=20)))
    slo = SLO(e2e_p95_ms=1000, e2e_p99_ms=None, ttft_p95_ms=None)
    bp = find_break_point(table, slo)
    assert bp["found"] and bp["users"] == 32
    assert any("E2E P95" in r for r in bp["reasons"])
    best = max_compliant_throughput(table, slo)
    assert best["users"] == 16 and best["rps"] == pytest.approx(20, rel=0.05)
    safe = safe_operating_point(table, bp)
    assert safe["rps"] == pytest.approx([12.0, 14.0], rel=0.05)
    assert not safe["lower_bound"]
    # 12-14 req/s are carried at 6-7 users on the rising part of the curve (0.5 s each)
    assert safe["users"] == pytest.approx([6.0, 7.0], abs=0.3)


def test_without_break_point_the_safe_point_is_a_lower_bound(tmp_path):
    table = phase_table(load_run(stepped_run(tmp_path / "run", (2, 4, 8), step_s=20)))
    bp = find_break_point(table, SLO())
    assert not bp["found"]
    safe = safe_operating_point(table, bp, max_compliant_throughput(table, SLO()))
    assert safe["lower_bound"] and safe["rps"] == pytest.approx([0.6 * 16, 0.7 * 16], rel=0.05)


def test_latency_growth_alone_is_not_a_knee_while_throughput_still_scales():
    """A real tiny-simulator curve: 40 -> 80 users doubles the median latency but still adds 80 %
    throughput (the batch is filling); only 80 -> 160 stops scaling. The knee is 80 users."""
    import pandas as pd

    users = [1, 10, 20, 40, 80, 160, 320]
    table = pd.DataFrame(
        {
            "phase_index": range(7),
            "label": [f"l{u}" for u in users],
            "kind": ["baseline"] + ["step"] * 6,
            "users": users,
            "ok": [100] * 7,
            "rps": [5.7, 36.5, 70.1, 144, 259, 273, 260],
            "output_tokens_per_s": [0.0] * 7,
            "e2e_p50_ms": [22.1, 24.0, 24.3, 27.7, 56.1, 348, 936],
            "e2e_p95_ms": [0.0] * 7,
            "e2e_p99_ms": [0.0] * 7,
        }
    )
    knee = find_knee(table)
    assert knee["found"] and knee["users"] == 80
    assert "from 80 to 160 users" in knee["reason"]


def _levels(users, errors, kinds=None, rates=None):
    """A phase table (model time): one phase a minute at each load, `errors` failed of 600 requests."""
    import pandas as pd

    n = len(users)
    table = pd.DataFrame(
        {
            "phase_index": range(n),
            "label": [f"phase-{i + 1}" for i in range(n)],
            "kind": kinds or ["step"] * n,
            "start_wall": [float(i * 60) for i in range(n)],
            "users": users,
            "requests": [600] * n,
            "ok": [600 - e for e in errors],
            "errors": errors,
            "rps": [10.0 * u / max(users) for u in users],
            "error_rate": [e / 600 for e in errors],
            "output_tokens_per_s": [0.0] * n,
            "e2e_p50_ms": [300.0] * n,
            "e2e_p95_ms": [600.0] * n,
            "e2e_p99_ms": [800.0] * n,
            "ttft_p95_ms": [100.0] * n,
            "ttft_p99_ms": [150.0] * n,
        }
    )
    if rates is not None:
        table["target_rate"] = rates
        table["rps"] = [float(r) for r in rates]
    return table


def _safe(table):
    from loadline.analysis.stats.knee import broke_with_time

    broken = find_break_point(table, SLO(), streaming=True)
    best = max_compliant_throughput(table, SLO(), streaming=True)
    return broken, safe_operating_point(table, broken, best, broke_with_time(table, broken, SLO(), streaming=True))


@pytest.mark.parametrize(
    "users, errors, earlier",
    [
        ([20] * 6, [0, 0, 0, 12, 0, 15], "phase-3"),  # a soak whose fourth window broke (a leak's restart)
        ([20] * 3, [0, 9, 0], "phase-1"),  # the first window after the ramp
        ([5, 10, 10, 10], [0, 0, 0, 30], "phase-3"),  # a step up, then a hold that broke late
    ],
)
def test_a_break_at_a_load_met_before_leaves_no_safe_load(users, errors, earlier):
    broken, safe = _safe(_levels(users, errors))
    assert broken["found"]
    assert not safe["found"] and safe["none"], safe
    assert f"a load {earlier} met the SLO at" in safe["reason"] and "did not hold that load over time" in safe["reason"]


def test_an_open_loop_rate_held_until_it_broke_leaves_no_safe_rate():
    broken, safe = _safe(_levels([1] * 4, [0, 0, 0, 20], rates=[6.0] * 4))
    assert safe.get("none") and "6 req/s offered" in safe["reason"], safe


@pytest.mark.parametrize(
    "users, errors, kinds",
    [
        ([2, 4, 8, 16], [0, 0, 0, 30], None),  # steps: the heaviest broke
        ([10, 30, 10], [0, 0, 30], ["step", "burst", "recover"]),  # a burst between: its damage, not time's
        ([10, 30, 10], [0, 30, 0], ["step", "burst", "recover"]),  # the burst itself broke
        ([8, 4, 4], [0, 0, 0], None),  # nothing broke
        (
            [10, 30, 10, 30],
            [0, 0, 0, 30],
            ["step", "burst", "recover", "burst"],
        ),  # a second burst broke, the first held
        ([20, 20, 20], [0, 30, 0], ["ramp", "soak-window", "soak-window"]),  # only the ramp held before the break
    ],
)
def test_a_break_that_came_with_load_keeps_its_safe_operating_point(users, errors, kinds):
    broken, safe = _safe(_levels(users, errors, kinds))
    assert not safe.get("none"), safe
    assert safe["found"], safe
