"""The ready profiles (configs/profiles/*.conf) and stage files (configs/stages/*.toml) are usable."""

import re
from pathlib import Path

import pytest
from locust.argument_parser import get_empty_argument_parser, setup_parser_arguments

from loadline.client.options import add_arguments as add_user_arguments
from loadline.core.errors import UsageError
from loadline.shapes import registry
from loadline.shapes.stages import load_stages

ROOT = Path(__file__).resolve().parents[2]
PROFILES = {  # profile -> (shape, planned minutes)
    "quick-look": ("stepped", 5.0),
    "standard": ("stepped", 30.0),
    "soak": ("soak", 121.0),
    "burst": ("pulse", 14.0),
    "traffic-surprise": ("stages", 15.0),
    "drill-kill-replica": ("stages", 11.0),
    "rate-sweep": ("rate-sweep", 4.0),  # its planned part (light + flood); the probes are added as it goes
}


def parse_conf(path: Path):
    parser = get_empty_argument_parser(add_help=False, default_config_files=[])
    setup_parser_arguments(parser)
    add_user_arguments(parser)  # loadline.runtime.plugin's: user options a profile may set, --time-scale
    registry.add_shape_arguments(parser)  # --shape and every shape's (registered when a shape is loaded)
    return parser.parse_args(["--config", str(path)])


def test_every_profile_is_listed_here():
    assert sorted(p.stem for p in (ROOT / "configs/profiles").glob("*.conf")) == sorted(PROFILES)


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_profile_parses_with_locust_and_plans_its_advertised_duration(name, monkeypatch):
    monkeypatch.chdir(ROOT)  # profiles name files relative to the repository, like Locust does
    options = parse_conf(ROOT / "configs/profiles" / f"{name}.conf")
    shape, minutes = PROFILES[name]
    files = options.locustfile.split(",")
    assert files[-1] == "locustfiles/shape.py" and all((ROOT / f).is_file() for f in files)
    assert options.shape == shape  # `shape = NAME`: locustfiles/shape.py puts that shape first
    assert registry.check(options.shape, options) == pytest.approx(minutes * 60)


def test_traffic_surprise_triples_a_low_non_zero_baseline():
    phases = load_stages(ROOT / "configs/stages/traffic-surprise.toml")
    users = [p.target_users for p in phases]
    assert users[0] > 0 and users[1] == 3 * users[0] and users[2] == users[0]


@pytest.mark.parametrize("path", sorted((ROOT / "configs/stages").glob("*.toml")), ids=lambda p: p.name)
def test_stage_files_load(path):
    assert load_stages(path)


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "needs at least one [[stage]]"),
        ("[[stage]]\nusers = 3\n", "needs duration and users"),
        ("[[stage]]\nduration = '5x'\nusers = 3\n", "is not seconds or a time span"),
        ("[[stage]]\nduration = 0\nusers = 3\n", "duration must be > 0"),
        ("[[stage]]\nduration = 10\nusers = -1\n", "users must be a whole number"),
        ("[[stage]]\nduration = 10\nusers = 2\nspawn_rate = 0\n", "spawn_rate must be a number > 0"),
        ("[[stage]]\nduration = 10\nusers = 2\nkind = 'peak'\n", "kind must be one of"),
        ("[[stage]]\nduration = 10\nusers = 2\nuser = 3\n", "unknown keys user"),
        ("[[stage]\n", "is not valid TOML"),
    ],
)
def test_bad_stage_files_are_one_line_errors(tmp_path, text, message):
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(UsageError, match=re.escape(message)) as err:
        load_stages(path)
    assert "\n" not in str(err.value)


def test_stage_durations_accept_time_spans(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text("[[stage]]\nduration = '1m30s'\nusers = 2\n[[stage]]\nduration = 5\nusers = 0\nspawn_rate = 2\n")
    phases = load_stages(path)
    assert [(p.label, p.duration_s, p.target_users, p.spawn_rate) for p in phases] == [
        ("stage-1 (2 users)", 90.0, 2, None),
        ("stage-2 (0 users)", 5.0, 0, 2.0),
    ]


def test_registry_errors():
    with pytest.raises(UsageError, match="unknown shape 'zigzag'"):
        registry.shape_class("zigzag")
    with pytest.raises(UsageError, match="needs --stages-file"):
        registry.check("stages", None)
