"""The Locust command line `loadline run` is about to start, checked first in a throwaway child process.

`python -m loadline.commands.precheck LOCUST_ARGS...` does what Locust does before its runner starts,
and no more: it imports the locustfiles (their options join the parser; the shape entry file checks
--shape), parses the whole command line with Locust's own parser (the conf file, the types of every
option: Locust's and Loadline's), builds the users' settings (UserSettings.from_options: ranges,
prompt mix, dataset, header name) and plans the shape's phases (loadline.shapes.registry.check: stage files,
shape options). Why a child: importing Locust monkey-patches the process with gevent, and `loadline
run` only supervises. Why at all: Locust would find the same problems only after the simulator
started and the run folder existed.

Exit 0 when the command line is sound; else one line on stderr (`loadline run: error: ...`), exit 2.

With -h/--help among the arguments it prints Locust's help with the locustfiles and every shape
loaded instead (`loadline run -- --help`): Locust's own --help stops before it loads locustfiles, so
it lists none of Loadline's options.
"""

from __future__ import annotations

import sys
from typing import NoReturn

from locust.argument_parser import get_locustfiles_locally, get_parser, parse_locustfile_option
from locust.util.load_locustfile import load_locustfile

from loadline.client.options import UserSettings
from loadline.core.errors import UsageError

PROG = "loadline run"
HELP_FLAGS = frozenset({"-h", "--help"})


class _Refused(Exception):
    """Locust's parser refused the command line (its message, one line)."""


def _refuse(message: str) -> NoReturn:
    raise _Refused(message.splitlines()[0] if message else "invalid Locust options")


def check(argv: list[str]) -> None:
    """Raise UsageError (one line) when Locust would refuse `argv` or Loadline's options are out of range.

    A locustfile that exits (the shape entry file on an unknown --shape) raises SystemExit, its line said."""
    try:
        files = get_locustfiles_locally(parse_locustfile_option(argv))
        user_classes: list[type] = []
        for path in files:
            users, _ = load_locustfile(path)  # registers the plugin's and the shapes' options, as Locust does
            user_classes += list(users.values())
        parser = get_parser()
        parser.prog = "locust"
        parser.error = _refuse  # type: ignore[method-assign]  # on purpose: Locust's own message, without the usage block and the exit
        options = parser.parse_args(args=argv)
    except _Refused as exc:
        raise UsageError(f"locust: {exc}") from None
    # Imported only now: shapes.registry adds the shapes' options to Locust's parser when imported,
    # and the run's own parser has them only when its locustfiles bring the shape entry file.
    from loadline.shapes import registry
    from loadline.shapes.rate_steps import refuse_closed_loop, refuse_rateless

    UserSettings.from_options(options)
    name = str(getattr(options, "shape", "") or "")
    shape = registry.shape_class(name)() if name else None
    if getattr(shape, "open_loop", False):
        refuse_closed_loop(name, user_classes)
    else:
        refuse_rateless(name, user_classes, float(getattr(options, "arrival_rate", 0.0) or 0.0))
    if shape is not None and hasattr(shape, "planned"):  # a PhasedShape plans (and checks) its phases
        shape.planned(options)


def help_text(argv: list[str]) -> str:
    """Locust's help for `argv`'s locustfiles, with Loadline's user options and every shape's options."""
    argv = [arg for arg in argv if arg not in HELP_FLAGS]
    for path in get_locustfiles_locally(parse_locustfile_option(argv)):
        load_locustfile(path)
    from loadline.shapes import registry  # noqa: F401  (imported: every shape's options join the parser)

    parser = get_parser()
    parser.prog = "locust"
    return parser.format_help()


def main(argv: list[str] | None = None) -> int:
    """0, or 2 with one line (a SystemExit from a locustfile or Locust has already said why)."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        if HELP_FLAGS & set(argv):
            print(help_text(argv))
            return 0
        check(argv)
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except (ImportError, SyntaxError, OSError) as exc:  # a locustfile that cannot be imported
        print(f"{PROG}: error: cannot load the locustfile: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
