"""Locust wiring: importing this module (every entry file does) hooks Loadline into Locust's events.

Roles: a worker ships records; the master or a local (single-process) runner owns the run folder
(loadline/runtime/master_side.py, imported only in such a process: see `_master_side`).
"""

from __future__ import annotations

import logging

import gevent
from locust import events
from locust.runners import WorkerRunner
from locust.stats import CSV_STATS_INTERVAL_SEC

from loadline.client import options as loadline_options
from loadline.client.options import INVALID
from loadline.core.errors import UsageError
from loadline.core.identity import worker_id
from loadline.core.lifeline import die_with_parent
from loadline.runtime import (  # locust_fixes also patches at import
    arrivals,
    clocksync,
    fleet,
    locust_fixes,
    refusal,
    selfcheck,
    trace,
    worker_checks,
)
from loadline.runtime.gc_pauses import freeze_startup_heap
from loadline.runtime.transport import FLUSH_MSG, RecordBuffer, WorkerShipper

log = logging.getLogger("loadline")


# Loadline's options as added to Locust's parser: {dest: default}, and the secret ones (worker_checks.py)
OPTION_DEFAULTS: dict[str, object] = {}
SECRET_OPTIONS: set[str] = set()


@events.init_command_line_parser.add_listener
def _add_options(parser, **_) -> None:
    before = {action.dest for action in parser._actions}  # argparse's list: the one record of what was added
    loadline_options.add_arguments(parser)
    clocksync.add_arguments(parser)
    fleet.add_arguments(parser)
    for action in parser._actions:
        if action.dest not in before:
            OPTION_DEFAULTS[action.dest] = action.default
            if getattr(action, "is_secret", False):
                SECRET_OPTIONS.add(action.dest)


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
        trace.install_worker(runner)
        clocksync.install_worker(runner, worker_id(), shipper.status)
        # Locust's own worker `quitting` listener tells the master "quit" before the users stop, and
        # the master then stops listening: stop (and ship) first. Listeners registered later run
        # first at quitting (fired in reverse).
        environment.events.quitting.add_listener(lambda environment, **_: environment.runner.stop())
        selfcheck.install(environment, worker_id(), on_worker=True)
        worker_checks.StartFailures(environment, worker_id()).install()
        if environment.parsed_options is not None:
            worker_checks.OptionCheck(environment, worker_id(), OPTION_DEFAULTS, frozenset(SECRET_OPTIONS)).install()
        return
    locust_fixes.deliver_sigint_to_main_greenlet()  # a Ctrl-C must not kill a user mid-request
    _master_side().install(environment)


def _master_side():
    """The master's (or local runner's) part, imported here and only in such a process. The one import
    inside a function in this module, on purpose: a worker must not load numpy (live stats) or our Flask
    pages, since its CPU is the measuring instrument (pyproject.toml's import contract names this import
    as the only way in; tests/integration/test_worker_imports.py checks a worker's modules)."""
    from loadline.runtime import master_side

    return master_side


@events.test_start.add_listener
def _on_test_start(environment, **_) -> None:
    freeze_startup_heap()  # before the users start: a full collection must not stall their reads
    environment.loadline_settings = None
    is_worker = isinstance(environment.runner, WorkerRunner)
    if not is_worker:
        refusal.clear(environment)
    try:
        environment.loadline_settings = loadline_options.UserSettings.from_options(environment.parsed_options)
        scrape_urls = {} if is_worker else _master_side().scrape_urls(environment)
    except Exception as exc:  # noqa: BLE001 - on a worker anything is reported; elsewhere only UsageError
        # Users see INVALID and stop quietly (StopUser); a worker tells the master why (which stops the
        # run, exit 2 when headless); the master or local runner quits.
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
    if is_worker:
        environment.loadline_shipper.start()
        return
    _master_side().start_run(environment, environment.loadline_settings, scrape_urls)


@events.test_stopping.add_listener
def _on_test_stopping(environment, **_) -> None:
    """Close the phase timeline before Locust stops the users: the last phase then ends when the stop
    began, with the users that were actually running (test_stop comes after users are gone)."""
    if not isinstance(environment.runner, WorkerRunner):
        _master_side().close_phases(environment)


@events.test_stop.add_listener
def _on_test_stop(environment, **_) -> None:
    arrivals.stop()
    trace.stop()
    if isinstance(environment.runner, WorkerRunner):
        environment.loadline_shipper.stop()
        return
    _master_side().stop_run(environment)


@events.quitting.add_listener
def _let_locust_csv_catch_up(environment, **_) -> None:
    """Locust rewrites its --csv stats once a second and not again at exit, so the final file can miss
    the last second of requests: write them once more, so that locust_stats.csv agrees with requests.csv.
    Should Locust's writer not be found (another Locust version), give its greenlet one more cycle."""
    if not isinstance(environment.runner, WorkerRunner) and getattr(environment.parsed_options, "csv_prefix", None):
        if not locust_fixes.write_final_csv_stats():
            gevent.sleep(CSV_STATS_INTERVAL_SEC + 0.3)
