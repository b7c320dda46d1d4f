"""The shape registry: a shape declared next to its class reaches every reader, and a new one needs no other file."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from locust.argument_parser import get_parser

from loadline.commands import run
from loadline.commands.main import main
from loadline.core.errors import UsageError
from loadline.shapes import catalog, registry
from loadline.shapes.base import SIM_ADMIN_URL
from loadline.shapes.options import BASELINE_HOLD
from loadline.shapes.pulse import PulseShape
from loadline.shapes.stepped import StepShape

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "square_shape.py"
BUILT_IN = {
    "pulse": "PulseShape",
    "rate-steps": "RateStepShape",
    "rate-sweep": "RateSweepShape",
    "soak": "SoakShape",
    "stages": "StagesShape",
    "stepped": "StepShape",
    "trace": "TraceShape",
}


@pytest.fixture
def square(monkeypatch):
    """The fixture file's shape joins through the environment alone."""
    monkeypatch.setenv(catalog.ENV, str(FIXTURE))


def loadline_run_help(capsys) -> str:
    with pytest.raises(SystemExit) as done:
        main(["run", "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


def run_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="loadline run")
    run.add_arguments(parser)
    return parser


def test_a_shape_in_a_fixture_file_reaches_the_cli_locusts_options_and_the_class_picker(square, capsys):
    # `loadline run --shape`: a choice, listed in --help with its docstring's first line
    text = loadline_run_help(capsys)
    assert "--shape {pulse,rate-steps,rate-sweep,soak,square,stages,stepped,trace}" in text
    assert re.search(r"\n  square +Does the service keep up when load flips between two levels\?\n", text)
    assert run_parser().parse_args(["--shape", "square"]).shape == "square"
    # Locust's --help and web UI form: its options, from Locust's own parser (listeners fire as in Locust)
    parser = get_parser(default_config_files=[])
    assert "--square-high-users" in parser.format_help()
    assert {"square_low_users", "square_high_users", "square_half"} <= set(parser.args_included_in_web_ui)
    assert "shape" not in parser.args_included_in_web_ui  # the class picker chooses there
    assert parser.parse_args(["--square-half", "5"]).square_half == 5.0
    # the class picker: what locustfiles/shape.py exposes, the selected shape first
    classes = registry.locustfile_classes(["--shape", "square"])
    assert list(classes)[0] == "SquareWaveShape" and set(BUILT_IN.values()) < set(classes)
    assert registry.check("square", None) == 120.0


def test_without_the_environment_variable_the_fixture_shape_is_gone(capsys):
    assert list(catalog.catalog()) == list(BUILT_IN)
    assert "square" not in loadline_run_help(capsys)
    with pytest.raises(SystemExit):
        run_parser().parse_args(["--shape", "square"])


def test_the_catalog_read_from_source_agrees_with_the_imported_classes(square):
    entries, classes = catalog.catalog(), registry.shape_classes()
    assert list(entries) == list(classes)
    for name, entry in entries.items():
        assert (entry.class_name, entry.summary) == (classes[name].__name__, catalog.summary_of(classes[name].__doc__))
    assert {name: entries[name].class_name for name in BUILT_IN} == BUILT_IN


def test_the_entry_file_puts_the_selected_shape_first_and_keeps_every_other():
    assert list(registry.locustfile_classes(["--shape", "stepped"])) == [
        "StepShape",
        "PulseShape",
        "RateStepShape",
        "RateSweepShape",
        "SoakShape",
        "StagesShape",
        "TraceShape",
    ]
    assert list(registry.locustfile_classes([])) == [
        "PulseShape",
        "RateStepShape",
        "RateSweepShape",
        "SoakShape",
        "StagesShape",
        "StepShape",
        "TraceShape",
    ]
    with pytest.raises(UsageError, match="--shape zigzag: unknown shape"):
        registry.locustfile_classes(["--shape", "zigzag"])


def test_the_selection_comes_from_a_conf_file_or_the_environment_too(tmp_path, monkeypatch):
    conf = tmp_path / "x.conf"
    conf.write_text("locustfile = locustfiles/chat.py,locustfiles/shape.py\nshape = soak\n")
    monkeypatch.chdir(tmp_path)  # no locust.conf of some other project is read
    assert registry.selected(["--config", str(conf)]) == "soak"
    assert registry.selected(["--config", str(conf), "--shape", "pulse"]) == "pulse"  # command line wins
    monkeypatch.setenv("LOCUST_SHAPE", "stages")
    assert registry.selected([]) == "stages"


def test_a_shape_has_its_own_options_and_its_bases():
    assert registry.options_of(StepShape)[:2] == (SIM_ADMIN_URL, BASELINE_HOLD)
    assert BASELINE_HOLD in registry.options_of(PulseShape)
    flags = [o.flag for o in registry.all_options()]
    assert len(flags) == len(set(flags)) and flags.count("--baseline-hold") == 1


def shape_file(tmp_path: Path, body: str, name: str = "extra_shape.py") -> Path:
    path = tmp_path / name
    path.write_text(
        "from loadline.shapes.base import PhasedShape\nfrom loadline.shapes.options import ShapeOption\n\n" + body
    )
    return path


@pytest.mark.parametrize(
    "body, message",
    [
        ('class Again(PhasedShape):\n    """Dup."""\n    shape_name = "stepped"\n', "clashes with 'stepped'"),
        ('class StepShape(PhasedShape):\n    """Dup."""\n    shape_name = "other"\n', "clashes with 'stepped'"),
        ('class Quiet(PhasedShape):\n    shape_name = "quiet"\n', "needs a docstring"),
        ('NAME = "x"\nclass Computed(PhasedShape):\n    """C."""\n    shape_name = NAME\n', "must be a literal"),
    ],
)
def test_bad_declarations_are_one_line_errors(tmp_path, monkeypatch, body, message):
    monkeypatch.setenv(catalog.ENV, str(shape_file(tmp_path, body)))
    with pytest.raises(UsageError, match=message) as error:
        catalog.catalog()
    assert "\n" not in str(error.value)


def test_two_shapes_may_not_declare_one_option_differently(tmp_path, monkeypatch):
    body = (
        'class Other(PhasedShape):\n    """O."""\n    shape_name = "other"\n'
        '    shape_options = (ShapeOption("--baseline-hold", 5.0, "mine"),)\n'
    )
    monkeypatch.setenv(catalog.ENV, str(shape_file(tmp_path, body, "other_shape.py")))
    with pytest.raises(UsageError, match="declare --baseline-hold differently"):
        registry.all_options()


@pytest.mark.parametrize(
    "value, message", [("missing/nope.py", "shape file not found"), ("no_such_module_here", "no Python module named")]
)
def test_bad_environment_entries_are_one_line_errors(monkeypatch, capsys, value, message):
    monkeypatch.setenv(catalog.ENV, value)
    with pytest.raises(UsageError, match=message):
        catalog.catalog()
    with pytest.raises(SystemExit) as done:  # `loadline run` says it in one line, exit 2
        main(["run", "--help"])
    assert done.value.code == 2 and message in capsys.readouterr().err


def test_docs_list_every_shape():
    """docs/shapes.md's table is the registry's (paste the expected block when a shape is added)."""
    rows = [
        f"| {name} | `{e.class_name}` | `{e.source.path.resolve().relative_to(ROOT)}` | {e.summary} |"
        for name, e in catalog.catalog("").items()
    ]
    expected = "\n".join(["| shape | class (web UI) | module | question it answers |", "|---|---|---|---|", *rows])
    assert expected in (ROOT / "docs" / "shapes.md").read_text(), f"docs/shapes.md should list:\n{expected}"


def test_the_catalog_knows_which_shapes_offer_arrival_rates_and_agrees_with_the_classes(tmp_path, monkeypatch):
    """`loadline run --shape S` implies the open-loop users for these, read from source (no Locust import)."""
    body = (
        "from loadline.shapes.rate_steps import RateShape\n"
        'class Ramp(RateShape):\n    """R."""\n    shape_name = "ramp-rate"\n'
        'class Flagged(PhasedShape):\n    """F."""\n    shape_name = "flagged"\n    open_loop = True\n'
    )
    monkeypatch.setenv(catalog.ENV, str(shape_file(tmp_path, body)))
    open_loop = {name for name, entry in catalog.catalog().items() if entry.open_loop}
    assert open_loop == {"rate-steps", "rate-sweep", "ramp-rate", "flagged"}
    classes = registry.shape_classes()
    assert open_loop == {name for name, cls in classes.items() if getattr(cls, "open_loop", False)}
