"""The shape registry: the classes the catalog names, their options on Locust's parser, the entry file's shapes.

Readers: Locust's parser (every registered shape's options, `include_in_web_ui`, plus `--shape`),
locustfiles/shape.py (every shape class for the web UI's class picker, the selected one first:
Locust runs the first shape class it finds), and `check()` (a shape's options validated without
Locust). The names and summaries come from shapes/catalog.py, which the command line reads without
importing any shape.

Importing this module (shapes/base.py does, so every shape does) registers the options on Locust's
parser, as `init_command_line_parser` listeners must be added before Locust builds it.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any

from locust import LoadTestShape, events
from locust.argument_parser import get_empty_argument_parser

from loadline.core.errors import UsageError
from loadline.shapes.catalog import ShapeSource, catalog
from loadline.shapes.options import ShapeOption

SHAPE_OPTION = "--shape"  # also `shape = NAME` in a conf file and LOCUST_SHAPE


def shape_classes() -> dict[str, type[LoadTestShape]]:
    """Every registered shape class by name (sorted by name)."""
    classes = {}
    for name, entry in catalog().items():
        cls = getattr(_load(entry.source), entry.class_name, None)
        if not (isinstance(cls, type) and issubclass(cls, LoadTestShape) and cls.__dict__.get("shape_name") == name):
            raise UsageError(
                f"shape {name!r}: {entry.class_name} in {entry.source.path} is not a LoadTestShape "
                f"with shape_name = {name!r}"
            )
        classes[name] = cls
    return classes


def shape_class(name: str) -> type[LoadTestShape]:
    classes = shape_classes()
    if name not in classes:
        raise UsageError(f"unknown shape {name!r} (known: {', '.join(classes)})")
    return classes[name]


def options_of(cls: type) -> tuple[ShapeOption, ...]:
    """A shape's options: its own `shape_options` and its base classes' (e.g. --sim-admin-url of PhasedShape)."""
    found: dict[str, ShapeOption] = {}
    for klass in reversed(cls.__mro__):
        for option in klass.__dict__.get("shape_options", ()):
            found[option.flag] = option
    return tuple(found.values())


def all_options() -> list[ShapeOption]:
    """The options of every registered shape, each once; UsageError when two shapes declare one differently."""
    options: dict[str, tuple[ShapeOption, str]] = {}
    for name, cls in shape_classes().items():
        for option in options_of(cls):
            seen = options.setdefault(option.flag, (option, name))
            if seen[0] != option:
                raise UsageError(
                    f"shapes {seen[1]!r} and {name!r} declare {option.flag} differently: "
                    f"share one ShapeOption (like shapes.options.BASELINE_HOLD)"
                )
    return [option for option, _ in options.values()]


def add_shape_arguments(parser: Any) -> None:
    """`--shape` and every registered shape's options on Locust's parser (web UI form, conf files, env vars)."""
    names = list(catalog())
    # Not in the web UI form: there the class picker chooses (and the shape is chosen before the form exists).
    parser.add_argument(
        SHAPE_OPTION,
        default="",
        metavar="NAME",
        env_var="LOCUST_SHAPE",
        include_in_web_ui=False,
        help=f"Load shape of locustfiles/shape.py to run ({', '.join(names)}); "
        "default: the first by name, or pick one in the web UI with --class-picker",
    )
    for option in all_options():
        parser.add_argument(
            option.flag,
            type=option.value_type,
            default=option.default,
            help=option.help,
            include_in_web_ui=True,
            env_var="LOCUST_" + option.dest.upper(),
        )


def selected(argv: list[str] | None = None) -> str:
    """The shape named by `--shape`, LOCUST_SHAPE or `shape = NAME` in a Locust conf file ("" = none).

    Read with Locust's own config-file-aware parser (--config, ~/.locust.conf, ./locust.conf,
    pyproject.toml), because the entry file must know it while Locust imports it: before Locust
    parses its full command line.
    """
    parser = get_empty_argument_parser(add_help=False)
    parser.add_argument(SHAPE_OPTION, default="", env_var="LOCUST_SHAPE")
    try:
        known, _ = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    except SystemExit:  # a malformed command line: Locust's own parser reports it right after
        return ""
    return str(known.shape or "")


def locustfile_classes(argv: list[str] | None = None) -> dict[str, type[LoadTestShape]]:
    """The shape classes locustfiles/shape.py exposes, by class name, the selected one first."""
    classes = shape_classes()
    name = selected(argv)
    if name and name not in classes:
        raise UsageError(f"{SHAPE_OPTION} {name}: unknown shape (known: {', '.join(classes)})")
    ordered = sorted(classes.items(), key=lambda item: item[0] != name)  # stable: the rest stay sorted by name
    return {cls.__name__: cls for _, cls in ordered}


def check(name: str, options: Any) -> float:
    """Validate a shape's options before Locust starts; returns the planned duration in seconds.

    Raises UsageError with a one-line reason (bad option, missing stages file, ...).
    """
    shape = shape_class(name)()
    if not hasattr(shape, "planned"):
        raise UsageError(f"shape {name!r} is not a PhasedShape: it has no phases to check")
    return sum(p.duration_s for p in shape.planned(options))


def exit_on_usage_error(error: UsageError) -> None:
    """Inside Locust (entry file, parser listener) bad input is one line and exit code 2, not a traceback."""
    sys.stderr.write(f"loadline shapes: error: {error}\n")
    sys.exit(2)


def _load(source: ShapeSource) -> ModuleType:
    if not source.from_file:
        return importlib.import_module(source.module)
    if source.module in sys.modules:
        return sys.modules[source.module]
    spec = importlib.util.spec_from_file_location(source.module, source.path)
    assert spec is not None and spec.loader is not None  # a .py file catalog.py found
    module = importlib.util.module_from_spec(spec)
    sys.modules[source.module] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[source.module]
        raise
    return module


@events.init_command_line_parser.add_listener
def _register(parser: Any, **_: Any) -> None:
    try:
        add_shape_arguments(parser)
    except UsageError as error:
        exit_on_usage_error(error)
