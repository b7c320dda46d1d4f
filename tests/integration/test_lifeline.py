"""A child started with child_env() that calls die_with_parent() ends when its parent is SIGKILLed
(loadline/core/lifeline.py): `loadline run` killed hard leaves no simulator or Locust behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux's")

# The parent starts the child the way loadline run does (own session, child_env) and prints its pid.
PARENT = textwrap.dedent("""
    import subprocess, sys, time
    from loadline.core.lifeline import child_env
    child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], env=child_env(), start_new_session=True,
                             stdout=sys.stdout)
    time.sleep(60)
""")
ARMED_CHILD = textwrap.dedent("""
    import os, sys, time
    from loadline.core.lifeline import die_with_parent
    print(os.getpid(), die_with_parent(), flush=True)
    time.sleep(60)
""")
# a child of the child inherits the variable but has another parent: it must not arm (nor kill itself)
GRANDCHILD = textwrap.dedent("""
    import os, subprocess, sys, time
    code = "from loadline.core.lifeline import die_with_parent; print(die_with_parent(), flush=True)"
    print(os.getpid(), subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                      timeout=30).stdout.strip(), flush=True)
    time.sleep(60)
""")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (dead, not yet reaped by init) counts as gone
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _start(child_code: str) -> tuple[subprocess.Popen, int, str]:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, child_code], stdout=subprocess.PIPE, text=True)
    line = parent.stdout.readline().split()  # the child's "pid armed"
    assert len(line) == 2, line
    return parent, int(line[0]), line[1]


@pytest.mark.parametrize("code, armed", [(ARMED_CHILD, "True"), (GRANDCHILD, "False")])
def test_the_direct_child_ends_with_a_killed_parent_and_only_it_arms(code, armed):
    parent, child, said = _start(code)
    try:
        assert said == armed
        if armed == "True":
            parent.kill()
            parent.wait(10)
            deadline = time.monotonic() + 10
            while _alive(child) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not _alive(child), "the child outlived its SIGKILLed parent"
    finally:
        parent.kill()
        if _alive(child):
            os.kill(child, signal.SIGKILL)


def test_without_the_variable_nothing_is_armed():
    env = {k: v for k, v in os.environ.items() if k != "LOADLINE_PARENT_PID"}
    out = subprocess.run(
        [sys.executable, "-c", "from loadline.core.lifeline import die_with_parent; print(die_with_parent())"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.stdout.strip() == "False", out.stderr
