"""A Locust worker imports neither pandas nor matplotlib, nor numpy nor the master's side (the run folder,
live stats, our web UI pages): its CPU is the measuring instrument. Flask is in every worker anyway:
`locust.main` imports Locust's own web UI (locust.web) in every process, so only our pages are kept out.

One child process does what `locust --worker -f ...` does before it connects to the master: import
`locust.main`, then load every entry file in locustfiles/ with Locust's own loader (each one imports
loadline.runtime.plugin, whose listeners import nothing later). It runs under `python -X importtime`;
the import-linter "forbidden" contracts check the same thing statically.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENTRY_FILES = sorted(p for p in (ROOT / "locustfiles").glob("*.py") if not p.name.startswith("_"))
FORBIDDEN = ("pandas", "matplotlib", "numpy")
# the master's side: loaded by the plugin only in a master or local process (loadline/runtime/master_side.py)
MASTER_ONLY = (
    "loadline.runtime.master_side",
    "loadline.runtime.collector",
    "loadline.runtime.live",
    "loadline.runtime.webui",
)
TIMEOUT_S = 120

PROBE = """
import json, sys
import locust.main  # what the `locust` command imports before it reads -f
from locust.util.load_locustfile import load_locustfile
for path in sys.argv[1:]:
    load_locustfile(path)
print(json.dumps(sorted(sys.modules)))
"""


def probe(entry_files: list[Path], cwd: Path) -> tuple[set[str], list[str]]:
    """(modules loaded, `-X importtime` lines) after loading `entry_files` as a worker does."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", PROBE, *map(str, entry_files)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    timings = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    other = [line for line in done.stderr.splitlines() if not line.startswith("import time:")]
    assert done.returncode == 0, "\n".join(other[-30:])
    return set(json.loads(done.stdout.strip().splitlines()[-1])), timings


def forbidden_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in FORBIDDEN)


def master_only_in(modules: set[str]) -> list[str]:
    """Our master-side modules; "loadline.runtime.webui" also names webui_live, webui_files, webui_page..."""
    return sorted(m for m in modules if m.startswith(MASTER_ONLY) and not m.startswith("loadline.runtime.live_"))


def imported_names(timings: list[str]) -> set[str]:
    """Module names from `import time: self | cumulative | name` lines (the name is indented by depth)."""
    return {line.rsplit("|", 1)[-1].strip() for line in timings}


def test_every_entry_file_loaded_as_a_worker_imports_no_numpy_pandas_matplotlib_nor_web_ui_pages(tmp_path):
    assert {p.name for p in ENTRY_FILES} >= {"chat.py", "single_shot.py", "completion.py"}
    modules, timings = probe(ENTRY_FILES, tmp_path)
    # the probe really loaded the worker's code: the plugin and what it wires, the users, the shapes
    assert {"loadline.runtime.plugin", "loadline.runtime.selfcheck", "loadline.client.users"} <= modules
    assert any(name.startswith("loadline.shapes.") for name in modules)
    assert forbidden_in(modules) == []
    assert master_only_in(modules) == []
    assert "flask" in modules  # Locust's own (locust.web): the check above is about our pages only
    assert forbidden_in(imported_names(timings)) == [], "\n".join(
        line for line in timings if any(name in line for name in FORBIDDEN)
    )


def test_the_probe_sees_pandas_when_an_entry_file_imports_it(tmp_path):
    # the control: the same probe, one more entry file that pulls in the report side
    extra = tmp_path / "reporting_entry.py"
    extra.write_text(
        "import loadline.runtime.plugin  # noqa: F401\nimport loadline.analysis.report.figures  # noqa: F401\n"
    )
    modules, timings = probe([ROOT / "locustfiles" / "chat.py", extra], tmp_path)
    assert {"pandas", "matplotlib", "numpy"} <= set(forbidden_in(modules))
    assert "pandas" in imported_names(timings)


def test_the_probe_sees_the_master_side_when_an_entry_file_imports_it(tmp_path):
    extra = tmp_path / "master_entry.py"
    extra.write_text(
        "import loadline.runtime.plugin  # noqa: F401\nimport loadline.runtime.master_side  # noqa: F401\n"
    )
    modules, _ = probe([ROOT / "locustfiles" / "chat.py", extra], tmp_path)
    assert {"loadline.runtime.webui", "loadline.runtime.webui_live", "loadline.runtime.live"} <= set(
        master_only_in(modules)
    )
    assert "numpy" in forbidden_in(modules)


DUMP_ENTRY = """
import json, os, sys
from pathlib import Path
from locust import events

@events.init.add_listener  # registered after the plugin's (its entry files come first): runs after it
def _dump_modules(environment, **_):
    Path(os.environ["MODULES_OUT"]).write_text(json.dumps(sorted(sys.modules)))
"""


def test_a_real_worker_after_its_init_holds_no_numpy_and_no_master_side(tmp_path):
    """A master (web UI mode: no test starts) and a worker connected to it, each listing its modules at init."""
    dump = tmp_path / "dump_modules.py"
    dump.write_text(DUMP_ENTRY)
    files = ",".join(str(p) for p in (ROOT / "locustfiles" / "chat.py", ROOT / "locustfiles" / "shape.py", dump))
    port = str(free_port())
    roles = {
        "master": [
            "--master",
            "--master-bind-host",
            "127.0.0.1",
            "--master-bind-port",
            port,
            "--web-host",
            "127.0.0.1",
            "--web-port",
            str(free_port()),
            "--host",
            "http://127.0.0.1:9",
        ],
        "worker": ["--worker", "--master-host", "127.0.0.1", "--master-port", port],
    }
    procs = []
    try:
        for role, args in roles.items():
            env = {**os.environ, "MODULES_OUT": str(tmp_path / f"{role}.json")}
            with open(tmp_path / f"{role}.log", "wb") as log:
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "locust", "-f", files, *args],
                        cwd=tmp_path,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=env,
                    )
                )
        deadline = time.monotonic() + TIMEOUT_S
        while not all((tmp_path / f"{role}.json").exists() for role in roles) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)  # each dump is one write: let the last one finish
        logs = "\n".join((tmp_path / f"{role}.log").read_text()[-1500:] for role in roles)
        master, worker = (set(json.loads((tmp_path / f"{role}.json").read_text())) for role in roles)
    except FileNotFoundError:
        raise AssertionError(f"no module list from both processes within {TIMEOUT_S} s:\n{logs}") from None
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=10)
    assert "loadline.runtime.plugin" in worker and "loadline.runtime.transport" in worker, logs
    assert forbidden_in(worker) == [] and master_only_in(worker) == []
    # the control: the master loaded its side at the same point
    assert {"loadline.runtime.master_side", "loadline.runtime.webui_live", "numpy"} <= master


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
