"""What a run folder says about itself: config without secrets, versions, revision, host, shape."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from loadline import __version__
from loadline.core import resources
from loadline.core.redact import redact as redact_text
from loadline.core.runfolder import redact
from loadline.core.runsettings import streaming_of_options, time_scale_of_options
from loadline.core.slo import record as record_slo
from loadline.core.target_host import target_on_this_host

# Options whose values are secrets whatever their name says.
SECRET_OPTIONS = {"api_key"}


def git_revision(directory: Path | None) -> str | None:
    if directory is None:  # installed from a wheel: no checkout to ask
        return None
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=directory, capture_output=True, text=True, timeout=2)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def options_dict(parsed_options: Any) -> dict[str, Any]:
    raw = {k: v for k, v in vars(parsed_options).items() if not k.startswith("_")} if parsed_options else {}
    for key in SECRET_OPTIONS & raw.keys():
        raw[key] = "***" if raw[key] else ""
    plain = {k: v if isinstance(v, (str, int, float, bool, type(None), list)) else str(v) for k, v in raw.items()}
    # values too: --host http://user:key@host, a scrape URL with a token
    return redact({k: redact_text(v) if isinstance(v, str) else v for k, v in plain.items()})


def start_manifest(
    environment: Any, run_dir: Path
) -> dict[str, Any]:  # a Locust Environment (no Locust import in core)
    runner = environment.runner
    shape = environment.shape_class
    return {
        "run_id": run_dir.name,
        "started_at": time.time(),
        "started_at_iso": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "target": redact_text(environment.host) if environment.host else environment.host,  # user:key@host
        "target_on_this_host": target_on_this_host(environment.host),  # beside the generator? (the verdict)
        "user_classes": sorted(environment.user_classes_by_name) if environment.user_classes_by_name else [],
        "shape": type(shape).__name__ if shape is not None else None,
        "runner": type(runner).__name__,
        "workers": runner.worker_count if type(runner).__name__ == "MasterRunner" else 0,  # 0: single process
        "options": options_dict(environment.parsed_options),
        # read back through loadline.core.runsettings (time_scale_of, streaming_of): the one accessor
        "time_scale": time_scale_of_options(environment.parsed_options),
        "streaming": streaming_of_options(environment.parsed_options),
        # the SLO the run is judged by, thresholds and all: `loadline report RUN` re-judges with it
        "slo": record_slo(getattr(environment.parsed_options, "slo_file", "") or None),
        "versions": {
            "loadline": __version__,
            "locust": version("locust"),  # no Locust import down in core
            "python": sys.version.split()[0],
        },
        "git_revision": git_revision(resources.checkout_root()),
        "host": {"name": socket.gethostname(), "platform": platform.platform(), "cpus": _cpus()},
        "status": "running",
    }


def _cpus() -> int:
    return os.cpu_count() or 0
