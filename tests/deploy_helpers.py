"""Read deploy files (compose, k8s) and turn their container commands into local commands.

There is no Docker engine in CI: the tests run each container's command as a local process, with
container hostnames and ports replaced by loopback and free ports.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml
from spine_helpers import REPO

_VARIABLE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}")
# What a container's executable is on this machine (the image installs the project; here it is the venv).
# Parses a Locust command line the way `locust` does, with our locustfile's options registered.
_PARSE = """
import json, sys
import loadline.runtime.plugin  # registers Loadline's options (as every entry file does)
from locust.argument_parser import parse_options
options = vars(parse_options(sys.argv[1:]))
print(json.dumps({k: v for k, v in options.items() if isinstance(v, (str, int, float, bool, type(None)))}))
"""
LOCAL_EXECUTABLES = {"locust": [sys.executable, "-m", "locust"], "loadline": [sys.executable, "-m", "loadline"]}


def load_compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def load_k8s(directory: Path) -> list[dict]:
    docs: list[dict] = []
    for path in sorted(directory.rglob("*.yaml")):
        docs += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return docs


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's `${NAME}` and `${NAME:-default}` (the only forms our compose file may use)."""
    def replace(match: re.Match) -> str:
        given = env.get(match["name"], "")
        return given if given else (match["default"] or "")
    result = _VARIABLE.sub(replace, value)
    assert "$" not in result, f"unsupported interpolation in {value!r}"
    return result


def container_command(service: dict, env: dict[str, str]) -> list[str]:
    return [interpolate(str(arg), env) for arg in service["command"]]


def container_environment(service: dict, env: dict[str, str]) -> dict[str, str]:
    return {name: interpolate(str(value), env) for name, value in (service.get("environment") or {}).items()}


def localize(args: list[str], hosts: set[str], ports: dict[str, int], paths: dict[str, Path]) -> list[str]:
    """Container argv -> local argv: hostnames -> 127.0.0.1, container ports -> free ports, volume paths.

    Every value after an option naming a port must be in `ports`: a port the test forgot to map
    would collide with other engineers' processes, so it fails loudly instead.
    """
    out = list(LOCAL_EXECUTABLES.get(args[0], [args[0]]))
    previous = ""
    for arg in args[1:]:
        if previous.endswith("port") and previous.startswith("--"):
            arg = str(ports[arg])
        elif previous.endswith("host") and (arg == "0.0.0.0" or arg in hosts):
            arg = "127.0.0.1"
        else:
            for host in hosts:
                arg = re.sub(rf"//{host}:(\d+)", lambda m: f"//127.0.0.1:{ports[m[1]]}", arg)
            for container_path, local in paths.items():
                if arg == container_path or arg.startswith(container_path + "/"):
                    arg = str(local) + arg[len(container_path):]
        out.append(arg)
        previous = arg if arg.startswith("--") else ""
    return out


def option_names(cmd: list[str]) -> set[str]:
    """The long options a command accepts, from its --help (with our locustfile loaded, ours included)."""
    proc = subprocess.run([*cmd, "--help"], cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", proc.stdout))


def parse_locust(args: list[str]) -> dict:
    """Locust's parsed options (conf file included) for `locust ARGS`; unknown or mistyped options fail."""
    proc = subprocess.run([sys.executable, "-c", _PARSE, *args], cwd=REPO, capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
