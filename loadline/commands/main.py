"""`loadline` console command: a thin dispatcher over subcommand modules.

Each subcommand lives in its own module exposing `HELP`, `add_arguments(parser)` and
`main(args) -> int`. Modules are imported only when their subcommand runs, so `loadline sim`
does not pay for pandas and `loadline report` does not pay for gevent.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from loadline import __version__
from loadline.core.errors import UsageError

# name -> (module, one-line help). The help is duplicated here so `loadline --help` imports nothing.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("loadline.commands.run", "run a load test headless and leave a run folder with a report"),
    "ui": ("loadline.commands.ui", "start Locust's web UI with Loadline's users and every load shape"),
    "sim": ("loadline.commands.sim", "serve the simulated OpenAI-compatible inference server"),
    "report": ("loadline.commands.report", "turn a run folder into tables, charts, SLO verdict (exit 1 on fail)"),
    "compare": ("loadline.commands.compare", "compare two run folders phase by phase (exit 1 on regression)"),
    "twin": ("loadline.commands.twin", "fit a simulator twin to a run; predict what-ifs with it"),
    "plan": ("loadline.commands.plan", "capacity plan: replicas for a target rate, GPU memory estimate"),
}

EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _top_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loadline",
        description="Find the load line of an LLM inference service.",
        epilog="Run 'loadline COMMAND --help' for a command's options.",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        args = _top_parser().parse_args(argv)
        if args.version:
            print(__version__)
            return EXIT_PASS
        _top_parser().print_help()
        return EXIT_USAGE
    name, rest = argv[0], argv[1:]
    module_name, help_text = COMMANDS[name]
    try:  # Ctrl-C while the command's modules load (pandas, matplotlib: seconds) is one line too
        module = importlib.import_module(module_name)
        parser = argparse.ArgumentParser(prog=f"loadline {name}", description=getattr(module, "HELP", help_text))
        module.add_arguments(parser)
        # A command with positionals and sub-actions takes its pass-through options after `--` here:
        # argparse refuses `--` followed by options once more than one positional is declared.
        tail: list[str] = []
        if getattr(module, "PASS_THROUGH", "") and "--" in rest:
            rest, tail = rest[: rest.index("--")], rest[rest.index("--") + 1 :]
        args = parser.parse_args(rest)
        if getattr(module, "PASS_THROUGH", ""):
            setattr(args, module.PASS_THROUGH, tail)
        return int(module.main(args) or 0)
    except UsageError as exc:
        print(f"loadline {name}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"loadline {name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
