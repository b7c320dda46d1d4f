"""Phase plans of each shape, straight from options (pure)."""

from types import SimpleNamespace

import pytest

from loadline.core.errors import UsageError
from loadline.shapes.phase import Phase, scaled, spawn_rate_for
from loadline.shapes.pulse import PulseSettings, pulse_phases
from loadline.shapes.soak import SoakSettings, soak_phases
from loadline.shapes.stepped import StepSettings, step_users, stepped_phases


def opts(**kw):
    return SimpleNamespace(**kw)


def test_stepped_defaults_double_from_10_to_640_after_a_single_user_baseline():
    phases = stepped_phases(StepSettings.from_options(opts()))
    assert [(p.label, p.kind, p.target_users, p.duration_s) for p in phases[:3]] == [
        ("baseline", "baseline", 1, 60.0),
        ("step-1 (10 users)", "step", 10, 180.0),
        ("step-2 (20 users)", "step", 20, 180.0),
    ]
    assert [p.target_users for p in phases[1:]] == [10, 20, 40, 80, 160, 320, 640]
    assert all(p.judged for p in phases[1:]) and not phases[0].judged


def test_step_users_add_and_cap():
    assert step_users(10, 1.0, 15, 50) == [10, 25, 40, 50]
    assert step_users(10, 2.0, 0, 100) == [10, 20, 40, 80, 100]
    assert step_users(3, 1.1, 0, 6) == [3, 4, 5, 6]  # rounding never stalls a step


def test_stepped_ramp_adds_a_ramp_phase_before_each_step_and_no_baseline_when_zero():
    s = StepSettings.from_options(opts(step_ramp=30.0, baseline_hold=0.0, step_max_users=20, step_stop_on_slo=False))
    phases = stepped_phases(s)
    assert [(p.kind, p.target_users, p.ramp_s, p.judged) for p in phases] == [
        ("ramp", 10, 30.0, False),
        ("step", 10, 0.0, False),
        ("ramp", 20, 30.0, False),
        ("step", 20, 0.0, False),
    ]


@pytest.mark.parametrize(
    "bad",
    [
        {"step_factor": 1.0, "step_add": 0},
        {"step_start_users": 0},
        {"step_hold": 0.0},
        {"step_max_users": 5},
        {"step_max_error_rate": 1.5},
        {"step_stop_on_slo": "maybe"},
        {"step_hold": "long"},
    ],
)
def test_stepped_bad_options_are_one_line_usage_errors(bad):
    with pytest.raises(UsageError) as err:
        StepSettings.from_options(opts(**bad))
    message = str(err.value)
    assert "\n" not in message and ("--" in message or "stepped" in message)


def test_pulse_phases_jump_to_three_times_base_and_back_k_times():
    phases = pulse_phases(PulseSettings.from_options(opts(burst_base_users=4, burst_repeats=2)))
    assert [(p.label, p.kind, p.target_users) for p in phases] == [
        ("baseline", "baseline", 4),
        ("burst-1 (12 users)", "burst", 12),
        ("recover-1 (4 users)", "recover", 4),
        ("burst-2 (12 users)", "burst", 12),
        ("recover-2 (4 users)", "recover", 4),
    ]
    assert [p.duration_s for p in phases] == [60.0, 60.0, 120.0, 60.0, 120.0]
    with pytest.raises(UsageError):
        PulseSettings.from_options(opts(burst_factor=1.0))


def test_soak_is_a_ramp_then_windows_covering_the_hold_exactly():
    phases = soak_phases(SoakSettings.from_options(opts(soak_users=8, soak_hold=1300.0, soak_window=600.0)))
    assert [(p.label, p.kind, p.duration_s) for p in phases] == [
        ("ramp (to 8 users)", "ramp", 60.0),
        ("soak-window-1", "soak-window", 600.0),
        ("soak-window-2", "soak-window", 600.0),
        ("soak-window-3", "soak-window", 100.0),
    ]
    default = soak_phases(SoakSettings.from_options(opts()))
    assert sum(p.duration_s for p in default if p.kind == "soak-window") == 7200.0
    assert len(default) == 13


def test_time_scale_divides_durations_and_ramps_and_speeds_up_explicit_rates():
    p = scaled(Phase("x", "stage", 100.0, 10, ramp_s=20.0, spawn_rate=2.0), 10.0)
    assert (p.duration_s, p.ramp_s, p.spawn_rate) == (10.0, 2.0, 20.0)


def test_spawn_rate_reaches_target_within_ramp_or_about_one_second():
    assert spawn_rate_for(10, Phase("s", "step", 5, 20)) == 10.0
    assert spawn_rate_for(20, Phase("r", "ramp", 5, 40, ramp_s=4.0)) == 5.0
    assert spawn_rate_for(12, Phase("r", "recover", 5, 4)) == 8.0
    assert spawn_rate_for(4, Phase("s", "stage", 5, 4)) == 1.0
    assert spawn_rate_for(0, Phase("s", "stage", 5, 40, spawn_rate=3.0)) == 3.0
