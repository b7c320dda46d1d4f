"""Stages shape: any custom profile, written down as a list of stages (like k6 stages).

Each stage sets a user count, reached at a spawn rate (or as fast as the runner allows), and holds
it for a duration. Used for the "traffic surprise" drill and anything the other shapes don't cover.

Stage file (TOML), e.g. configs/stages/traffic-surprise.toml:

    [[stage]]
    label = "baseline"     # optional, default "stage-N (U users)"
    kind = "baseline"      # optional, one of shapes.phase.KINDS, default "stage"
    duration = "5m"        # seconds, or a Locust time span: "90s", "5m", "1h30m"
    users = 4
    spawn_rate = 4         # optional users/s; default: the whole change within about a second
    kill_replica = 0       # optional drill fault actions when the stage begins (see shapes/drill.py)
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from locust.util.timespan import parse_timespan

from loadline.core import resources
from loadline.core.errors import UsageError
from loadline.shapes.base import PhasedShape
from loadline.shapes.drill import DRILL_KEYS, parse_actions
from loadline.shapes.options import ShapeOption, require
from loadline.shapes.phase import KINDS, Phase, users_text

MAX_STAGES = 1000
STAGES_FILE = ShapeOption("--stages-file", "", "Stages: TOML file of [[stage]] duration/users/spawn_rate entries")
STAGE_KEYS = {"label", "kind", "duration", "users", "spawn_rate"} | DRILL_KEYS


def parse_duration(value: Any, where: str) -> float:
    """Seconds from a number or a Locust time span string ("90s", "5m", "1h30m")."""
    if isinstance(value, bool):
        raise UsageError(f"{where}: duration must be a number of seconds or a time span like '5m'")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        try:
            seconds = float(parse_timespan(str(value)))
        except ValueError:
            raise UsageError(f"{where}: duration {value!r} is not seconds or a time span like '5m'") from None
    require(seconds > 0, f"{where}: duration must be > 0")
    return seconds


def stage_phase(n: int, entry: Any, where: str) -> Phase:
    require(isinstance(entry, dict), f"{where}: each [[stage]] must be a table")
    unknown = sorted(set(entry) - STAGE_KEYS)
    require(not unknown, f"{where}: unknown keys {', '.join(unknown)} (known: {', '.join(sorted(STAGE_KEYS))})")
    require("duration" in entry and "users" in entry, f"{where}: needs duration and users")
    users = entry["users"]
    require(
        isinstance(users, int) and not isinstance(users, bool) and users >= 0,
        f"{where}: users must be a whole number >= 0",
    )
    rate = entry.get("spawn_rate")
    if rate is not None:
        require(
            isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0,
            f"{where}: spawn_rate must be a number > 0",
        )
        rate = float(rate)
    kind = entry.get("kind", "stage")
    require(kind in KINDS, f"{where}: kind must be one of {', '.join(KINDS)}")
    label = str(entry.get("label") or f"stage-{n} ({users_text(users)})")
    duration = parse_duration(entry["duration"], where)
    return Phase(label, kind, duration, users, spawn_rate=rate, actions=parse_actions(entry, where, duration))


def load_stages(path: str | Path) -> list[Phase]:
    """The phases of a stage file; UsageError with a one-line reason when it is unusable."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"stages file not found: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"stages file {p} is unreadable: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"stages file {p} is not valid TOML: {exc}") from None
    stages = data.get("stage")
    require(isinstance(stages, list) and stages, f"stages file {p}: needs at least one [[stage]] table")
    assert isinstance(stages, list)  # require() raised otherwise
    require(len(stages) <= MAX_STAGES, f"stages file {p}: more than {MAX_STAGES} stages")
    return [stage_phase(n, entry, f"stages file {p}, stage {n}") for n, entry in enumerate(stages, start=1)]


class StagesShape(PhasedShape):
    """Anything else: your own list of stages (duration, users, spawn rate), e.g. a drill.

    Stages read from --stages-file (see the module docstring); a relative path is looked up in the
    current directory, then in Loadline's shipped configs/ (configs/stages/x.toml works anywhere).
    """

    shape_name = "stages"
    shape_options = (STAGES_FILE,)

    def plan(self, options: Any) -> list[Phase]:
        path = STAGES_FILE.read(options)
        require(bool(path), "the stages shape needs --stages-file FILE (see configs/stages/)")
        return load_stages(resources.resolve(path))
