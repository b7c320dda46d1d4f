"""The processes of one `loadline run` and their resident memory, read from /proc (soak_memory.py).

The processes are the descendants of the `loadline run` child, told apart by command line:
`loadline sim` is the simulator; a Locust process whose parent is not Locust is the master, its
forked children (same command line) are the workers. A process is known by its pid *and* start
time, so a reused pid is never taken for one of the run's (nor killed at the end).
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

TICK_S = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    start: int  # starttime in ticks: tells a reused pid apart
    cpu_s: float
    cmdline: str


def read_procs() -> dict[int, Proc]:
    procs = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # ended meanwhile
            continue
        pid = int(entry.name)
        procs[pid] = Proc(pid, int(fields[1]), int(fields[19]), (int(fields[11]) + int(fields[12])) / TICK_S, cmdline)
    return procs


def descendants(root: int, procs: dict[int, Proc]) -> list[Proc]:
    children: dict[int, list[Proc]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p)
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child.pid)
    return out


def role_of(p: Proc, procs: dict[int, Proc], workers: int) -> str | None:
    if " loadline sim " in p.cmdline:
        return "simulator"
    if "locust.main" in p.cmdline:
        parent = procs.get(p.ppid)
        if parent is not None and "locust.main" in parent.cmdline:
            return "worker"  # forked by the master (Locust's --processes): same command line
        return "master" if workers else "local"
    return None  # the option precheck, anything else


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


@dataclass
class Sample:
    wall: float
    role: str
    pid: int
    rss_kib: int
    cpu_s: float
    load1: float


def sample_once(root: int, workers: int, seen: dict[int, int]) -> list[Sample]:
    """One RSS reading of every process of the run; `seen` collects pid -> starttime for the cleanup."""
    procs = read_procs()
    wall, load1 = time.time(), float(Path("/proc/loadavg").read_text().split()[0])
    out = []
    for p in descendants(root, procs):
        seen.setdefault(p.pid, p.start)
        role = role_of(p, procs, workers)
        rss = rss_kib(p.pid) if role else None
        if role and rss:
            out.append(Sample(wall, role, p.pid, rss, p.cpu_s, load1))
    return out


def kill_leftovers(seen: dict[int, int]) -> list[int]:
    """SIGKILL every process of the run still alive (same pid *and* start time: never a stranger).
    loadline run puts Locust and the simulator in sessions of their own, so one process group is not enough."""
    procs, killed = read_procs(), []
    for pid, start in seen.items():
        if pid in procs and procs[pid].start == start:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
    return killed
