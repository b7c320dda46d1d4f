"""Open-loop arrivals: the processes' gaps, the rate split, and the report's 'fell behind' judgement."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from loadline.analysis.stats import arrivals as stats
from loadline.analysis.verdict.gate import open_loop_criteria
from loadline.client.arrivals import ArrivalSettings, RateControl, next_gap
from loadline.core.arrival_rate import fell_short, gap_cv2
from loadline.core.errors import UsageError
from loadline.core.slo import SLO
from tests.ks import exponential_cdf, ks_pvalue
from tests.synthetic import make_requests


def gaps(process: str, rate: float, burstiness: float = 1.0, n: int = 4000, seed: int = 1) -> np.ndarray:
    rng = random.Random(seed)
    return np.array([next_gap(process, rate, burstiness, rng) for _ in range(n)])


def test_each_process_has_the_asked_mean_and_spread():
    assert np.allclose(gaps("constant", 8.0), 1 / 8)
    poisson = gaps("poisson", 8.0)
    assert ks_pvalue(poisson, exponential_cdf(8.0)) > 0.01
    bursty, regular = gaps("gamma", 8.0, 0.25), gaps("gamma", 8.0, 4.0)
    for g in (poisson, bursty, regular):
        assert g.mean() == pytest.approx(1 / 8, rel=0.08)
    # coefficient of variation 1/sqrt(burstiness): 2 for B=0.25, 0.5 for B=4 (as vllm bench serve)
    assert bursty.std() / bursty.mean() == pytest.approx(2.0, rel=0.15)
    assert regular.std() / regular.mean() == pytest.approx(0.5, rel=0.1)


def test_ks_rejects_the_wrong_process():
    assert ks_pvalue(gaps("gamma", 8.0, 0.25, n=1000), exponential_cdf(8.0)) < 1e-4
    assert ks_pvalue(gaps("poisson", 10.0, n=1000), exponential_cdf(8.0)) < 1e-3


def test_rate_is_split_between_workers_and_scaled():
    control = RateControl()
    assert control.process_rate() is None
    waiting = control.changed
    control.set(10.0, workers=4, scale=2.0)
    assert waiting.is_set()  # schedulers waiting for their next due time wake up
    assert control.process_rate() == pytest.approx(5.0)
    assert control.process_cap(10) == 3


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(arrival_rate=-1.0), "--arrival-rate"),
        (dict(arrival="uniform"), "--arrival"),
        (dict(burstiness=0.0), "--burstiness"),
        (dict(max_inflight=0), "--max-inflight"),
        (dict(arrival_rate=float("nan")), "--arrival-rate"),
    ],
)
def test_bad_arrival_options_are_one_line_errors(options, message):
    base = dict(arrival_rate=1.0, arrival="poisson", burstiness=1.0, max_inflight=10, arrival_sessions=False)
    with pytest.raises(UsageError, match=message):
        ArrivalSettings.from_options(SimpleNamespace(**{**base, **options}))


def open_loop_run(rate: float, seconds: float, lateness_ms: float, sent_fraction: float = 1.0) -> pd.DataFrame:
    due = np.arange(0, seconds, 1 / rate)
    sent = due[: int(len(due) * sent_fraction)]
    late = np.full(len(sent), lateness_ms)
    return make_requests(
        1000 + sent + late / 1000,
        np.full(len(sent), 300.0),
        ttft_ms=np.full(len(sent), 50.0),
        due_wall=1000 + sent,
        lateness_ms=late,
        session_id="",
    )


PHASE = pd.DataFrame([{"label": "run", "start_wall": 1000.0, "end_wall": 1060.0}])
CONSTANT = {"arrival_rate": 10.0, "arrival": "constant"}


def test_a_run_that_kept_its_schedule_is_sustained():
    section = stats.summary(open_loop_run(10, 60, 5.0), PHASE, CONSTANT, SLO())
    row = section["phases"][0]
    assert section["sustained"] and row["achieved_rate"] == pytest.approx(10.0, rel=0.01)
    assert row["ttft_from_due_p95_ms"] == pytest.approx(55.0)  # what the user felt: lateness + TTFT
    criteria = open_loop_criteria(section["phases"], section["lateness_limit_ms"])
    assert [(c.name, c.passed) for c in criteria] == [("arrival rate offered", True), ("arrival lateness P95", True)]


def test_a_generator_behind_its_schedule_is_flagged_for_rate_or_lateness():
    short = stats.summary(open_loop_run(10, 60, 5.0, sent_fraction=0.9), PHASE, CONSTANT, SLO())
    assert not short["sustained"] and "of the target" in short["notes"][0]
    # 10 % of the default TTFT P95 budget (800 ms) is 80 ms
    late = stats.summary(open_loop_run(10, 60, 120.0), PHASE, CONSTANT, SLO())
    assert not late["sustained"] and "lateness P95 120 ms > 80 ms" in late["notes"][0]
    # the SLO gate fails each on the criterion it broke (analysis/verdict/gate.py)
    for section, broken in ((short, "arrival rate offered"), (late, "arrival lateness P95")):
        criteria = open_loop_criteria(section["phases"], section["lateness_limit_ms"])
        assert [c.name for c in criteria if c.passed is False] == [broken]


def test_a_poisson_count_within_its_own_noise_is_not_blamed_on_the_generator():
    # 600 expected arrivals: Poisson sd ~24.5; 570 (95 %) is within 3 sd, 500 is not
    assert not fell_short(570, 600.0, gap_cv2("poisson", 1.0))
    assert fell_short(500, 600.0, gap_cv2("poisson", 1.0))
    assert fell_short(585, 600.0, gap_cv2("constant", 1.0))


def test_closed_loop_runs_have_no_open_loop_section():
    assert stats.summary(make_requests([1.0, 2.0], [10.0, 10.0]), PHASE, {}, SLO()) == {}


@pytest.mark.parametrize("first_turn", [0, 1])  # Loadline's turns count from 0, Qwen Bailian's from 1
def test_every_request_of_a_replayed_trace_is_an_arrival_later_turns_too(first_turn):
    run = open_loop_run(10, 60, 5.0)
    n = len(run)
    # sessions of three turns, each turn at its own scheduled due time (the trace's rows)
    run["session_id"] = [f"c-{i // 3}" for i in range(n)]
    run["turn"] = [first_turn + i % 3 for i in range(n)]
    run["trace_index"] = np.arange(n, dtype=float)
    phase = PHASE.assign(target_rate=10.0)  # the trace shape's phases: scheduled requests / length
    section = stats.summary(run, phase, {}, SLO())
    row = section["phases"][0]
    assert section["sustained"], section["notes"]
    assert row["arrivals"] == n and row["achieved_rate"] == pytest.approx(10.0, rel=0.01)
