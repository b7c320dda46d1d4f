"""What the wheel ships (pyproject.toml) and how a user's path finds the shipped files (loadline/core/resources.py)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from loadline.core import resources
from loadline.simulator.config import profile_path

ROOT = Path(__file__).resolve().parents[2]
CODE_ROOTS = ("loadline", "shapes", "analysis", "simulator")
# The design's top-level folders, installed under Loadline's namespace: loadline/<name> is a symlink to ../<name>.
NAMESPACED = ("shapes", "analysis", "simulator")


def package_name(init: Path) -> str:
    parts = init.parent.relative_to(ROOT).parts
    return ".".join(("loadline", *parts) if parts[0] in NAMESPACED else parts)


def setuptools_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_code_package_is_in_the_explicit_package_list():
    found = {
        package_name(init)
        for root in CODE_ROOTS
        for init in (ROOT / root).rglob("__init__.py")
        if not init.relative_to(ROOT).parts[1:2]
        or init.relative_to(ROOT).parts[:2] not in {("loadline", name) for name in NAMESPACED}
    }
    listed = set(setuptools_config()["packages"])
    assert found - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert listed - found == set(resources.SHIPPED.values())


def test_the_design_folders_are_loadline_subpackages_not_top_level_names():
    """No generic top-level name (`analysis`, `shapes`, `simulator`) in site-packages: each folder is reached
    as loadline.<name> through a symlink, and no code imports the bare name (a second copy of every module)."""
    for name in NAMESPACED:
        link = ROOT / "loadline" / name
        assert link.is_symlink() and link.resolve() == ROOT / name
    assert not {p for p in setuptools_config()["packages"] if p.split(".")[0] in NAMESPACED}
    bare = [
        f"{path.relative_to(ROOT)}: {line.strip()}"
        for root in (*CODE_ROOTS, "tests", "benchmarks", "locustfiles")
        for path in (ROOT / root).rglob("*.py")
        if not path.relative_to(ROOT).parts[0] == "loadline"
        or not path.relative_to(ROOT).parts[1:2]
        or path.relative_to(ROOT).parts[1] not in NAMESPACED
        for line in path.read_text(encoding="utf-8").splitlines()
        if any(line.lstrip().startswith((f"from {n}.", f"from {n} import", f"import {n}")) for n in NAMESPACED)
    ]
    assert bare == []


def test_the_shipped_packages_are_the_top_level_folders_themselves():
    mapping = setuptools_config()["package-dir"]
    assert {folder: mapping[package] for folder, package in resources.SHIPPED.items()} == {
        "configs": "configs",
        "locustfiles": "locustfiles",
    }
    # this checkout is installed editable: importlib.resources leads to the folders, not to a copy
    assert resources.shipped_dir("configs") == ROOT / "configs"
    assert resources.locustfile("shape.py") == ROOT / "locustfiles" / "shape.py"
    assert resources.checkout_root() == ROOT


def test_a_relative_path_is_looked_up_here_first_then_in_the_shipped_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shipped = resources.resolve("configs/profiles/standard.conf")
    assert shipped == ROOT / "configs" / "profiles" / "standard.conf"
    (tmp_path / "configs" / "profiles").mkdir(parents=True)
    (tmp_path / "configs" / "profiles" / "standard.conf").write_text("# mine\n")
    assert resources.resolve("configs/profiles/standard.conf") == Path("configs/profiles/standard.conf")


@pytest.mark.parametrize("path", ["configs/profiles/nope.conf", "my.conf", "other/configs/x.toml"])
def test_a_path_found_nowhere_comes_back_as_given(tmp_path, monkeypatch, path):
    monkeypatch.chdir(tmp_path)
    assert resources.resolve(path) == Path(path)


@pytest.mark.parametrize(
    ("shelf", "name", "file"),
    [
        ("profile", "standard", "profiles/standard.conf"),
        ("profile", "traffic-surprise.conf", "profiles/traffic-surprise.conf"),
        ("slo", "strict", "slo/strict.toml"),
        ("slo", "drill.toml", "slo/drill.toml"),
    ],
)
def test_a_shipped_profile_or_slo_by_its_bare_name(tmp_path, monkeypatch, shelf, name, file):
    monkeypatch.chdir(tmp_path)
    assert resources.resolve(name, shelf) == ROOT / "configs" / file
    assert resources.resolve(name) == Path(name)  # where no shelf is meant, a name is only a path
    (tmp_path / name).write_text("# mine\n")  # a file of that name here comes first
    assert resources.resolve(name, shelf) == Path(name)


@pytest.mark.parametrize(("shelf", "name"), [("profile", "strict"), ("slo", "standard"), ("slo", "sub/strict")])
def test_a_name_on_the_wrong_shelf_or_with_a_folder_is_not_found(tmp_path, monkeypatch, shelf, name):
    monkeypatch.chdir(tmp_path)
    assert resources.resolve(name, shelf) == Path(name)
    assert "default, drill, relaxed, strict" in resources.shipped_names("slo")


def test_simulator_profiles_by_name_or_by_path_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert profile_path("tiny") == ROOT / "configs" / "sim" / "tiny.toml"
    assert profile_path("configs/sim/tiny.toml") == ROOT / "configs" / "sim" / "tiny.toml"


def test_the_runtime_finds_files_through_resources_only():
    """No `Path(__file__)` walks up out of its package (to configs/, locustfiles/): only a checkout has those."""
    offenders = [
        f"{path.relative_to(ROOT)}: {line.strip()}"
        for root in CODE_ROOTS
        for path in (ROOT / root).rglob("*.py")
        for line in path.read_text(encoding="utf-8").splitlines()
        if "Path(__file__)" in line and ("parents[" in line or "parent.parent" in line)
    ]
    assert offenders == []


def test_test_files_have_unique_names_across_tiers():
    # The tiers' folders are not packages, so pytest imports test files by their base name: two
    # files with one name in two tiers stop the whole collection ("import file mismatch").
    tests = Path(__file__).resolve().parents[1]
    names = [p.name for p in tests.rglob("test_*.py")]
    assert len(names) == len(set(names)), sorted(n for n in set(names) if names.count(n) > 1)
