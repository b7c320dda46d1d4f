"""A wheel built from the repository, installed into a fresh venv, runs `loadline run` and
`loadline report` from a directory that is not the checkout (runs from an installed wheel).

Offline and quick: the wheel is built with this venv's setuptools (no build isolation, no index);
the fresh venv gets only the wheel, and reaches the already-installed dependencies (Locust, pandas...)
through a .pth line naming this venv's site-packages. A .pth line adds a directory but does not run
the .pth files inside it, so this venv's editable loadline (its import finder) stays out of sight.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What a build needs (an sdist's content): the code packages, the shipped folders, metadata.
BUILD_INPUTS = ("pyproject.toml", "README.md", "loadline", "shapes", "analysis", "simulator", "configs", "locustfiles")
SHIPPED_SUFFIXES = {".conf", ".toml", ".jsonl", ".py", ".html", ".css", ".js"}
# repository folder -> where the wheel puts it (site-packages relative): the data the code reads at run time
SHIPPED_FOLDERS = (
    ("configs", "loadline_configs"),
    ("locustfiles", "loadline_locustfiles"),
    ("loadline/runtime/webui_assets", "loadline/runtime/webui_assets"),
)
FOREIGN = ("analysis", "shapes", "simulator")  # generic names Loadline must not own in site-packages


def sh(cmd: list, cwd: Path, timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False, env=env
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """A fresh venv with the wheel installed; returns its paths and a clean environment."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"  # a copy: building in the checkout would leave build/ in everyone's way
    source.mkdir()
    for name in BUILD_INPUTS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, source / name)
    built = sh(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            tmp / "dist",
            source,
        ],
        tmp,
        300,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    # quiet: no setuptools warning per configs/ sub-folder (include-package-data = false in pyproject.toml)
    assert "BuildBackendWarning" not in built.stdout + built.stderr, built.stderr[-2000:]
    (wheel,) = (tmp / "dist").glob("loadline-*.whl")

    venv = tmp / "venv"
    made = sh([sys.executable, "-m", "venv", "--without-pip", venv], tmp, 120)
    assert made.returncode == 0, made.stderr[-2000:]
    python = venv / "bin" / "python"
    # this venv's pip, run by the fresh interpreter: it sees only the fresh venv, installs there
    done = sh([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", wheel], tmp, 300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    site = Path(sh([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp, 60).stdout.strip())
    (site / "_loadline_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    for name in FOREIGN:  # other distributions' generic top-level packages, installed beside Loadline
        (site / name).mkdir()
        (site / name / "__init__.py").write_text(f"OWNER = 'another distribution'\nraise_if_loadline = {name!r}\n")

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LOADLINE_SHAPE_MODULES", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    work = tmp / "elsewhere"
    work.mkdir()
    return {"venv": venv, "python": python, "site": site, "env": env, "work": work}


def test_the_installed_wheel_is_its_own_copy_with_every_shipped_file(installed):
    """Every shipped file arrives, under loadline's own names, beside other distributions' `analysis`,
    `shapes` and `simulator` (the fixture installs those; the runs below work beside them too)."""
    probe = sh(
        [
            installed["python"],
            "-c",
            "import loadline, loadline.shapes as s, loadline.analysis.report.build, "
            "loadline.simulator.server, loadline_configs, loadline_locustfiles as l, analysis, shapes, simulator; "
            "print(loadline.__file__, s.__file__, loadline_configs.__file__, l.__file__); "
            "print(analysis.OWNER, shapes.OWNER, simulator.OWNER)",
        ],
        installed["work"],
        60,
        installed["env"],
    )
    assert probe.returncode == 0, probe.stderr[-2000:]
    ours, theirs = probe.stdout.splitlines()
    assert all(path.startswith(str(installed["venv"])) for path in ours.split())
    # the wheel brought no generic top-level package: the ones of those names are the other distribution's
    assert theirs == " ".join(["another distribution"] * 3)
    for data in ("core/verdict.schema.json", "analysis/report/templates/report.html"):  # package data
        assert (installed["site"] / "loadline" / data).is_file(), data
    for folder, package in SHIPPED_FOLDERS:
        in_repo = {
            p.relative_to(ROOT / folder)
            for p in (ROOT / folder).rglob("*")
            if p.suffix in SHIPPED_SUFFIXES and "__pycache__" not in p.parts
        }
        shipped = {
            p.relative_to(installed["site"] / package)
            for p in (installed["site"] / package).rglob("*")
            if p.suffix in SHIPPED_SUFFIXES and "__pycache__" not in p.parts
        }
        assert in_repo == shipped, f"{folder}/ and the wheel's {package} differ"


def test_loadline_run_and_report_work_from_another_directory(installed):
    loadline, work, env = installed["venv"] / "bin" / "loadline", installed["work"], installed["env"]
    # shipped SLO by its repository path, shipped simulator profile by name; a few users for 4 s (each
    # sends its first request at once, then thinks ~8 s: 10 s added at most a second request per user)
    ran = sh(
        [
            loadline,
            "run",
            "--sim-profile",
            "tiny",
            "--users",
            "3",
            "--spawn-rate",
            "3",
            "--run-time",
            "4s",
            "--scenario",
            "single",
            "--slo",
            "configs/slo/relaxed.toml",
            "--no-report",
            "--",
            "--max-tokens",
            "32",
        ],
        work,
        180,
        env,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    run_dir = work / ran.stdout.strip().splitlines()[-1]  # under --out runs/ of the current directory
    assert (run_dir / "requests.csv").is_file()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "finished" and manifest["git_revision"] is None  # a wheel has no checkout

    report = sh([loadline, "report", run_dir, "--slo", "configs/slo/relaxed.toml"], work, 180, env)
    assert report.returncode in (0, 1), report.stderr[-3000:]
    for name in ("report.html", "summary.md", "verdict.json"):
        assert (run_dir / "report" / name).is_file(), name


def test_a_shipped_profile_runs_its_shape_from_another_directory(installed):
    """configs/profiles/quick-look.conf names locustfiles/chat.py,locustfiles/shape.py and `shape = stepped`."""
    loadline, work, env = installed["venv"] / "bin" / "loadline", installed["work"], installed["env"]
    ran = sh(
        [
            loadline,
            "run",
            "--config",
            "configs/profiles/quick-look.conf",
            "--sim-profile",
            "tiny",
            "--time-scale",
            "60",
            "--no-report",
            "--",
            "--max-tokens",
            "32",
        ],
        work,
        240,
        env,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    run_dir = work / ran.stdout.strip().splitlines()[-1]
    assert json.loads((run_dir / "manifest.json").read_text())["shape"] == "StepShape"
    labels = [line.split(",")[1] for line in (run_dir / "phases.csv").read_text().splitlines()[1:]]
    assert labels[0] == "baseline" and labels[1].startswith("step-1")
