"""The master's (or a single local process's) part of the Locust wiring: the run folder, live stats,
the scraper, the exporter and the web UI pages.

Imported by loadline/runtime/plugin.py only in a process that is not a Locust worker: workers load
neither numpy (the live stats) nor our Flask pages, since a worker's CPU is the measuring instrument
(pyproject.toml's import contract and tests/integration/test_worker_imports.py check it).
"""

from __future__ import annotations

from locust.runners import MasterRunner

from loadline.core.identity import worker_id
from loadline.runtime import arrivals, clocksync, fleet, local_checks, selfcheck, trace, webui_files, webui_live
from loadline.runtime.collector import RunCollector, close_phase_timeline
from loadline.runtime.exporter import install as install_exporter
from loadline.runtime.scraper import scrape_targets, start_scraper
from loadline.runtime.timeline import active_timeline
from loadline.runtime.transport import RECORDS_MSG, FlushCoordinator
from loadline.runtime.webui import install_tab


def install(environment) -> None:
    """At Locust's init: the collector, the master's message handlers and watches, the exporter, the web UI."""
    runner = environment.runner
    collector = RunCollector(environment, distributed=isinstance(runner, MasterRunner))
    environment.loadline_collector = collector
    if isinstance(runner, MasterRunner):
        runner.register_message(RECORDS_MSG, collector.on_records)
        collector.flush = FlushCoordinator(runner)
        collector.fleet = fleet.Fleet(
            environment, active=lambda: collector.run_dir is not None, annotate=_annotate_open_phase
        ).install()
        clock = collector.clock = clocksync.ClockSync(runner, on_reply=_heard(collector.fleet)).install()
        # workers' CPU / loop-lag rows arrive with their reports, stamped by the worker's clock
        selfcheck.install_master(environment, lambda rows: clock.correct_each(rows, 1, 0))
        trace.install_master(environment)
    else:
        selfcheck.install(environment, worker_id(), on_worker=False)
        local_checks.install(environment, collector)
    port = int(getattr(environment.parsed_options, "metrics_port", 0) or 0)
    if port:
        install_exporter(environment, port)
    if environment.web_ui is not None:
        install_tab(environment)
        webui_live.install(environment)
        webui_files.install(environment)


def scrape_urls(environment) -> dict[str, str]:
    """Prometheus endpoints the master scrapes: the target's /metrics plus --scrape-url extras (UsageError)."""
    return scrape_targets(getattr(environment.parsed_options, "scrape_url", ""), environment.host)


def start_run(environment, settings, urls: dict[str, str]) -> None:
    """At test start, once the options are known good: the run folder and the scraper."""
    if settings.arrivals.rate > 0:  # a rate shape publishes its own rates
        arrivals.publish(environment, settings.arrivals.rate)
    collector: RunCollector = environment.loadline_collector
    run_dir = collector.start()
    if urls:
        interval = float(getattr(environment.parsed_options, "scrape_interval", 5.0))
        collector.sidecars.append(start_scraper(run_dir, urls, interval))


def close_phases(environment) -> None:
    close_phase_timeline(environment)


def stop_run(environment) -> None:
    collector = getattr(environment, "loadline_collector", None)
    if collector is not None:
        collector.stop()


def _annotate_open_phase(text: str) -> None:
    timeline = active_timeline()
    if timeline is not None and timeline.open is not None:
        timeline.annotate(timeline.open, text)


def _heard(watch: fleet.Fleet):
    """Clock replies double as liveness and in-flight reports for the worker watch."""

    def on_reply(node: str, worker: str, data: dict) -> None:
        watch.heard(node, worker, data.get("in_flight"), unshipped=data.get("unshipped"))

    return on_reply
