"""Start the simulator: replicas, front end, optional admin endpoint, housekeeping, clean shutdown.

Startup contract (used by `loadline run` and the tests): once the socket is bound, the FIRST line
on stdout is exactly `loadline-sim listening on http://HOST:PORT` (flushed); with --admin a second
line `loadline-sim admin on http://ADMIN_HOST:PORT` follows (127.0.0.1 unless --admin-host).
SIGTERM or SIGINT stop the server, closing connections and flushing the truth log.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from dataclasses import dataclass

from loadline.simulator import kernel_rx
from loadline.simulator.admin import AdminApp
from loadline.simulator.app import SimApp
from loadline.simulator.config import SimConfig
from loadline.simulator.engine import Engine
from loadline.simulator.faults import FaultState
from loadline.simulator.http import Connection
from loadline.simulator.metrics import make_registry, render
from loadline.simulator.truth import TruthLog

TICK_S = 0.25  # housekeeping period (wall time): GPU utilization window, leak, truth flush


@dataclass
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8000
    truth_path: str | None = None
    api_key: str | None = None
    admin: bool = False
    admin_port: int = 0
    admin_host: str = "127.0.0.1"
    admin_token: str | None = None  # required (Bearer) on every admin request when set


def initial_faults(config: SimConfig) -> FaultState:
    return FaultState(
        error_rate=config.error_rate,
        latency_spike=config.latency_spike,
        leak_blocks_per_s=config.leak_blocks_per_s,
        max_connections=config.max_connections,
        accept_delay_ms=config.accept_delay_ms,
    )


class Housekeeping:
    """Every tick: GPU utilization from busy time, memory leak (and its OOM restart), truth flush."""

    def __init__(self, app: SimApp) -> None:
        self.app = app
        self._busy = {e.index: 0.0 for e in app.engines}
        self._leak_debt = {e.index: 0.0 for e in app.engines}

    def tick(self, dt: float) -> None:
        app = self.app
        for engine in app.engines:
            busy = engine.stats.busy_seconds
            engine.gpu_util = min(1.0, (busy - self._busy[engine.index]) / dt) if engine.up else 0.0
            self._busy[engine.index] = busy
            self._leak(engine, dt)
        app.truth.flush()

    def _leak(self, engine: Engine, dt: float) -> None:
        rate = self.app.faults.leak_blocks_per_s
        if not rate or not engine.up:
            return
        debt = self._leak_debt[engine.index] + rate * dt * self.app.config.time_scale
        whole = int(debt)
        self._leak_debt[engine.index] = debt - whole
        if whole and not engine.pool.leak(whole):
            engine.kill("oom", self.app.config.restart_delay_s)


async def serve(config: SimConfig, options: ServeOptions, out=sys.stdout) -> int:
    """Serve until SIGTERM/SIGINT; returns the exit code (1 if an engine loop crashed)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):  # before the startup line: a prompt stop is still clean
        loop.add_signal_handler(sig, stop.set)
    faults = initial_faults(config)
    engines = [Engine(i, config, faults) for i in range(config.replicas)]
    truth = TruthLog(options.truth_path)
    app = SimApp(config, faults, engines, truth, options.api_key, lambda: render(registry))
    registry = make_registry(app)
    crashed: list[BaseException] = []

    def engine_died(task: asyncio.Task) -> None:
        if not task.cancelled() and (exc := task.exception()) is not None:
            crashed.append(exc)
            print(f"loadline-sim: engine loop failed: {task.exception()!r}; stopping", file=sys.stderr)
            stop.set()

    tasks = [loop.create_task(e.run()) for e in engines]
    for task in tasks:
        task.add_done_callback(engine_died)
    servers: list[asyncio.Server] = []
    try:
        servers.append(await loop.create_server(lambda: Connection(app), options.host, options.port, backlog=4096))
        for sock in servers[0].sockets:  # accepted sockets inherit it; before the ready line, so the
            kernel_rx.enable(sock)  # kernel's lazily switched stamping is on for the first request
        port = servers[0].sockets[0].getsockname()[1]
        print(f"loadline-sim listening on http://{options.host}:{port}", file=out, flush=True)
        if options.admin:
            admin = AdminApp(app, options.admin_token)
            servers.append(await loop.create_server(lambda: Connection(admin), options.admin_host, options.admin_port))
            admin_port = servers[1].sockets[0].getsockname()[1]
            shown = f"[{options.admin_host}]" if ":" in options.admin_host else options.admin_host  # IPv6 in a URL
            print(f"loadline-sim admin on http://{shown}:{admin_port}", file=out, flush=True)
        await _tick_until(stop, Housekeeping(app))
    finally:
        for server in servers:
            server.close()
        for engine in engines:
            engine.shutdown()
        app.close_all()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.sleep(0)  # let connection_lost callbacks record disconnects
        truth.close()
    return 1 if crashed else 0


async def _tick_until(stop: asyncio.Event, housekeeping: Housekeeping) -> None:
    loop = asyncio.get_running_loop()
    last = loop.time()
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), TICK_S)
        except TimeoutError:
            pass
        now = loop.time()
        housekeeping.tick(max(now - last, 1e-3))
        last = now
