"""The load a run applied, as `loadline run` arguments: what a twin replays, and what a what-if changes.

From the manifest's Locust options: the scenario (its entry file), the shape and every shape, user
and prompt option that has a value, and a fixed seed. Flags are given bare when on; the options
`loadline run` sets itself (host, files, time scale) are left out; a what-if appends its own options
after these, and the last occurrence of an option wins.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

SCENARIO_FILES = {"chat.py": "chat", "single_shot.py": "single", "completion.py": "completion", "rate.py": "rate"}
# Option prefixes that describe the load (shapes, users, prompts, replies); everything else is the rig's.
LOAD_PREFIXES = ("step_", "rate_", "think_", "turns_", "burst_", "soak_", "pulse_", "sweep_", "baseline_")
LOAD_OPTIONS = (
    "prompt_mix",
    "prompt_tokens",
    "system_prompt_tokens",
    "max_tokens",
    "output_tokens",
    "event_interval",
    "arrival",
    "arrival_rate",
    "burstiness",
    "max_inflight",
    "dataset",
    "reading_speed",
    "max_context_tokens",
    # a fixed seed replays each user's prompts and think times draw for draw: a what-if then differs
    # from the run by its change, not by the luck of a 20-second step's draws (0, random, is left out)
    "seed",
)
FLAGS = ("ignore_eos", "non_streaming", "arrival_sessions")  # store_true options: given bare when on


def of_manifest(manifest: dict) -> dict[str, Any]:
    options = manifest.get("options") or {}
    scenario = None
    for file in str(options.get("locustfile") or "").split(","):
        scenario = scenario or SCENARIO_FILES.get(PurePath(file.strip()).name)
    args: list[str] = []
    for key in sorted(options):
        value = options[key]
        if key in FLAGS and value is True:
            args.append(f"--{key.replace('_', '-')}")
            continue
        if not (key.startswith(LOAD_PREFIXES) or key in LOAD_OPTIONS):
            continue
        if value is None or isinstance(value, bool) or value == "" or (key == "seed" and not value):
            continue
        args += [f"--{key.replace('_', '-')}", str(value)]
    return {
        "scenario": scenario or "chat",
        "shape": options.get("shape") or None,
        "users": options.get("num_users"),
        "run_time": options.get("run_time"),
        "arrival_rate": options.get("arrival_rate") or None,
        "locust_args": args,
        "time_scale": float(manifest.get("time_scale") or options.get("time_scale") or 1.0),
    }
