"""`loadline run`: one headless run -> one run folder with a report. The README's main command.

Without --host it starts the embedded simulator on a free loopback port and keeps its truth log in
the run folder. Locust runs as a child process (its own gevent world); its output goes to stderr
so that stdout stays ours: the run folder's path is always the last line.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from loadline.commands import run_checks, run_outcome, target, trace_input
from loadline.commands.run_checks import conf_value
from loadline.core import resources, runfolder
from loadline.core.childpython import LOCUST, PYTHON
from loadline.core.errors import UsageError
from loadline.core.lifeline import child_env
from loadline.core.slo import SLO
from loadline.runtime import preflight
from loadline.runtime.simprocess import SimProcess, start_simulator
from loadline.shapes.catalog import ShapeEntry, catalog

HELP = "Run a load test headless (master + optional local workers) and leave a run folder with a report."
SCENARIOS = {
    "chat": "chat.py",
    "single": "single_shot.py",
    "completion": "completion.py",
    "rate": "rate.py",
    "trace": "trace.py",
}
OPEN_LOOP = run_checks.OPEN_LOOP
TRACE = trace_input.TRACE
SHAPE_ENTRY_FILE = "shape.py"  # every registered shape; Locust's --shape NAME puts NAME first (shapes/registry.py)
# Without a shape: these, unless the command line or the conf file (--config) says otherwise.
DEFAULT_USERS, DEFAULT_SPAWN_RATE, DEFAULT_RUN_TIME = 10, 10.0, "60s"
LOAD_OPTIONS = (("users", DEFAULT_USERS), ("spawn-rate", DEFAULT_SPAWN_RATE), ("run-time", DEFAULT_RUN_TIME))


def add_arguments(p: argparse.ArgumentParser) -> None:
    shapes = _shapes()
    p.add_argument("--host", help="target base URL (e.g. http://10.0.0.5:8000); default: start the embedded simulator")
    p.add_argument("--sim-profile", default="", help="simulator profile (configs/sim/NAME.toml) when no --host")
    p.add_argument(
        "--sim-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a simulator profile value, e.g. max_num_seqs=4 (repeatable)",
    )
    p.add_argument("--scenario", choices=sorted(SCENARIOS), default=None, help="user behaviour (default chat)")
    p.add_argument(
        "--rate",
        type=float,
        default=None,
        help="open loop: requests/s over all workers (implies --scenario rate; model time with --time-scale)",
    )
    p.add_argument(
        "--arrival",
        choices=("constant", "poisson", "gamma"),
        default=None,
        help="open loop: arrival process (default poisson; gamma takes -- --burstiness B)",
    )
    p.add_argument(
        "--shape",
        choices=list(shapes),
        default=None,
        help="load shape (listed below; its options go after `--`, see docs/shapes.md); "
        "without it: --users for --run-time",
    )
    p.add_argument("--users", type=int, default=None, help=f"concurrent users when no shape (default {DEFAULT_USERS})")
    p.add_argument(
        "--spawn-rate", type=float, default=None, help=f"users started per second (default {DEFAULT_SPAWN_RATE:g})"
    )
    p.add_argument(
        "--run-time", default=None, help=f"duration when no shape, e.g. 90s, 5m (default {DEFAULT_RUN_TIME})"
    )
    p.add_argument("--workers", type=int, default=0, help="local worker processes (0 = single process)")
    p.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="compress time: simulator constants, think times and shape durations divided by X",
    )
    p.add_argument(
        "--config",
        help="a Locust conf file (configs/profiles/*.conf, or a profile's name: standard): "
        "shape and user options; a relative path not found here is looked up in "
        "Loadline's shipped configs/",
    )
    p.add_argument(
        "--slo", help="SLO thresholds (TOML, configs/slo/*.toml, or a name: strict) for the stop rule and the report"
    )
    trace_input.add_arguments(p)
    p.add_argument("--out", default="runs", help="where run folders are created (default runs/)")
    p.add_argument("--no-report", action="store_true", help="skip `loadline report` at the end")
    p.add_argument("--no-charts", action="store_true", help="the report without its PNG charts (seconds faster)")
    p.add_argument(
        "locust_args",
        nargs="*",
        metavar="-- LOCUST_ARGS",
        help="extra Locust options after `--`, e.g. -- --think-mean 2 --max-tokens 64",
    )
    p.formatter_class = argparse.RawDescriptionHelpFormatter  # keeps the shape list below one per line
    width = max(map(len, shapes), default=0)
    p.epilog = "shapes (--shape NAME):\n" + "\n".join(
        f"  {name:<{width}}  {entry.summary}" for name, entry in shapes.items()
    )


def _shapes() -> dict[str, ShapeEntry]:
    """The shape catalog (shapes/ and LOADLINE_SHAPE_MODULES), read without importing Locust into this process."""
    try:
        return catalog()
    except UsageError as exc:  # a bad LOADLINE_SHAPE_MODULES: one line, before argparse runs
        print(f"loadline run: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def main(args: argparse.Namespace) -> int:
    run_checks.validate(args)
    signal.signal(signal.SIGTERM, _interrupt_on_sigterm)
    conf_locustfile = conf_value(args.config, "locustfile")
    shape = args.shape or conf_value(args.config, "shape")
    _imply_open_loop(args, shape, conf_locustfile)
    if HELP_FLAGS & set(args.locust_args):  # `loadline run -- --help`: the options, and nothing started
        return _locust_help(_locust_command(args, PRECHECK_HOST, Path(args.out) / "precheck", conf_locustfile))
    with tempfile.TemporaryDirectory(prefix="loadline-trace-") as scratch:
        if args.trace:  # the precheck plans the trace shape's phases from the schedule
            args.trace_schedule = str(trace_input.write_schedule(args.schedule, Path(scratch)))
        _precheck(_locust_command(args, args.host or PRECHECK_HOST, Path(args.out) / "precheck", conf_locustfile))
    name = "-".join(x for x in dict.fromkeys((args.scenario or ("conf" if conf_locustfile else "chat"), shape)) if x)
    run_dir = runfolder.new_run_dir(args.out, name)
    if args.trace:
        args.trace_schedule = str(trace_input.write_schedule(args.schedule, run_dir))
    print(f"loadline: run folder {run_dir}", file=sys.stderr)
    sim: SimProcess | None = None
    try:
        try:
            host, admin_url = args.host, ""
            if not host:
                sim = start_simulator(_sim_args(args, run_dir), log_path=run_dir / "simulator.log")
                host = sim.url
                admin_url = sim.admin_url
                print(f"loadline: embedded simulator at {host}", file=sys.stderr)
            target.preflight(host)
            _warn_time_scale(args)
        except UsageError:
            shutil.rmtree(run_dir, ignore_errors=True)  # nothing ran: leave no empty run folder behind
            raise
        interrupted: list[str] = []
        code = _run_locust(_locust_command(args, host, run_dir, conf_locustfile), args, admin_url, interrupted)
    finally:
        if sim is not None:
            sim.stop()
    target.scrub_credentials(run_dir / runfolder.LOCUST_HTML, host)
    if interrupted and (run_dir / runfolder.MANIFEST).exists():
        # The report reads this and does not PASS a run that did not end on its own.
        runfolder.update_manifest(run_dir, status="interrupted", ended_by="signal", interrupted_by=interrupted[0])
    if interrupted and not (run_dir / runfolder.REQUESTS).exists():  # stopped while Locust was still starting
        shutil.rmtree(run_dir, ignore_errors=True)  # nothing was measured
        raise KeyboardInterrupt(interrupted[0])  # main.py: "loadline run: interrupted", exit 130
    run_outcome.raise_if_not_run(run_dir, code)
    exit_code = 0
    if not args.no_report:
        exit_code = _report(run_dir, charts=not args.no_charts)
    print(run_dir)
    return exit_code


HELP_FLAGS = frozenset({"-h", "--help"})  # after `--`: Locust's help (commands/precheck.py), not a run
PRECHECK_HOST = "http://127.0.0.1:9"  # stands in for the simulator's URL, not started yet: never contacted


def _imply_open_loop(args: argparse.Namespace, shape: str, conf_locustfile: str) -> None:
    """A rate shape with no scenario named runs the open-loop users, as --rate does; a closed-loop
    scenario named with it is refused by the precheck (shapes/rate_steps.py refuse_closed_loop)."""
    entry = _shapes().get(shape)
    if entry is not None and entry.open_loop and args.scenario is None and not conf_locustfile:
        args.scenario = OPEN_LOOP


def _locust_help(cmd: list[str]) -> int:
    """Locust's options with ours and every shape's (commands/precheck.py prints them), on stdout."""
    child = [*PYTHON, "-m", "loadline.commands.precheck", *cmd[len(LOCUST) :]]
    return subprocess.run(child, stdin=subprocess.DEVNULL, cwd=os.getcwd()).returncode


def _precheck(cmd: list[str]) -> None:
    """Locust's whole command line checked in a throwaway child before anything starts (commands/precheck.py):
    every option's type, the conf file, the users' settings, the shape's phases and stage file."""
    child = [*PYTHON, "-m", "loadline.commands.precheck", *cmd[len(LOCUST) :]]
    done = subprocess.run(child, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=os.getcwd())
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        message = lines[-1] if lines else f"the Locust options were refused (exit {done.returncode})"
        raise UsageError(message.removeprefix("loadline run: error: "))


