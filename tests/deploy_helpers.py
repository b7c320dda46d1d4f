"""Read deploy files (compose, k8s) and turn their container commands into local commands.

There is no Docker engine in CI: the tests run each container's command as a local process, with
container hostnames and ports replaced by loopback and free ports.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path

import yaml
from locust.argument_parser import get_empty_argument_parser, setup_parser_arguments
from spine_helpers import REPO

from loadline.client.options import add_arguments as add_loadline_arguments
from loadline.commands.main import main as loadline_main

_VARIABLE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}")
# What a container's executable is on this machine (the image installs the project; here it is the venv).
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
                    arg = str(local) + arg[len(container_path) :]
        out.append(arg)
        previous = arg if arg.startswith("--") else ""
    return out


def loadline_option_names(command: str) -> set[str]:
    """The long options `loadline COMMAND` accepts, read from its --help (in process)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        loadline_main([command, "--help"])
    assert "usage:" in out.getvalue(), out.getvalue()[-2000:]
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", out.getvalue()))


def parse_locust(args: list[str]) -> dict:
    """Locust's parsed options (conf file included) for `locust ARGS`; unknown or mistyped options fail.

    In process, built as locust.argument_parser.get_parser builds it: Locust's arguments, then the ones
    loadline.runtime.plugin adds on init_command_line_parser (every entry file imports the plugin). No
    default config files: only the conf the command names counts (CI has no ~/.locust.conf either).
    """
    parser = get_empty_argument_parser(add_help=True, default_config_files=[])
    setup_parser_arguments(parser)
    add_loadline_arguments(parser)
    options = vars(parser.parse_args(args))
    return {k: v for k, v in options.items() if isinstance(v, (str, int, float, bool, type(None)))}
