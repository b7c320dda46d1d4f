"""Each shape's tick() sequence under a controlled clock, and the timeline it leaves."""

from itertools import pairwise

from shape_fakes import changes, drive, make_shape

from loadline.runtime import timeline
from loadline.shapes.pulse import PulseShape
from loadline.shapes.soak import SoakShape
from loadline.shapes.stepped import StepShape


def test_stepped_ticks_follow_the_plan_scaled_and_end_with_none():
    shape = make_shape(StepShape, time_scale=10.0, step_max_users=40, step_stop_on_slo=False)
    applied = changes(drive(shape))
    # baseline 60/10 = 6 s, steps 180/10 = 18 s; each change costs the tick it happens on
    assert applied == [
        (0.0, (1, 1.0)),
        (6.0, (10, 9.0)),
        (24.0, (20, 10.0)),
        (42.0, (40, 20.0)),
        (60.0, None),
    ]
    rows = shape.state.timeline.rows
    assert [(r.label, r.target_users, r.end_wall - r.start_wall) for r in rows] == [
        ("baseline", 1, 6.0),
        ("step-1 (10 users)", 10, 18.0),
        ("step-2 (20 users)", 20, 18.0),
        ("step-3 (40 users)", 40, 18.0),
    ]
    assert all(a.end_wall == b.start_wall for a, b in pairwise(rows))  # contiguous
    assert [r.users_end for r in rows] == [1, 10, 20, 40] and all(r.note == "" for r in rows)
    assert shape.state.timeline.closed and timeline.current_phase() is None


def test_stepped_ramp_phase_keeps_its_rate_into_the_hold():
    shape = make_shape(
        StepShape, baseline_hold=0.0, step_ramp=10.0, step_hold=20.0, step_max_users=20, step_stop_on_slo=False
    )
    applied = changes(drive(shape))
    assert applied == [(0.0, (10, 1.0)), (30.0, (20, 1.0)), (60.0, None)]


def test_late_ticks_never_skip_a_phase():
    """Distributed ramps block ticks: every phase is still entered and held for its full duration."""
    shape = make_shape(
        PulseShape, burst_base_users=2, baseline_hold=5.0, burst_hold=3.0, burst_gap=3.0, burst_repeats=2
    )
    ticks = drive(shape, tick_every=20.0)  # every tick is later than any phase's end
    assert [t for _, t in ticks] == [(2, 2.0), (6, 4.0), (2, 4.0), (6, 4.0), (2, 4.0), None]
    assert [r.label for r in shape.state.timeline.rows] == [
        "baseline",
        "burst-1 (6 users)",
        "recover-1 (2 users)",
        "burst-2 (6 users)",
        "recover-2 (2 users)",
    ]


def test_soak_windows_are_marked_on_the_timeline():
    shape = make_shape(SoakShape, time_scale=60.0, soak_users=5, soak_ramp=60.0, soak_hold=1800.0)
    applied = changes(drive(shape))
    assert applied[0] == (0.0, (5, 5.0))  # 5 users over 1 s scaled ramp
    assert applied[-1] == (31.0, None)  # ramp 1 s + 3 windows of 10 s
    assert [r.label for r in shape.state.timeline.rows] == ["ramp (to 5 users)"] + [
        f"soak-window-{n}" for n in (1, 2, 3)
    ]


def test_current_phase_is_what_runs_now():
    shape = make_shape(StepShape, time_scale=10.0)
    shape.tick()
    shape.clock.advance(7.0)
    shape.tick()
    now = timeline.current_phase()
    assert (now["label"], now["kind"], now["target_users"]) == ("step-1 (10 users)", "step", 10)
    assert now["start_wall"] == shape.clock.wall()


def test_a_new_run_after_stop_starts_a_fresh_timeline():
    shape = make_shape(StepShape, time_scale=10.0)
    shape.tick()
    shape.clock.advance(3.0)
    timeline.close_timeline(shape.runner.environment)  # the test was stopped from the web UI
    first = shape.state.timeline
    assert [r.note for r in first.rows] == ["cut short"]
    timeline.close_timeline(shape.runner.environment)  # idempotent
    assert len(first.rows) == 1
    assert shape.tick() == (1, 1.0) and shape.state.timeline is not first


def test_bad_options_end_the_test_with_exit_code_2(caplog):
    shape = make_shape(StepShape, step_factor=0.5)
    assert shape.tick() is None
    assert shape.runner.environment.process_exit_code == 2
    assert "--step-factor must be >= 1" in caplog.text


def test_close_timeline_without_any_shape_is_a_no_op():
    timeline.activate(None)
    timeline.close_timeline(object())
    assert timeline.current_phase() is None