# Locust's own timespan grammar (locust.util.timespan), checked here before anything starts. Not
# imported: importing any part of locust monkey-patches this process with gevent, and this process
# only supervises. tests/unit/test_run_options.py keeps the two in agreement.
def _sim_args(args: argparse.Namespace, run_dir: Path) -> list[str]:
    # --admin: drills' stage fault actions (shapes/drill.py) reach it through --sim-admin-url
    out = ["--truth", str(run_dir / runfolder.TRUTH), "--time-scale", str(args.time_scale), "--admin"]
    # A profile (conf file) may name the simulator it was written for; the command line wins.
    profile = args.sim_profile or conf_value(args.config, "sim-profile")
    options = args.sim_option or [o.strip() for o in conf_value(args.config, "sim-option").split(",") if o.strip()]
    if profile:
        out += ["--profile", profile]
    if getattr(args, "schedule", None) is not None:  # the embedded server stands in for one sized for the trace
        out += trace_input.sim_overrides(args.schedule, profile, options)
    for option in options:
        out += ["--set", option]
    return out


def _warn_time_scale(args: argparse.Namespace) -> None:
    """Before the load: say so when this machine's wake-up delay x the time scale would swamp the SLO."""
    warning = preflight.timescale_warning(preflight.wake_delay(), args.time_scale, SLO.from_file(args.slo))
    if warning:
        print(f"loadline run: warning: {warning}", file=sys.stderr)


