"""`loadline ui`: Locust's web UI with Loadline's shipped entry files, from any directory.

The same as `locust -f chat.py,single_shot.py,completion.py,shape.py --class-picker` with the
installed copies of those files (a wheel install has no locustfiles/ folder to name), so the start
form offers every user class and every load shape. Locust runs as a child in its own session: a
Ctrl-C reaches it once, forwarded by this process, and its run folders are written as usual.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

from loadline.core import resources
from loadline.core.childpython import LOCUST
from loadline.core.errors import UsageError
from loadline.core.lifeline import child_env
from loadline.core.redact import redact

HELP = (
    "Start Locust's web UI with Loadline's users (chat, single_shot, completion) and every load shape in its "
    "class picker; open http://WEB_HOST:WEB_PORT, fill in the LLM options and start. Extra Locust options "
    "go after `--` (e.g. -- --think-mean 2 --out runs)."
)
ENTRY_FILES = ("chat.py", "single_shot.py", "completion.py", "shape.py")
STOP_TIMEOUT_S = 60.0  # Locust's own shutdown closes the run folder; beyond this it is killed


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="", help="target base URL (e.g. http://127.0.0.1:8000); else typed in the form")
    # Loopback by default: Locust's web UI has no login, and anyone who reaches it can start load
    p.add_argument(
        "--web-host",
        default="127.0.0.1",
        help="interface the web UI listens on (default 127.0.0.1; 0.0.0.0 for every interface)",
    )
    p.add_argument("--web-port", type=int, default=8089, help="port of the web UI (default 8089)")
    p.add_argument(
        "locust_args",
        nargs="*",
        metavar="-- LOCUST_ARGS",
        help="extra Locust options after `--`, e.g. -- --think-mean 2 --max-tokens 64",
    )


def command(args: argparse.Namespace) -> list[str]:
    files = ",".join(str(resources.locustfile(name)) for name in ENTRY_FILES)
    cmd = [*LOCUST, "-f", files, "--class-picker", "--web-host", args.web_host, "--web-port", str(args.web_port)]
    return cmd + (["--host", args.host] if args.host else []) + list(args.locust_args)


def main(args: argparse.Namespace) -> int:
    if args.host and not args.host.startswith(("http://", "https://")):
        raise UsageError(f"--host must be a URL like http://127.0.0.1:8000 (got {redact(args.host)!r})")
    if not 0 < args.web_port < 65536:
        raise UsageError(f"--web-port must be a TCP port, 1-65535 (got {args.web_port})")
    signal.signal(signal.SIGTERM, _interrupt_on_sigterm)
    print(f"loadline ui: http://{args.web_host}:{args.web_port} (Ctrl-C stops)", file=sys.stderr)
    proc = subprocess.Popen(command(args), cwd=os.getcwd(), start_new_session=True, env=child_env())
    try:
        return proc.wait()
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # one SIGINT for Locust: a second cuts its shutdown short
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        return 130
    finally:
        if proc.poll() is None:  # we are dying for another reason: take the web UI with us
            os.killpg(proc.pid, signal.SIGKILL)


def _interrupt_on_sigterm(signum, frame) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)
