"""`make test`: the whole suite in a few pytest processes at once (4 by default), then the timing-exact tests alone.

Why not pytest-xdist: its workers start pytest inside execnet's main-thread-only model, and this
suite must monkey-patch with gevent before anything else (tests/conftest.py, as Locust does), which
breaks the worker channel. Separate pytest processes over disjoint sets of files need nothing.

Why this helps on 2 cores: most e2e tests wait on a clock (a run of N seconds against the simulator
at a given time scale): measured on 2 cores, the box was ~50 % idle with 3 processes, ~35 % with 4
(parallel phase 294 s -> 234 s; docs/architecture.md). Tests whose assertions are timing-exact
(client timings against the simulator's truth to a few ms, a CPU hog on purpose, a capacity the
engine model implies) carry `@pytest.mark.exclusive` and run after the others, with the machine to
themselves, as they did when the suite was serial.

Files are dealt to shards by their recorded durations (tests/durations.json, longest first onto the
least loaded shard); `--record` rewrites that file from this run's JUnit reports. A file not in it
counts as DEFAULT_S. Each shard's output goes to runs/test-shards/shard-K.log; the summary lines and
any failures are printed at the end. Exit code: 0 if every process passed, else the first failing one's.

    python tests/run_shards.py [--shards 4] [--record] [pytest args, e.g. -x]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DURATIONS = HERE / "durations.json"
DEFAULT_S = 5.0
TIMEOUT_S = 45 * 60  # a shard that runs longer than this is hung: CI's own limit is 90 min


def suite_files() -> list[str]:
    return sorted(str(p.relative_to(REPO)) for p in HERE.rglob("test_*.py"))


def exclusive_files() -> list[str]:
    """The files with an exclusive test (a text search: cheaper than collecting every file again)."""
    return [f for f in suite_files() if "pytest.mark.exclusive" in (REPO / f).read_text()]


def deal(files: list[str], durations: dict[str, float], shards: int) -> list[list[str]]:
    """Longest-processing-time-first: each file onto the shard with the least recorded time so far."""
    loads: list[float] = [0.0] * shards
    out: list[list[str]] = [[] for _ in range(shards)]
    for name in sorted(files, key=lambda f: -durations.get(f, DEFAULT_S)):
        k = loads.index(min(loads))
        out[k].append(name)
        loads[k] += durations.get(name, DEFAULT_S)
    return [sorted(s) for s in out if s]


def _pytest(files: list[str], marker: str, log: Path, junit: Path, extra: list[str]) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-m",
        marker,
        f"--junitxml={junit}",
        f"--basetemp={log.with_suffix('.tmp')}",
        *extra,
        *files,
    ]
    handle = open(log, "w")  # noqa: SIM115 - the child writes it; closed when the child is done
    return subprocess.Popen(cmd, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT, env=os.environ.copy())


def _wait(procs: list[tuple[str, subprocess.Popen, Path]], deadline: float) -> list[tuple[str, int, Path]]:
    done = []
    for name, proc, log in procs:
        try:
            code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
            with open(log, "a") as handle:
                handle.write(f"\nrun_shards: {name} killed after {TIMEOUT_S} s\n")
        done.append((name, code, log))
    return done


def _report(results: list[tuple[str, int, Path]]) -> None:
    for name, code, log in results:
        lines = log.read_text(errors="replace").splitlines()
        # pytest -q: everything from the first failure section on, else the last line (the summary)
        start = next(
            (i for i, line in enumerate(lines) if line.startswith(("=" * 5 + " FAILURES", "=" * 5 + " ERRORS"))), None
        )
        shown = lines[start:] if code not in (0, 5) and start is not None else lines[-3:]
        print(f"--- {name} (exit {code}, log {log.relative_to(REPO)})")
        print("\n".join(shown))


def _failed_tests(results: list[tuple[str, int, Path]]) -> list[str]:
    """pytest's one-line summaries of what failed (-q prints them at the end of each log)."""
    return [
        line
        for _, code, log in results
        if code not in (0, 5)
        for line in log.read_text(errors="replace").splitlines()
        if line.startswith(("FAILED ", "ERROR "))
    ]


def _file_of(classname: str) -> str | None:
    """tests.e2e.test_x[.TestClass] -> tests/e2e/test_x.py (JUnit names the module, not the file)."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        candidate = "/".join(parts[:end]) + ".py"
        if (REPO / candidate).exists():
            return candidate
    return None


def _record(junits: list[Path], dealt: list[str]) -> None:
    """Each dealt file's time in this run's shards; 0 for a file whose tests are all exclusive (they run
    apart): a time kept from before would deal it a share of the parallel phase it never takes."""
    per_file: dict[str, float] = defaultdict(float, {name: 0.0 for name in dealt})
    for junit in junits:
        if not junit.exists():
            continue
        for case in ET.parse(junit).getroot().iter("testcase"):
            path = _file_of(case.get("classname", ""))
            if path:
                per_file[path] += float(case.get("time", 0.0))
    merged = {**(json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}), **per_file}
    DURATIONS.write_text(json.dumps({k: round(v, 1) for k, v in sorted(merged.items())}, indent=1) + "\n")
    print(f"run_shards: recorded {len(per_file)} files in {DURATIONS}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, default=int(os.environ.get("LOADLINE_TEST_SHARDS", "4")))
    parser.add_argument("--record", action="store_true", help="rewrite tests/durations.json from this run")
    args, extra = parser.parse_known_args(argv)
    out = REPO / "runs" / "test-shards"
    out.mkdir(parents=True, exist_ok=True)
    durations = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    started = time.monotonic()
    shards = deal(suite_files(), durations, max(1, args.shards))
    procs = [
        (
            f"shard-{k}",
            _pytest(files, "not exclusive", out / f"shard-{k}.log", out / f"shard-{k}.xml", extra),
            out / f"shard-{k}.log",
        )
        for k, files in enumerate(shards)
    ]
    print(
        f"run_shards: {sum(map(len, shards))} files in {len(shards)} pytest processes, then the exclusive tests alone"
    )
    results = _wait(procs, started + TIMEOUT_S)
    solo_log = out / "exclusive.log"
    solo = _pytest(exclusive_files(), "exclusive", solo_log, out / "exclusive.xml", extra)
    results += _wait([("exclusive", solo, solo_log)], time.monotonic() + TIMEOUT_S)
    _report(results)
    print(f"run_shards: {time.monotonic() - started:.0f} s in all")
    for line in _failed_tests(results):  # last: a CI page that shows only the output's tail still names them
        print(f"run_shards: {line}")
    if args.record:
        _record(
            [out / f"shard-{k}.xml" for k in range(len(shards))], [f for files in shards for f in files]
        )  # what the dealing spreads: the exclusive tests run apart
    failed = [code for _, code, _ in results if code not in (0, 5)]  # 5: no test selected (e.g. no exclusive test)
    return failed[0] if failed else 0


if __name__ == "__main__":
    sys.exit(main())
