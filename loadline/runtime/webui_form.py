"""Groups for the start form's "Custom parameters": Locust lists every option alphabetically.

Locust drops argparse groups for the web UI (options added through a group never reach it) and
Flask sorts the options' keys, so `ui.js` (webui_page.py) orders the fields with CSS `order` (the
form's container is a flex column; React's DOM is left as it is) under these headings.
"""

from __future__ import annotations

# (heading, option names or "prefix_*"), in form order; an option in no group goes last under "Other"
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Server and connection", ("api_key", "model", "non_streaming", "request_id_header", "connect_timeout",
                               "first_token_timeout", "request_timeout", "max_retries", "retry_cap")),
    ("Workload: what each user sends", ("prompt_mix", "prompt_tokens", "max_tokens", "output_tokens", "ignore_eos",
                                        "tokenizer", "system_prompt_tokens", "dataset",
                                        "max_context_tokens", "turns_mean", "turns_max", "think_mean", "think_p90",
                                        "reading_speed", "event_interval", "seed")),
    ("Arrivals (open loop)", ("arrival", "arrival_*", "burstiness", "max_inflight")),
    ("SLO, time scale and run folder", ("slo_file", "time_scale", "out", "scrape_url", "scrape_interval",
                                        "clock_offset_warn", "sim_admin_url")),
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
