"""CPU caps for benchmark processes: a cgroup per process with a CFS quota (root only).

Why: on a 2-core machine the target and N workers share the cores, so "tokens/s of 2 workers against
one" measures the box, not the generator. Capping every worker at the same share of a core (here
0.5) gives each worker the same CPU whatever N is, with room left for the target and the master;
the ratio then says whether a second worker adds its share (no shared bottleneck in the master, the
clock sync or the record shipping) - the figure that carries over to a cluster where each worker has
cores of its own.

The quota is enforced per CFS period; the period is short (20 ms) so a throttled worker stalls for
at most ~10 ms at a time rather than 50 ms. cgroup v2 (cpu.max) is used where the cpu controller is
enabled at the unified root, else cgroup v1's cpu controller (cpu.cfs_quota_us).
"""

from __future__ import annotations

import os
from pathlib import Path

PERIOD_US = 20_000
V2 = Path("/sys/fs/cgroup")
V1 = Path("/sys/fs/cgroup/cpu")


class CpuCap:
    """One cgroup holding processes to `cores` of CPU (e.g. 0.5); remove() when done."""

    def __init__(self, name: str, cores: float) -> None:
        if cores <= 0:
            raise ValueError(f"a CPU cap must be > 0 cores (got {cores})")
        quota = int(cores * PERIOD_US)
        if "cpu" in _read(V2 / "cgroup.controllers").split():
            self.path = V2 / name
            self.path.mkdir(exist_ok=True)
            (self.path / "cpu.max").write_text(f"{quota} {PERIOD_US}")
        elif (V1 / "cpu.cfs_quota_us").exists():
            self.path = V1 / name
            self.path.mkdir(exist_ok=True)
            (self.path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (self.path / "cpu.cfs_quota_us").write_text(str(quota))
        else:
            raise SystemExit("--worker-cpu needs a writable cgroup cpu controller (run as root)")

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def remove(self) -> None:
        """Move what is left back to the root group, then delete the group."""
        root = self.path.parent / "cgroup.procs"
        for pid in _read(self.path / "cgroup.procs").split():
            try:
                root.write_text(pid)
            except OSError:  # the process ended meanwhile
                pass
        try:
            os.rmdir(self.path)
        except OSError:
            pass


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
