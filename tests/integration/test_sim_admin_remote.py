"""The admin API on another address (drills from a master on another host): only with a token."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from spine_helpers import REPO

from loadline.shapes.drill import ADMIN_TOKEN_ENV, FaultAction, post

TOKEN = "s3cret-admin-token"


def _get(url: str, token: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_non_loopback_admin_address_without_a_token_is_refused():
    proc = subprocess.run(
        [sys.executable, "-m", "loadline", "sim", "--port", "0", "--admin", "--admin-host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode == 2
    assert "--admin-token" in proc.stderr and "Traceback" not in proc.stderr


def test_the_admin_api_on_any_address_answers_only_with_the_token(sim_server, monkeypatch, tmp_path):
    sim = sim_server("tiny", "--admin", "--admin-host", "0.0.0.0", "--admin-token", TOKEN)
    assert sim.admin_url.startswith("http://0.0.0.0:")
    state = sim.admin_url + "/admin/state"
    assert _get(state) == 401 and _get(state, "wrong") == 401
    assert _get(state, TOKEN) == 200
    monkeypatch.delenv(ADMIN_TOKEN_ENV, raising=False)
    kill = FaultAction("/admin/replicas/0/kill", json.dumps({"restart_after_s": None}))
    assert post(sim.admin_url, kill).startswith("failed: HTTP 401")
    monkeypatch.setenv(ADMIN_TOKEN_ENV, TOKEN)  # what a drill on a remote master sends
    assert post(sim.admin_url, kill) == "ok"
    for log in tmp_path.glob("sim-*.stderr"):
        assert TOKEN not in log.read_text(errors="replace")


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_loopback_without_a_token_stays_the_default(sim_server, host):
    sim = sim_server("tiny", "--admin", "--admin-host", host)
    assert _get(sim.admin_url + "/admin/state") == 200
