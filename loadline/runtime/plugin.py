"""Locust wiring: importing this module (every entry file does) hooks Loadline into Locust's events.

Roles: a worker ships records; the master or a local (single-process) runner owns the run folder.
"""

from __future__ import annotations

import logging

import gevent
from locust import events
from locust.runners import MasterRunner, WorkerRunner
from locust.stats import CSV_STATS_INTERVAL_SEC

from loadline.client import options as loadline_options
from loadline.client.options import INVALID
from loadline.core.errors import UsageError
from loadline.core.identity import worker_id
from loadline.core.lifeline import die_with_parent
from loadline.runtime import arrivals, clocksync, fleet, locust_fixes, refusal, selfcheck  # locust_fixes also patches at import
from loadline.runtime.gc_pauses import freeze_startup_heap
from loadline.runtime.collector import RunCollector, close_phase_timeline
from loadline.runtime.exporter import install as install_exporter
from loadline.runtime.scraper import scrape_targets, start_scraper
from loadline.runtime.timeline import active_timeline
from loadline.runtime.transport import RECORDS_MSG, FLUSH_MSG, FlushCoordinator, RecordBuffer, WorkerShipper
from loadline.runtime import webui_files, webui_live
from loadline.runtime.webui import install_tab

log = logging.getLogger("loadline")


@events.init_command_line_parser.add_listener
def _add_options(parser, **_) -> None:
    loadline_options.add_arguments(parser)
    clocksync.add_arguments(parser)


@events.init.add_listener
def _on_init(environment, **_) -> None:
    die_with_parent()  # started by `loadline run`: end with it, even when it is killed
    environment.loadline_records = RecordBuffer()
    environment.loadline_settings = None
    environment.loadline_observers = []
    runner = environment.runner
    if runner is None:
        return
    if isinstance(runner, WorkerRunner):
        shipper = WorkerShipper(environment, worker_id())
        environment.loadline_shipper = shipper
        runner.register_message(FLUSH_MSG, shipper.on_flush_request, concurrent=True)
        arrivals.install_worker(runner)
        clocksync.install_worker(runner, worker_id(), shipper.status)
        # Locust's own worker `quitting` listener tells the master "quit" before the users stop, and
        # the master then stops listening: stop (and ship) first. Listeners registered later run
        # first at quitting (fired in reverse).
        environment.events.quitting.add_listener(lambda environment, **_: environment.runner.stop())
        selfcheck.install(environment, worker_id(), on_worker=True)
        return
    locust_fixes.deliver_sigint_to_main_greenlet()  # a Ctrl-C must not kill a user mid-request
    collector = RunCollector(environment, distributed=isinstance(runner, MasterRunner))
    environment.loadline_collector = collector
    if isinstance(runner, MasterRunner):
        runner.register_message(RECORDS_MSG, collector.on_records)
        collector.flush = FlushCoordinator(runner)
        collector.fleet = fleet.Fleet(environment, active=lambda: collector.run_dir is not None,
                                      annotate=_annotate_open_phase).install()
        collector.clock = clocksync.ClockSync(runner, on_reply=_heard(collector.fleet)).install()
        # workers' CPU / loop-lag rows arrive with their reports, stamped by the worker's clock
        selfcheck.install_master(environment, lambda rows: collector.clock.correct_each(rows, 1, 0))
    else:
        selfcheck.install(environment, worker_id(), on_worker=False)
    port = int(getattr(environment.parsed_options, "metrics_port", 0) or 0)
    if port:
        install_exporter(environment, port)
    if environment.web_ui is not None:
        install_tab(environment)
        webui_live.install(environment)
        webui_files.install(environment)


@events.test_start.add_listener
def _on_test_start(environment, **_) -> None:
    freeze_startup_heap()  # before the users start: a full collection must not stall their reads
    environment.loadline_settings = None
    if not isinstance(environment.runner, WorkerRunner):
        refusal.clear(environment)
    try:
        environment.loadline_settings = loadline_options.UserSettings.from_options(environment.parsed_options)
        scrape_urls = _scrape_urls(environment)
    except Exception as exc:  # noqa: BLE001 - on a worker anything is reported; elsewhere only UsageError
        # Users see INVALID and stop quietly (StopUser); a worker tells the master why (which stops the
        # run, exit 2 when headless); the master or local runner quits.
        is_worker = isinstance(environment.runner, WorkerRunner)
        if not isinstance(exc, UsageError) and not is_worker:
            raise
        environment.loadline_settings = INVALID
        log.error("loadline: %s", exc)
        refusal.refuse(environment, str(exc))
        if is_worker:
            reason = str(exc) if isinstance(exc, UsageError) else f"{type(exc).__name__}: {exc}"
            fleet.report_error(environment.runner, worker_id(), reason)
            return
        if environment.web_ui is None:  # headless: stop with exit code 2
            environment.process_exit_code = 2
            gevent.spawn(environment.runner.quit)
        else:  # web UI: stop this test, let the user fix the form and start again
            gevent.spawn(environment.runner.stop)
        return
    if isinstance(environment.runner, WorkerRunner):
        environment.loadline_shipper.start()
        return
    if environment.loadline_settings.arrivals.rate > 0:  # a rate shape publishes its own rates
        arrivals.publish(environment, environment.loadline_settings.arrivals.rate)
    collector: RunCollector = environment.loadline_collector
    run_dir = collector.start()
    if scrape_urls:
        interval = float(getattr(environment.parsed_options, "scrape_interval", 5.0))
        collector.sidecars.append(start_scraper(run_dir, scrape_urls, interval))


@events.test_stopping.add_listener
def _on_test_stopping(environment, **_) -> None:
    """Close the phase timeline before Locust stops the users: the last phase then ends when the stop
    began, with the users that were actually running (test_stop comes after users are gone)."""
    if not isinstance(environment.runner, WorkerRunner):
        close_phase_timeline(environment)


@events.test_stop.add_listener
def _on_test_stop(environment, **_) -> None:
    arrivals.stop()
    if isinstance(environment.runner, WorkerRunner):
        environment.loadline_shipper.stop()
        return
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


def _scrape_urls(environment) -> dict[str, str]:
    """Prometheus endpoints the master scrapes: the target's /metrics plus --scrape-url extras."""
    if isinstance(environment.runner, WorkerRunner):
        return {}
    return scrape_targets(getattr(environment.parsed_options, "scrape_url", ""), environment.host)


@events.quitting.add_listener
def _let_locust_csv_catch_up(environment, **_) -> None:
    """Locust rewrites its --csv stats once a second and not again at exit, so the final file can miss
    the last second of requests: write them once more, so that locust_stats.csv agrees with requests.csv.
    Should Locust's writer not be found (another Locust version), give its greenlet one more cycle."""
    if not isinstance(environment.runner, WorkerRunner) and getattr(environment.parsed_options, "csv_prefix", None):
        if not locust_fixes.write_final_csv_stats():
            gevent.sleep(CSV_STATS_INTERVAL_SEC + 0.3)
