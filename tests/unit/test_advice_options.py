"""Advice a user can follow: every command-line option the analysis names exists where it says.

The report's actions, hints and notes (string literals under analysis/) name options. Each `--flag`
is checked against the parser of what the text says to run: `loadline CMD --flag` against that
subcommand's parser; `loadline run -- --flag` against the options Loadline adds to Locust (users, shapes, scraper: what
`--` passes and the web UI shows); a bare `--flag` against `loadline run`'s (or report's, plan's) own; `locust ... --flag` against Locust's parser; an engine's flag only beside the engine's
name, from the list below (its documentation).
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import pytest
from locust.argument_parser import get_parser

import loadline.runtime.plugin  # noqa: F401 - registers Loadline's Locust options, as every entry file does
from loadline.commands import compare, plan, report, run, sim
from loadline.shapes import registry

ROOT = Path(__file__).resolve().parents[2]
FLAG = re.compile(r"--[a-z][a-z0-9-]+")
COMMAND = re.compile(r"\bloadline (run|report|plan|sim|compare)\b")
# Engine flags the advice may name, beside the engine's name (their own docs): llama.cpp's server
# (--parallel N slots), vLLM's engine arguments.
ENGINE_FLAGS = {
    "--parallel": "llama.cpp",
    "--max-num-seqs": "vLLM",
    "--max-num-batched-tokens": "vLLM",
    "--max-model-len": "vLLM",
}


def _options(module) -> set[str]:
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    return {s for action in parser._actions for s in action.option_strings}


def _locust_options() -> set[str]:
    """Locust's parser as an entry file sees it: Loadline's user, scraper and shape options added."""
    registry.all_options()
    parser = get_parser(default_config_files=[])
    return {s for action in parser._actions for s in action.option_strings}


SUBCOMMANDS = {
    "run": _options(run),
    "report": _options(report),
    "plan": _options(plan),
    "sim": _options(sim),
    "compare": _options(compare),
}
LOCUST = _locust_options()


def strings_under(folder: Path):
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = {
            id(n.body[0].value)
            for n in ast.walk(tree)  # docstrings speak to readers of the code
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef))
            and n.body
            and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if id(node) in docs:
                continue
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                yield path.relative_to(ROOT), node.value
            elif isinstance(node, ast.JoinedStr):  # f-strings: the literal parts
                yield (
                    path.relative_to(ROOT),
                    "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)),
                )


def where_it_applies(text: str, at: int) -> str:
    """'run', 'report', ... for `loadline CMD ... --flag`; 'pass-through' after ` -- `; 'locust'; 'bare'."""
    before = text[:at]
    commands = list(COMMAND.finditer(before))
    locust = before.rfind("locust ")
    if commands and commands[-1].start() > locust:
        tail = before[commands[-1].end() :]
        return "pass-through" if " -- " in tail else commands[-1].group(1)
    if locust >= 0:
        return "locust"
    return "bare"


def test_the_checker_catches_advice_that_cannot_be_followed():
    assert "--processes" not in SUBCOMMANDS["run"] and "--processes" in LOCUST  # Locust's, refused by loadline run
    assert where_it_applies("use loadline run --workers 4", 17) == "run"
    assert where_it_applies("loadline run -- --api-key KEY", 16) == "pass-through"
    assert where_it_applies("plain `locust --csv` exports", 14) == "locust"


@pytest.mark.parametrize("folder", ["analysis"])
def test_every_option_named_in_the_analysis_exists_where_it_says(folder):
    bad = []
    loadline_pass_through = LOCUST  # what `loadline run -- ...` hands to Locust, with Loadline's options in it
    for path, text in strings_under(ROOT / folder):
        for match in FLAG.finditer(text):
            flag, scope = match.group(0), where_it_applies(text, match.start())
            if flag in ENGINE_FLAGS:
                ok = ENGINE_FLAGS[flag].lower() in text.lower()
            elif scope in SUBCOMMANDS:
                ok = flag in SUBCOMMANDS[scope]
            elif scope in ("pass-through", "locust"):
                ok = flag in loadline_pass_through
            else:  # bare: what `loadline run` (or report, plan) takes itself; a pass-through option says `-- `
                ok = flag in SUBCOMMANDS["run"] or flag in SUBCOMMANDS["report"] or flag in SUBCOMMANDS["plan"]
            if not ok:
                bad.append(f"{path}: {flag} ({scope}) in {text[:120]!r}")
    assert not bad, "\n".join(bad)