def _locust_command(args: argparse.Namespace, host: str, run_dir: Path, conf_locustfile: str) -> list[str]:
    files = []
    if conf_locustfile and not (args.scenario or args.shape):
        # Profiles name their files as `locustfiles/...` (relative, as Locust expects): found in the
        # current directory, else in Loadline's shipped copies, so they work from any directory.
        entries = [entry.strip() for entry in conf_locustfile.split(",") if entry.strip()]
        if not all(Path(entry).exists() for entry in entries):
            files = [str(resources.resolve(entry)) for entry in entries]
    if args.scenario or args.shape or not conf_locustfile:
        files.append(str(resources.locustfile(SCENARIOS[args.scenario or "chat"])))
        # a profile's shape (`shape = ...` in the conf file) needs the entry file too when --scenario
        # replaces the profile's files: Locust refused its shape options, after the simulator started
        if args.shape or conf_value(args.config, "shape"):
            files.append(str(resources.locustfile(SHAPE_ENTRY_FILE)))
    cmd = list(LOCUST)
    if args.config:
        cmd += ["--config", args.config]
    if files:
        cmd += ["-f", ",".join(files)]
    cmd += [
        "--headless",
        "--host",
        host,
        "--run-dir",
        str(run_dir),
        "--time-scale",
        str(args.time_scale),
        "--csv",
        str(run_dir / runfolder.LOCUST_CSV_PREFIX),
        "--csv-full-history",
        "--html",
        str(run_dir / runfolder.LOCUST_HTML),
        "--only-summary",
    ]
    cmd += _load_options(args)
    if args.workers:
        # Locust's default 5557 on all interfaces would collide with any other run on the machine:
        # master and forked workers meet on a free loopback port instead.
        port = str(_free_port())
        cmd += [
            "--processes",
            str(args.workers),
            "--master-bind-host",
            "127.0.0.1",
            "--master-bind-port",
            port,
            "--master-host",
            "127.0.0.1",
            "--master-port",
            port,
        ]
    if args.shape:
        cmd += ["--shape", args.shape]  # the entry file puts this shape first (it wins over the conf file's)
    if args.rate is not None:
        cmd += ["--arrival-rate", f"{args.rate:g}"]
    if args.arrival is not None:
        cmd += ["--arrival", args.arrival]
    if args.slo:
        cmd += ["--slo-file", args.slo]
    if getattr(args, "trace_schedule", ""):
        cmd += ["--trace-schedule", args.trace_schedule]
    # A time-scaled phase lasts seconds: scrape often enough to see it (later --scrape-interval wins).
    cmd += ["--scrape-interval", f"{max(0.5, 5.0 / args.time_scale):g}"]
    return cmd + list(args.locust_args)


