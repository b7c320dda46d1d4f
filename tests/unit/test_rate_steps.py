"""Rate steps (shapes/rate_steps.py) and the analysis of rate phases (analysis/stats/knee.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from loadline.analysis.stats.knee import find_break_point, find_knee, max_compliant_throughput, safe_operating_point
from loadline.core.errors import UsageError
from loadline.core.slo import SLO
from loadline.shapes.rate_steps import RateStepShape, step_rates
from loadline.shapes.rate_sweep import RateSweepShape

OPTIONS = dict(
    rate_start=2.0,
    rate_factor=2.0,
    rate_add=0.0,
    rate_max=12.0,
    rate_hold=30.0,
    time_scale=1.0,
    slo_file="",
    non_streaming=False,
)


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
    return pd.DataFrame(
        {
            "phase_index": range(n),
            "label": [f"rate {r}" for r in offered],
            "kind": ["step"] * n,
            "start_wall": [float(i * 60) for i in range(n)],
            "users": [1] * n,
            "target_rate": offered,
            "requests": [r * 60 for r in carried],
            "ok": [r * 60 for r in carried],
            "errors": [0] * n,
            "rps": carried,
            "error_rate": [0.0] * n,
            "output_tokens_per_s": [0.0] * n,
            "e2e_p50_ms": e2e_p50,
            "e2e_p95_ms": [300.0] * n,
            "e2e_p99_ms": [400.0] * n,
            "ttft_p95_ms": [100.0] * n,
            "ttft_p99_ms": [150.0] * n,
        }
    )


def test_rate_phases_are_levels_by_offered_rate_and_an_unserved_offer_breaks():
    # an engine that carries at most 10 req/s: 16/s offered is served at 10/s, with latency piling up
    table = rate_table([2, 4, 8, 16], [2, 4, 8, 10], [300, 310, 350, 900])
    knee = find_knee(table)
    assert knee["found"] and knee["target_rate"] == 8 and "req/s offered" in knee["reason"]
    broken = find_break_point(table, SLO(), streaming=True)
    assert (
        broken["found"] and broken["target_rate"] == 16 and "carried 10 req/s of the 16/s offered" in broken["reasons"]
    )
    best = max_compliant_throughput(table, SLO(), streaming=True)
    assert best["target_rate"] == 8  # the 16/s phase met the latency SLO but did not serve its offer


@pytest.mark.parametrize("shape_cls", [RateStepShape, RateSweepShape])
def test_a_rate_shape_started_with_closed_loop_users_ends_at_once_with_exit_code_2(shape_cls):
    """The web UI's class picker can pair a rate shape with chat users: the first tick refuses (one
    line in the log, exit code 2) instead of running one closed-loop user against the rates."""
    from shape_fakes import make_shape

    from loadline.client.users.arrivals import ArrivalRateUser
    from loadline.client.users.chat import ChatSessionUser
    from loadline.client.users.events import SingleShotUser

    options = {
        **OPTIONS,
        "sweep_start_rate": 0.5,
        "sweep_max_rate": 20.0,
        "sweep_hold": 30.0,
        "sweep_probes": 3,
        "sweep_precision": 0.05,
    }
    for users, refused in (
        ([ChatSessionUser], True),
        ([SingleShotUser, ChatSessionUser], True),
        ([ArrivalRateUser], False),
        ([ArrivalRateUser, ChatSessionUser], False),
    ):
        shape = make_shape(shape_cls, **options)
        shape.runner.user_classes = users
        tick = shape.tick()
        assert (tick is None) is refused, (users, tick)
        assert shape.runner.environment.process_exit_code == (2 if refused else None)


def sweep_table() -> pd.DataFrame:
    """A rate sweep's phases in time order (shapes/rate_sweep.py) against a server that serves ~32/s within
    the SLO but completes only ~23/s once overloaded: light, flood, drain, the ceiling, twice it, drain, ..."""
    offered = [0.5, 100, 0, 22.9, 45.7, 0, 34.3, 0, 28.6, 31.4]
    carried = [0.5, 22.6, 0.05, 22.5, 22.5, 0.03, 23.1, 0.03, 28.3, 31.8]
    table = rate_table(offered, carried, [2500, 16000, 9000, 4400, 20000, 14000, 17000, 14000, 5100, 6800])
    table.loc[[2, 5, 7], "kind"] = "recover"
    return table


def test_a_sweeps_break_point_is_its_lowest_failing_rate_not_the_flood_that_came_first():
    broken = find_break_point(sweep_table(), SLO(), streaming=True)
    assert broken["found"] and broken["target_rate"] == 34.3 and broken["label"] == "rate 34.3"


@pytest.mark.parametrize("order", [[0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2]])
def test_rate_phases_break_at_the_lowest_failing_rate_in_any_order(order):
    table = rate_table([2, 4, 8, 16], [2.0, 4.0, 8.0, 10.0], [300, 310, 350, 900])  # 16/s offered, 10/s carried
    table["start_wall"] = [float(60 * order.index(i)) for i in range(4)]
    table.loc[1, ["rps", "requests", "ok"]] = [2.5, 150, 150]  # 4/s offered, 2.5/s carried: it breaks too
    assert find_break_point(table, SLO(), streaming=True)["target_rate"] == 4


def test_closed_loop_phases_still_break_at_the_first_in_time():
    """A pulse: the burst breaks, then the recovery at base users still does; the burst came first."""
    table = rate_table([1, 1, 1], [10, 9, 4], [300, 900, 900])
    table["target_rate"] = float("nan")
    table["users"], table["kind"] = [8, 32, 8], ["baseline", "burst", "recover"]
    table["ttft_p95_ms"] = [100.0, 2000.0, 1500.0]
    broken = find_break_point(table, SLO(), streaming=True)
    assert broken["found"] and broken["users"] == 32


def test_an_overload_that_cut_throughput_does_not_lower_the_safe_point():
    table = sweep_table()
    broken = find_break_point(table, SLO(), streaming=True)
    best = max_compliant_throughput(table, SLO(), streaming=True)
    assert best["rps"] == 31.8 and broken["rps"] == 23.1
    safe = safe_operating_point(table, broken, best)
    assert safe["rps"] == pytest.approx([0.6 * 31.8, 0.7 * 31.8], abs=0.01) and not safe["lower_bound"]
    assert "31.8 req/s: more than the break point carried, 23.1 req/s" in safe["reason"]
    # rate steps whose break point carried the most: its throughput stays the basis
    steps = rate_table([2, 4, 8, 16], [2, 4, 8, 10], [300, 310, 350, 900])
    safe = safe_operating_point(
        steps, find_break_point(steps, SLO(), streaming=True), max_compliant_throughput(steps, SLO(), streaming=True)
    )
    assert safe["rps"] == pytest.approx([6.0, 7.0]) and safe["reason"] == "60-70 % of the break point"


def test_a_rate_change_while_a_scheduler_was_held_elsewhere_is_seen():
    """A scheduler held by a full pool (a flood's backlog) while the rate changed did not wait on the
    event that was set, and kept drawing its due times from the flood's schedule: a tiny-profile
    sweep's probes read 196 s (model) of lateness each. The change count is what it now compares."""
    from loadline.client.arrivals import RateControl

    control = RateControl()
    control.set(100.0, 1, 20.0)
    seen = control.version
    control.set(0.0, 1, 20.0)  # the drain, while the scheduler is held in the pool
    control.set(4.0, 1, 20.0)  # the next probe
    assert not control.wait(0.0)  # the event it waits on next was never set: this alone missed it
    assert control.version != seen and control.version == seen + 2
