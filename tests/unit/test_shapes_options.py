"""Shape options on Locust's own parser: typed defaults, web UI, config files, env vars."""

from pathlib import Path
from types import SimpleNamespace

import pytest
from locust.argument_parser import get_empty_argument_parser

from loadline.core.errors import UsageError
from loadline.shapes import registry, soak, stepped
from loadline.shapes.options import time_scale


def parser():
    p = get_empty_argument_parser(add_help=False, default_config_files=[])
    registry.add_shape_arguments(p)
    return p


def test_every_option_has_a_typed_default_and_shows_in_the_web_ui():
    p = parser()
    ui = p.args_included_in_web_ui
    for option in registry.all_options():
        assert option.default is not None
        assert option.dest in ui
    parsed = p.parse_args([])
    assert parsed.step_hold == 180.0 and parsed.step_stop_on_slo is True and parsed.stages_file == ""


def test_command_line_values_are_converted(monkeypatch):
    monkeypatch.setenv("LOCUST_BURST_REPEATS", "5")
    parsed = parser().parse_args(["--step-start-users", "4", "--step-stop-on-slo", "false", "--step-factor", "1.5"])
    assert (parsed.step_start_users, parsed.step_stop_on_slo, parsed.step_factor) == (4, False, 1.5)
    assert parsed.burst_repeats == 5


def test_config_file_values_are_read(tmp_path):
    conf = tmp_path / "x.conf"
    conf.write_text("step-hold = 30\nstep-stop-on-slo = false\nstages-file = configs/stages/traffic-surprise.toml\n")
    parsed = parser().parse_args(["--config", str(conf)])
    assert (parsed.step_hold, parsed.step_stop_on_slo) == (30.0, False)
    assert parsed.stages_file == "configs/stages/traffic-surprise.toml"


def test_bad_bool_on_the_command_line_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit):
        parser().parse_args(["--step-stop-on-slo", "perhaps"])
    assert "true/false" in capsys.readouterr().err


def test_read_falls_back_to_defaults_and_converts_web_form_strings():
    assert soak.HOLD.read(None) == 7200.0
    assert soak.USERS.read(SimpleNamespace(soak_users="12")) == 12
    assert stepped.STOP_ON_SLO.read(SimpleNamespace(step_stop_on_slo="true")) is True


@pytest.mark.parametrize(
    "value, message", [("many", "--soak-users: expected a finite int"), ("inf", "--soak-users: expected a finite int")]
)
def test_read_rejects_unusable_values_in_one_line(value, message):
    with pytest.raises(UsageError, match=message):
        soak.USERS.read(SimpleNamespace(soak_users=value))


@pytest.mark.parametrize("bad", [0, -1, "fast", float("inf"), float("nan")])
def test_time_scale_must_be_a_positive_number(bad):
    with pytest.raises(UsageError):
        time_scale(SimpleNamespace(time_scale=bad))


def test_time_scale_defaults_to_one():
    assert time_scale(None) == 1.0 and time_scale(SimpleNamespace()) == 1.0


def test_every_option_is_documented():
    doc = (Path(__file__).resolve().parents[2] / "docs/shapes.md").read_text()
    missing = [
        flag for flag in [registry.SHAPE_OPTION, *(o.flag for o in registry.all_options())] if f"`{flag}`" not in doc
    ]
    assert missing == []
