"""Why the last start could not run, in one line, for the web UI's LLM tab.

A start that cannot run (a bad option, a shape whose options give no plan, a worker that cannot run)
is logged on the console, which a web UI user does not see: whoever refuses the start records the
reason here, the LLM tab shows it, and the next test start clears it.
"""

from __future__ import annotations

from typing import Any

_ATTR = "loadline_start_refused"


def refuse(environment: Any, reason: str) -> None:
    setattr(environment, _ATTR, reason.strip().splitlines()[0] if reason.strip() else "unknown error")


def clear(environment: Any) -> None:
    setattr(environment, _ATTR, None)


def reason(environment: Any) -> str | None:
    return getattr(environment, _ATTR, None)
