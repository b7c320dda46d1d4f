"""Where the shipped files are: configs/ (profiles, SLOs, prompt sets, simulator profiles, stage
files) and locustfiles/ (the entry files), and how a user's relative path finds them.

The repository's top-level configs/ and locustfiles/ are the user-facing copies and the only ones:
pyproject.toml maps them onto the packages `loadline_configs` and `loadline_locustfiles`, so
`pip install .` puts them in the wheel and `pip install -e .` points those packages at the folders
themselves. Either way they are found with importlib.resources, never relative to a source file.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from loadline.core.errors import UsageError

# first part of a user's relative path -> the package that ships that folder
SHIPPED = {"configs": "loadline_configs", "locustfiles": "loadline_locustfiles"}


def shipped_dir(folder: str) -> Path:
    """The installed copy of a top-level folder ("configs" or "locustfiles")."""
    package = SHIPPED[folder]
    try:
        root = importlib.resources.files(package)
    except ModuleNotFoundError:
        raise UsageError(
            f"Loadline's {folder}/ is not installed (no package {package}): reinstall Loadline "
            "(`pip install .`, or `pip install -e .` in a checkout)"
        ) from None
    if not isinstance(root, Path):  # Locust and the simulator get these as file paths
        raise UsageError(f"Loadline's {folder}/ is inside an archive ({root}): install Loadline unzipped")
    return root


def config_file(*parts: str) -> Path:
    """A shipped file or folder under configs/, e.g. config_file("sim", "tiny.toml")."""
    return shipped_dir("configs").joinpath(*parts)


def locustfile(name: str) -> Path:
    """A shipped entry file, e.g. locustfile("chat.py")."""
    return shipped_dir("locustfiles") / name


# a bare name given for these options -> the shipped shelf and the files' suffix ("standard" ->
# configs/profiles/standard.conf), as --sim-profile takes "tiny" for configs/sim/tiny.toml
SHELVES = {"profile": ("profiles", ".conf"), "slo": ("slo", ".toml")}


def resolve(path: str | Path, shelf: str | None = None) -> Path:
    """A user's path: as given when it exists (relative paths from the current directory), else the
    shipped copy when it starts with configs/ or locustfiles/ (so `configs/profiles/standard.conf`
    works from any directory), else, for a bare name and a `shelf` of SHELVES, the shipped file of
    that name ("standard" or "standard.conf"), else as given: the caller reports it missing."""
    given = Path(path)
    if given.is_absolute() or given.exists() or not given.parts:
        return given
    if given.parts[0] in SHIPPED:
        shipped = shipped_dir(given.parts[0]).joinpath(*given.parts[1:])
        return shipped if shipped.exists() else given
    if shelf is not None and len(given.parts) == 1:
        folder, suffix = SHELVES[shelf]
        shipped = config_file(folder, given.name if given.suffix == suffix else given.name + suffix)
        return shipped if shipped.is_file() else given
    return given


def shipped_names(shelf: str) -> str:
    """The shipped files of a shelf by name, for an error message: "burst, quick-look, ..."."""
    folder, suffix = SHELVES[shelf]
    return ", ".join(sorted(p.stem for p in config_file(folder).glob(f"*{suffix}")))


def checkout_root() -> Path | None:
    """The source checkout Loadline runs from (an editable install), None when installed from a wheel.

    The manifest's git revision is read there; a wheel has none (and the directory it sits in may
    belong to some other repository).
    """
    try:
        root = shipped_dir("configs").parent
    except UsageError:
        return None
    return root if (root / "pyproject.toml").is_file() and (root / "locustfiles").is_dir() else None
