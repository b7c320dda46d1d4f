"""The admin API's replies to bad input, in process: AdminApp routes a parsed request, no socket needed.

(Faults switched through /admin and seen in /metrics and the truth log need the running server:
tests/integration/test_sim_faults.py.)
"""

from __future__ import annotations

import json

from loadline.simulator.admin import AdminApp
from loadline.simulator.app import SimApp
from loadline.simulator.config import build_config
from loadline.simulator.engine import Engine
from loadline.simulator.http import Request
from loadline.simulator.server import initial_faults
from loadline.simulator.truth import TruthLog


class RecordingConnection:
    """What AdminApp uses of a simulator.http.Connection: write the reply, finish it."""

    keep_alive = True
    peer = "127.0.0.1"

    def __init__(self) -> None:
        self.sent = b""
        self.finished = 0

    def write(self, data: bytes) -> None:
        self.sent += data

    def finish_response(self) -> None:
        self.finished += 1

    def status_and_body(self) -> tuple[int, dict]:
        head, _, body = self.sent.partition(b"\r\n\r\n")
        return int(head.split(b" ", 2)[1]), json.loads(body)


def admin_app(profile: str = "tiny") -> AdminApp:
    config = build_config(profile, {})
    faults = initial_faults(config)
    engines = [Engine(i, config, faults) for i in range(config.replicas)]
    return AdminApp(SimApp(config, faults, engines, TruthLog(None), None, lambda: b""))


def post(admin: AdminApp, path: str, body: dict) -> tuple[int, dict]:
    conn = RecordingConnection()
    admin.handle(conn, Request("POST", path, {}, json.dumps(body).encode(), True, conn.peer))
    assert conn.finished == 1
    return conn.status_and_body()


def test_bad_admin_input_is_a_4xx():
    admin = admin_app()
    for path, body in (
        ("/admin/faults", {"error_rate": 2}),
        ("/admin/faults", {"nonsense": 1}),
        ("/admin/replicas/7/kill", {}),
    ):
        status, reply = post(admin, path, body)
        assert 400 <= status < 500 and "error" in reply, (path, body, status, reply)
    # the refused input changed nothing
    status, state = post(admin, "/admin/faults", {})
    assert status == 200 and state["active"] == [] and all(r["up"] for r in state["replicas"])
