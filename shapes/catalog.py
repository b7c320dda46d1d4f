"""Which shapes exist, read from their source without importing them: names and one-line summaries.

A shape declares itself in its class body: `shape_name = "stepped"`, a docstring whose first line
says what the shape is for, and `shape_options` (read by shapes/registry.py, which imports the
classes). The command line (`loadline run --shape`, its --help) reads this catalog instead of
importing the classes: a shape imports Locust, and Locust's gevent monkey-patching must stay out of
the command-line process, which runs Locust as a child in its own gevent world. A unit test keeps
the two views equal.

Where shapes come from: every module of the `shapes` package, plus the modules named in
LOADLINE_SHAPE_MODULES (comma-separated file paths or dotted module names), so a shape kept in a
file of its own (a test fixture, a team's private shape) joins without touching any other file.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import pkgutil
import re
from dataclasses import dataclass
from pathlib import Path

from loadline import shapes
from loadline.core.errors import UsageError

ENV = "LOADLINE_SHAPE_MODULES"
NAME = re.compile(r"[a-z][a-z0-9_-]*\Z")


@dataclass(frozen=True)
class ShapeSource:
    module: str  # the name the module is imported under (a file gets a name made from its path)
    path: Path
    from_file: bool = False  # named by path in LOADLINE_SHAPE_MODULES: imported from the file itself


@dataclass(frozen=True)
class ShapeEntry:
    name: str  # `loadline run --shape NAME`, `--shape NAME` / `shape = NAME` for Locust
    class_name: str  # what the web UI's class picker shows
    summary: str  # the first line of the class docstring
    source: ShapeSource
    # offers arrival rates (`open_loop = True` in its body, or a RateShape base): `loadline run` then
    # implies --scenario rate
    open_loop: bool = False


def sources(env: str | None = None) -> list[ShapeSource]:
    """The modules that may hold shapes: the `shapes` package's, then those named in LOADLINE_SHAPE_MODULES."""
    found = [_module_source(f"loadline.shapes.{info.name}") for info in pkgutil.iter_modules(shapes.__path__)]
    spec = os.environ.get(ENV, "") if env is None else env
    for item in (part.strip() for part in spec.split(",")):
        if item:
            found.append(_file_source(item) if item.endswith(".py") or os.sep in item else _module_source(item))
    return found


def catalog(env: str | None = None) -> dict[str, ShapeEntry]:
    """Every declared shape by name, sorted by name; UsageError (one line) on a duplicate or bad declaration."""
    entries: dict[str, ShapeEntry] = {}
    class_names: dict[str, ShapeEntry] = {}
    for source in sources(env):
        for entry in _declared(source):
            for seen in (entries.get(entry.name), class_names.get(entry.class_name)):
                if seen is not None and seen.source.path != entry.source.path:
                    raise UsageError(
                        f"shape {entry.name!r} ({entry.class_name}, {entry.source.path}) clashes with "
                        f"{seen.name!r} ({seen.class_name}, {seen.source.path}): names must be unique"
                    )
            entries[entry.name] = class_names[entry.class_name] = entry
    return dict(sorted(entries.items()))


def names(env: str | None = None) -> list[str]:
    return list(catalog(env))


def summary_of(docstring: str | None) -> str:
    """The first line of a docstring: the one-line summary shown by --help and docs/shapes.md."""
    return (docstring or "").strip().split("\n", 1)[0].strip()


def _module_source(module: str) -> ShapeSource:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise UsageError(f"{ENV}: no Python module named {module!r}")
    return ShapeSource(module, Path(spec.origin))


def _file_source(item: str) -> ShapeSource:
    path = Path(item).resolve()
    if not path.is_file():
        raise UsageError(f"{ENV}: shape file not found: {item}")
    # One stable module name per file (two files may share a stem), the same in every process.
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:8]
    return ShapeSource(f"_loadline_shape_{path.stem}_{digest}", path, from_file=True)


def _declared(source: ShapeSource) -> list[ShapeEntry]:
    """The classes of the module whose body says `shape_name = "..."`, read with `ast` (nothing is imported)."""
    try:
        tree = ast.parse(source.path.read_text(encoding="utf-8"), filename=str(source.path))
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise UsageError(f"shape module {source.path} is unreadable: {exc}") from None
    entries = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        name = _shape_name(node, source)
        if name is None:
            continue
        summary = summary_of(ast.get_docstring(node))
        if not summary:
            raise UsageError(
                f"shape {name!r} ({node.name}, {source.path}) needs a docstring: its first line is "
                f"the summary shown by `loadline run --help`"
            )
        entries.append(ShapeEntry(name, node.name, summary, source, _open_loop(node)))
    return entries


def _shape_name(node: ast.ClassDef, source: ShapeSource) -> str | None:
    for statement in node.body:
        target = (
            statement.targets[0]
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1
            else (statement.target if isinstance(statement, ast.AnnAssign) else None)
        )
        if not (isinstance(target, ast.Name) and target.id == "shape_name"):
            continue
        assert isinstance(statement, (ast.Assign, ast.AnnAssign))  # where target came from
        value = statement.value
        if not (isinstance(value, ast.Constant) and isinstance(value.value, str) and NAME.match(value.value)):
            raise UsageError(
                f"{node.name} in {source.path}: shape_name must be a literal lowercase name "
                f'like "stepped" (letters, digits, - and _)'
            )
        return value.value
    return None


def _open_loop(node: ast.ClassDef) -> bool:
    if any(isinstance(base, ast.Name) and base.id == "RateShape" for base in node.bases):
        return True
    return any(
        isinstance(st, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "open_loop" for t in st.targets)
        and isinstance(st.value, ast.Constant)
        and st.value.value is True
        for st in node.body
    )
