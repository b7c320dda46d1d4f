"""Child processes that end with the `loadline run` that started them.

`loadline run` starts the simulator and Locust in their own sessions (so a terminal's Ctrl-C reaches
only `loadline run`, which then stops them in order). The price: if `loadline run` itself is killed
(SIGKILL, an OOM kill, a CI timeout), nothing stops them, and an orphaned simulator keeps its port
and a CPU. Linux can tie a child to its parent: prctl(PR_SET_PDEATHSIG) delivers a signal to the
child when the parent dies. The parent passes its pid in PARENT_PID_ENV; the child arms the signal
early in its start-up (`die_with_parent`), SIGTERM, so Locust and the simulator still stop the way
they stop on any SIGTERM (Locust writes what it measured).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PARENT_PID_ENV = "LOADLINE_PARENT_PID"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default: ours) plus our pid, for a child that should end with us."""
    return {**(os.environ if env is None else env), PARENT_PID_ENV: str(os.getpid())}


def die_with_parent() -> bool:
    """Arm SIGTERM on the death of the parent named in PARENT_PID_ENV. True when armed.

    Only the direct child arms it (its parent's pid is the one named): processes that child forks
    (Locust's --processes workers) inherit the variable but have another parent, and their own
    master stops them. Not Linux, or no such variable: nothing to do."""
    named = os.environ.get(PARENT_PID_ENV, "")
    if not sys.platform.startswith("linux") or not named.isdigit() or os.getppid() != int(named):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
        return False
    # the parent may have died between our start and the prctl: then it is already gone
    if os.getppid() != int(named):
        os.kill(os.getpid(), signal.SIGTERM)
    return True
