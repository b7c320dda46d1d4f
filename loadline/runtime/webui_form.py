"""The start form's "Custom parameters": their groups, and their names as the form posts them.

Groups: Locust lists every option alphabetically. It drops argparse groups for the web UI (options
added through a group never reach it) and Flask sorts the options' keys, so `webui_assets/ui.js`
orders the fields with CSS `order` (the form's container is a flex column; React's DOM is left as
it is) under these headings.

Names: Locust's page names each field in camelCase and turns the names back into snake_case when it
posts /swarm, with two regular expressions that do not invert each other when a digit follows a
letter or a digit (think_p90 -> thinkP90 -> think_p9_0). Locust's /swarm then finds no option of
that name and drops the value without a word. `restore_option_names` renames the posted fields back.
"""

from __future__ import annotations

import re

from flask import request
from werkzeug.datastructures import ImmutableMultiDict

# (heading, option names or "prefix_*"), in form order; an option in no group goes last under "Other"
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "Server and connection",
        (
            "api_key",
            "model",
            "non_streaming",
            "request_id_header",
            "connect_timeout",
            "first_token_timeout",
            "request_timeout",
            "max_retries",
            "retry_cap",
        ),
    ),
    (
        "Workload: what each user sends",
        (
            "prompt_mix",
            "prompt_tokens",
            "max_tokens",
            "output_tokens",
            "ignore_eos",
            "tokenizer",
            "system_prompt_tokens",
            "dataset",
            "max_context_tokens",
            "turns_mean",
            "turns_max",
            "think_mean",
            "think_p90",
            "reading_speed",
            "event_interval",
            "seed",
        ),
    ),
    ("Arrivals (open loop)", ("arrival", "arrival_*", "burstiness", "max_inflight")),
    (
        "Trace replay (TraceShape)",  # the file, how it is warped, then the rest (schedule, drain)
        ("trace_file", "trace_format", "trace_speed", "trace_window", "trace_surge", "trace_block_tokens", "trace_*"),
    ),
    (
        "SLO, time scale and run folder",
        ("slo_file", "time_scale", "out", "scrape_url", "scrape_interval", "clock_offset_warn", "sim_admin_url"),
    ),
    ("Stepped shape (StepShape)", ("baseline_hold", "step_*")),
    ("Pulse shape (PulseShape)", ("burst_*",)),
    ("Soak shape (SoakShape)", ("soak_*",)),
    ("Stages shape (StagesShape)", ("stages_*",)),
)
OTHER = "Other"


def camel(name: str) -> str:
    """The form field's name: Locust's form names options in camelCase (prompt_mix -> promptMix)."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


# Locust's page (locust/webui/dist/assets/src-*.js): snake -> camel for the field names, camel -> snake
# for the posted form (a name whose first letter is upper case is posted as it is)
_TO_CAMEL = re.compile(r"_([a-z0-9])")
_TO_SNAKE = re.compile(r"([a-z0-9])([A-Z0-9])")


def posted_name(option: str) -> str:
    """The key under which Locust's page posts `option` to /swarm (think_p90 -> think_p9_0)."""
    field = _TO_CAMEL.sub(lambda m: m.group(1).upper(), option)
    return field if field[:1].isupper() else _TO_SNAKE.sub(r"\1_\2", field).lower()


def restored(form: dict[str, list[str]], options: list[str]) -> dict[str, list[str]]:
    """The posted form with every mangled option name put back (a field posted under its own name wins)."""
    fixed = dict(form)
    for option in options:
        posted = posted_name(option)
        if posted != option and posted in fixed:
            values = fixed.pop(posted)
            fixed.setdefault(option, values)
    return fixed


def restore_option_names(environment) -> None:
    """Rename the mangled fields of every POST /swarm before Locust's handler reads the form."""

    @environment.web_ui.app.before_request
    def _restore_names():
        if request.method != "POST" or not request.path.endswith("/swarm"):
            return
        options = list(vars(environment.parsed_options)) if environment.parsed_options else []
        form = restored(request.form.to_dict(flat=False), options)
        request.form = ImmutableMultiDict([(k, v) for k, values in form.items() for v in values])


def _matches(name: str, member: str) -> bool:
    return name == member or (member.endswith("*") and name.startswith(member[:-1]))


def _place(name: str) -> tuple[int, int]:
    """(group index, position of the first matching member); unknown options after every group."""
    for index, (_, members) in enumerate(GROUPS):
        for position, member in enumerate(members):
            if _matches(name, member):
                return index, position
    return len(GROUPS), 0


def form_groups(names: list[str]) -> dict[str, dict]:
    """Field name -> {"group": heading, "order": CSS order}; a heading's own order is its group's base."""
    found = {}
    for rank, name in enumerate(sorted(names, key=lambda n: (*_place(n), n)), start=1):
        index = _place(name)[0]
        title = GROUPS[index][0] if index < len(GROUPS) else OTHER
        found[camel(name)] = {"group": title, "order": index * 1000 + rank, "base": index * 1000}
    return found
