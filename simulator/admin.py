"""The admin API (off unless --admin): switch faults and kill/restart replicas.

Loopback only by default. `--admin-host ADDR` serves it on another address so a drill on another
host (a distributed master) can reach it; that needs `--admin-token` (or LOADLINE_SIM_ADMIN_TOKEN),
and every admin request then carries `Authorization: Bearer TOKEN` (401 otherwise). A non-loopback
address without a token is refused at startup: anyone on the network could kill replicas.

    GET  /admin/state                    faults, replicas (up, in flight, KV usage, restarts)
    POST /admin/faults                   {"error_rate": 0.2, "latency_spike": 3, ...}  (subset)
    POST /admin/faults/clear             every fault back to off
    POST /admin/replicas/N/kill          {"restart_after_s": 5}  (model seconds; null = stay down)
    POST /admin/replicas/N/restart       {"restart_after_s": 5}  down now, back after the delay
    POST /admin/replicas/N/start         bring a down replica back now
"""

from __future__ import annotations

import hmac
import ipaddress
import json

from loadline.core.errors import UsageError
from loadline.simulator.app import SimApp
from loadline.simulator.http import BadRequest, Connection, Request, response
from loadline.simulator.openai_api import ApiError, parse_body
from loadline.simulator.wire import error_body


def _is_loopback(peer: str) -> bool:
    try:
        return ipaddress.ip_address(peer).is_loopback
    except ValueError:
        return False


def check_admin_bind(host: str, token: str | None) -> None:
    """UsageError for an admin API on a non-loopback address without a token."""
    if token:
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        raise UsageError(
            f"--admin-host {host} is not a loopback address: set --admin-token (or "
            "LOADLINE_SIM_ADMIN_TOKEN) so only drills that know it can inject faults"
        )


class AdminApp:
    def __init__(self, app: SimApp, token: str | None = None) -> None:
        self.app = app
        self._auth = f"Bearer {token}".encode() if token else None

    def on_connect(self, conn: Connection) -> None:
        if self._auth is None and not _is_loopback(conn.peer):  # no token: loopback peers only
            conn.close()

    def on_close(self, conn: Connection) -> None:
        pass

    def on_bad_request(self, conn: Connection, error: BadRequest) -> None:
        self._send(conn, error.status, error_body(str(error), error.status))

    def _send(self, conn: Connection, status: int, body: bytes) -> None:
        conn.write(response(status, body, keep_alive=conn.keep_alive))
        conn.finish_response()

    def handle(self, conn: Connection, req: Request) -> None:
        if self._auth is not None and not hmac.compare_digest(
            req.headers.get("authorization", "").encode(), self._auth
        ):
            return self._send(conn, 401, error_body("admin API: missing or wrong bearer token", 401))
        try:
            result = self._route(req)
        except (ApiError, UsageError) as exc:
            status = getattr(exc, "status", 400)
            return self._send(conn, status, error_body(str(exc), status))
        self._send(conn, 200, json.dumps(result).encode())

    def state(self) -> dict:
        app = self.app
        return {
            "faults": app.faults.as_dict(),
            "active": app.faults.active(),
            "replicas": [
                {
                    "index": e.index,
                    "up": e.up,
                    "in_flight": e.in_flight,
                    "running": len(e.running),
                    "waiting": e.num_waiting,
                    "kv_cache_usage": e.pool.usage(),
                    "leaked_blocks": e.pool.leaked,
                    "restarts": dict(e.restarts),
                }
                for e in app.engines
            ],
        }

    def _route(self, req: Request) -> dict:
        parts = [p for p in req.path.split("/") if p]
        if req.method == "GET" and parts == ["admin", "state"]:
            return self.state()
        if req.method != "POST" or parts[:1] != ["admin"]:
            raise ApiError(404, f"{req.method} {req.path} is not an admin route")
        body = parse_body(req.body) if req.body.strip() else {}
        if parts == ["admin", "faults"]:
            self.app.faults.update(body)
            return self.state()
        if parts == ["admin", "faults", "clear"]:
            self.app.faults.update(
                {
                    "error_rate": 0,
                    "latency_spike": 1,
                    "leak_blocks_per_s": 0,
                    "max_connections": 0,
                    "accept_delay_ms": 0,
                }
            )
            return self.state()
        if len(parts) == 4 and parts[1] == "replicas" and parts[3] in ("kill", "restart", "start"):
            return self._replica(parts[2], parts[3], body)
        raise ApiError(404, f"POST {req.path} is not an admin route")

    def _replica(self, index_text: str, action: str, body: dict) -> dict:
        engines = self.app.engines
        if not index_text.isdigit() or int(index_text) >= len(engines):
            raise ApiError(404, f"no replica {index_text} (there are {len(engines)})")
        engine = engines[int(index_text)]
        delay = body.get("restart_after_s", self.app.config.restart_delay_s)
        if delay is not None and (isinstance(delay, bool) or not isinstance(delay, (int, float)) or delay < 0):
            raise ApiError(400, "restart_after_s must be a number >= 0 or null")
        if action == "start":
            engine.start()
        elif not engine.kill(action, delay) and action == "restart" and delay is not None:
            engine.schedule_start(delay)  # already down: just come back after the delay
        return self.state()