def _load_options(args: argparse.Namespace) -> list[str]:
    """--users, --spawn-rate, --run-time for Locust: the command line over the conf file over our
    defaults, as Locust itself orders them. A shape drives the load itself: only explicit values go."""
    out = []
    shape = args.shape or conf_value(args.config, "shape")
    for name, default in LOAD_OPTIONS:
        value = getattr(args, name.replace("-", "_"))
        if name == "users" and value is None and args.scenario == OPEN_LOOP and args.shape != TRACE:
            value = max(1, args.workers)  # one arrival scheduler per process: the rate splits evenly
        if value is None and not shape and not conf_value(args.config, name):
            value = default
        if value is not None:
            out += [f"--{name}", f"{value:g}" if isinstance(value, float) else str(value)]
    return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run_locust(
    cmd: list[str], args: argparse.Namespace, admin_url: str = "", interrupted: list[str] | None = None
) -> int:
    """Run Locust in its own session, so a terminal's Ctrl-C reaches only us and we forward exactly one
    SIGINT: a second one would land inside Locust's graceful shutdown and cut the run folder short.
    The name of the signal that stopped the run, if any, is appended to `interrupted`."""
    interrupted = [] if interrupted is None else interrupted
    # Drills reach the simulator's admin API through --sim-admin-url, a shape option: given as its
    # environment variable, Locust ignores it when no shape (hence no such option) is loaded.
    env = child_env({**os.environ, "LOCUST_SIM_ADMIN_URL": admin_url} if admin_url else None)
    proc = subprocess.Popen(cmd, stdout=sys.stderr, stderr=sys.stderr, cwd=os.getcwd(), start_new_session=True, env=env)
    try:
        return proc.wait()
    except KeyboardInterrupt as exc:
        interrupted.append(str(exc) or "SIGINT")
        # Further Ctrl-C or SIGTERM: we are already stopping.
        previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            print(
                f"loadline: {interrupted[-1]}: stopping the test (in-flight streams end as cancelled)...",
                file=sys.stderr,
            )
            proc.send_signal(signal.SIGINT)
            try:
                return proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # the master and its forked workers
                return proc.wait()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    finally:
        if proc.poll() is None:  # we are dying (SIGTERM, an exception): take the load with us
            os.killpg(proc.pid, signal.SIGKILL)


def _interrupt_on_sigterm(signum, frame) -> None:
    """A CI timeout or Kubernetes sends SIGTERM: take Ctrl-C's path (streams in flight end as cancelled
    rows, workers ship what they hold, the manifest says how the run ended)."""
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _report(run_dir: Path, charts: bool = True) -> int:
    # Imported here, not at the top: pandas and matplotlib cost ~3 s of CPU to import, paid only by
    # a run that builds its report; a --no-report run or a refused command line starts without them.
    from loadline.analysis.report.build import build_report, unusable_reason
    from loadline.core.answer import Answer

    # the SLO the run recorded at its start (manifest `slo`), the one its stop rule judged with
    result = build_report(run_dir, None, charts=charts)
    print(result.summary, file=sys.stderr)
    reason = unusable_reason(result.verdict)
    if reason:  # exit 2 like a usage error: the test measured the setup, not the service
        print(f"loadline run: unusable run: {reason}", file=sys.stderr)
    print(f"loadline: {Answer.from_dict(result.verdict['answer']).log_line()}", file=sys.stderr)
    return result.exit_code
