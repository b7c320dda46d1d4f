"""Rate steps (shapes/rate_steps.py) and the analysis of rate phases (analysis/stats/knee.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from analysis.stats.knee import find_break_point, find_knee, max_compliant_throughput
from loadline.core.errors import UsageError
from loadline.core.slo import SLO
from shapes.rate_steps import RateStepShape, step_rates
from shapes.rate_sweep import RateSweepShape

OPTIONS = dict(rate_start=2.0, rate_factor=2.0, rate_add=0.0, rate_max=12.0, rate_hold=30.0, time_scale=1.0,
               slo_file="", non_streaming=False)


def test_rates_grow_by_factor_and_add_up_to_the_cap():
    assert step_rates(2.0, 2.0, 0.0, 12.0) == [2.0, 4.0, 8.0, 12.0]
    assert step_rates(1.0, 1.0, 1.5, 5.0) == [1.0, 2.5, 4.0, 5.0]


def test_each_step_is_a_judged_phase_with_its_rate_and_one_scheduler_per_process():
    phases = RateStepShape().plan(SimpleNamespace(**OPTIONS))
    assert [p.target_rate for p in phases] == [2.0, 4.0, 8.0, 12.0]
    assert {p.target_users for p in phases} == {1} and all(p.judged for p in phases)
    assert phases[0].label == "rate-1 (2/s)"


@pytest.mark.parametrize("bad", [dict(rate_start=0.0), dict(rate_factor=1.0), dict(rate_max=1.0), dict(rate_hold=0.0)])
def test_bad_rate_options_are_usage_errors(bad):
    with pytest.raises(UsageError):
        RateStepShape().plan(SimpleNamespace(**{**OPTIONS, **bad}))


def rate_table(offered, carried, e2e_p50) -> pd.DataFrame:
    n = len(offered)
    return pd.DataFrame({
        "phase_index": range(n), "label": [f"rate {r}" for r in offered], "kind": ["step"] * n,
        "start_wall": [float(i * 60) for i in range(n)], "users": [1] * n, "target_rate": offered,
        "requests": [r * 60 for r in carried], "ok": [r * 60 for r in carried], "errors": [0] * n, "rps": carried,
        "error_rate": [0.0] * n, "output_tokens_per_s": [0.0] * n, "e2e_p50_ms": e2e_p50,
        "e2e_p95_ms": [300.0] * n, "e2e_p99_ms": [400.0] * n, "ttft_p95_ms": [100.0] * n, "ttft_p99_ms": [150.0] * n,
    })


def test_rate_phases_are_levels_by_offered_rate_and_an_unserved_offer_breaks():
    # an engine that carries at most 10 req/s: 16/s offered is served at 10/s, with latency piling up
    table = rate_table([2, 4, 8, 16], [2, 4, 8, 10], [300, 310, 350, 900])
    knee = find_knee(table)
    assert knee["found"] and knee["target_rate"] == 8 and "req/s offered" in knee["reason"]
    broken = find_break_point(table, SLO(), streaming=True)
    assert broken["found"] and broken["target_rate"] == 16 and "carried 10 req/s of the 16/s offered" in broken["reasons"]
    best = max_compliant_throughput(table, SLO(), streaming=True)
    assert best["target_rate"] == 8  # the 16/s phase met the latency SLO but did not serve its offer


@pytest.mark.parametrize("shape_cls", [RateStepShape, RateSweepShape])
def test_a_rate_shape_started_with_closed_loop_users_ends_at_once_with_exit_code_2(shape_cls):
    """The web UI's class picker can pair a rate shape with chat users: the first tick refuses (one
    line in the log, exit code 2) instead of running one closed-loop user against the rates."""
    from loadline.client.users.arrivals import ArrivalRateUser
    from loadline.client.users.chat import ChatSessionUser
    from loadline.client.users.events import SingleShotUser
    from shape_fakes import make_shape

    options = {**OPTIONS, "sweep_start_rate": 0.5, "sweep_max_rate": 20.0, "sweep_hold": 30.0, "sweep_probes": 3,
               "sweep_precision": 0.05}
    for users, refused in (([ChatSessionUser], True), ([SingleShotUser, ChatSessionUser], True),
                           ([ArrivalRateUser], False), ([ArrivalRateUser, ChatSessionUser], False)):
        shape = make_shape(shape_cls, **options)
        shape.runner.user_classes = users
        tick = shape.tick()
        assert (tick is None) is refused, (users, tick)
        assert shape.runner.environment.process_exit_code == (2 if refused else None)
