"""The load generator's own metrics, exposed for Prometheus and Grafana.

The master feeds this with the request records it receives from workers; it knows nothing about
Locust, so it can be unit-tested alone. A dedicated CollectorRegistry keeps the generator's metrics
apart from anything else in the process (and lets tests create as many exporters as they like).
Dashboard: deploy/grafana/loadline-dashboard.json (metric names below are its contract).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, is_dataclass
from typing import Any
from wsgiref.simple_server import WSGIServer

import gevent
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, start_http_server

from loadline.core.records import COLUMNS, OK
from loadline.runtime.timeline import current_phase

# Buckets follow vLLM's (REFERENCE-serving.md) so client and server histograms line up on one panel.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80)
ITL_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 10)
E2E_BUCKETS = (0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 60, 120, 240, 480)
RATE_WINDOW_S = 10.0  # requests/s and tokens/s gauges: records received in the last 10 s
MAX_ITL_GAPS_PER_RECORD = 4096  # a runaway stream cannot make one record cost unbounded work


def _as_mapping(row: Any) -> Mapping[str, Any]:
    if isinstance(row, Mapping):
        return row
    if is_dataclass(row) and not isinstance(row, type):  # a record, not a dataclass itself
        return asdict(row)
    return dict(zip(COLUMNS, row))


def _float(value: Any) -> float | None:
    if value in (None, ""):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


class Exporter:
    """Serve the generator's metrics on `port` (0 = any free port; see `.port`)."""

    ticker: gevent.Greenlet  # start_exporter's; absent until then (close() reads it with getattr)

    def __init__(self, port: int | None = None, addr: str = "0.0.0.0"):
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.users = Gauge("loadline_users", "simulated users running", registry=r)
        self.phase = Gauge(
            "loadline_phase_info", "current phase of the load shape (1 = current)", ["phase"], registry=r
        )
        self.phase_index = Gauge("loadline_phase_index", "0-based index of the current phase", registry=r)
        self.requests = Counter("loadline_requests", "requests finished, by status", ["status"], registry=r)
        self.errors = Counter("loadline_errors", "failed requests by error class", ["error_class"], registry=r)
        self.output_tokens = Counter("loadline_output_tokens", "output tokens received", registry=r)
        self.rps = Gauge(
            "loadline_requests_per_second", f"requests finished per second (last {RATE_WINDOW_S:g} s)", registry=r
        )
        self.tokens_per_s = Gauge(
            "loadline_output_tokens_per_second",
            f"output tokens per second (requests finished in the last {RATE_WINDOW_S:g} s)",
            registry=r,
        )
        self.ttft = Histogram(
            "loadline_ttft_seconds", "client-side time to first token", buckets=TTFT_BUCKETS, registry=r
        )
        self.itl = Histogram(
            "loadline_itl_seconds", "client-side gaps between content chunks", buckets=ITL_BUCKETS, registry=r
        )
        self.e2e = Histogram("loadline_e2e_seconds", "client-side end-to-end time", buckets=E2E_BUCKETS, registry=r)
        self.worker_cpu = Gauge("loadline_worker_cpu_percent", "load-generator worker CPU %", ["worker_id"], registry=r)
        self._recent: collections.deque[tuple[float, int]] = collections.deque(maxlen=1_000_000)
        self._phase_label: str | None = None
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None
        if port is not None:
            self.serve(port, addr)

    def serve(self, port: int, addr: str = "0.0.0.0") -> int:
        server, thread = start_http_server(port, addr=addr, registry=self.registry)
        self._server, self._thread = server, thread
        self.port = int(server.server_address[1])
        return self.port

    def close(self) -> None:
        ticker = getattr(self, "ticker", None)
        if ticker is not None:
            ticker.kill(block=False)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # --- feeding ---------------------------------------------------------------------------------
    def observe_records(self, rows: Iterable[Any], now: float | None = None) -> int:
        """Count a batch of RequestRecords (objects, dicts or rows in COLUMNS order)."""
        now = now if now is not None else time.time()
        n = 0
        for raw in rows:
            rec = _as_mapping(raw)
            status = str(rec.get("status") or OK)
            self.requests.labels(status=status).inc()
            if status != OK and rec.get("error_class"):
                self.errors.labels(error_class=str(rec["error_class"])).inc()
            tokens = int(_float(rec.get("output_tokens")) or 0)
            if tokens > 0:
                self.output_tokens.inc(tokens)
            ttft = _float(rec.get("ttft_ms"))
            if ttft is not None:
                self.ttft.observe(ttft / 1000.0)
            e2e = _float(rec.get("e2e_ms"))
            if status == OK and e2e is not None:
                self.e2e.observe(e2e / 1000.0)
            for gap in str(rec.get("itl_us") or "").split()[:MAX_ITL_GAPS_PER_RECORD]:
                value = _float(gap)
                if value is not None:
                    self.itl.observe(value / 1e6)
            self._recent.append((now, tokens))
            n += 1
        self._update_rates(now)
        return n

    def _update_rates(self, now: float) -> None:
        while self._recent and self._recent[0][0] < now - RATE_WINDOW_S:
            self._recent.popleft()
        self.rps.set(len(self._recent) / RATE_WINDOW_S)
        self.tokens_per_s.set(sum(t for _, t in self._recent) / RATE_WINDOW_S)

    def tick(self, now: float | None = None) -> None:
        """Age the rate gauges when no records arrive (call about once a second)."""
        self._update_rates(now if now is not None else time.time())

    def set_users(self, n: int) -> None:
        self.users.set(n)

    def set_phase(self, label: str, index: int | None = None) -> None:
        if self._phase_label is not None and self._phase_label != label:
            self.phase.remove(self._phase_label)
        self._phase_label = label
        self.phase.labels(phase=label).set(1)
        if index is not None:
            self.phase_index.set(index)

    def set_worker_cpu(self, worker_id: str, pct: float) -> None:
        self.worker_cpu.labels(worker_id=str(worker_id)).set(pct)

    def text(self) -> str:
        return generate_latest(self.registry).decode()


TICK_S = 1.0
MAX_RUNTIME_S = 7 * 24 * 3600.0


def install(environment: Any, port: int, addr: str = "0.0.0.0") -> Exporter:
    """Master/local wiring: serve on `port`, count every record batch, refresh users and phase each second.

    Uses only `environment.runner.user_count` and the `environment.loadline_observers` list (called
    with each batch of record rows), so it needs no Locust import of its own.
    """
    exporter = Exporter(port, addr)
    environment.loadline_exporter = exporter
    observers = getattr(environment, "loadline_observers", None)
    if observers is None:
        observers = environment.loadline_observers = []
    observers.append(exporter.observe_records)

    def _tick() -> None:
        deadline = time.monotonic() + MAX_RUNTIME_S
        while time.monotonic() < deadline:
            runner = getattr(environment, "runner", None)
            if runner is not None:
                exporter.set_users(int(getattr(runner, "user_count", 0) or 0))
            phase = current_phase()  # None in a plain --users run: no shape, no phases
            if phase:
                exporter.set_phase(str(phase.get("label")), phase.get("index"))
            exporter.tick()
            gevent.sleep(TICK_S)

    exporter.ticker = gevent.spawn(_tick)
    return exporter
