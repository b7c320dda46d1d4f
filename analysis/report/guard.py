"""One part of the report failing must not lose the rest: its error goes into the verdict instead."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loadline.analysis.data.memory import return_freed_memory
from loadline.core.errors import UsageError


def guarded(name: str, call: Callable[[], Any], fallback: dict) -> Any:
    """Run another part's analysis; a failure there is reported in the verdict, not fatal to the report.

    The report is written at the end of every run: losing the SLO verdict because a secondary
    analysis raised would cost the user more than a section that says it could not be computed.
    """
    try:
        return call()
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - see docstring
        last = traceback.extract_tb(exc.__traceback__)[-1]
        return {
            **fallback,
            "error": f"{name} failed: {type(exc).__name__}: {exc} ({Path(last.filename).name}:{last.lineno})",
        }
    finally:
        return_freed_memory()  # the part's working memory, before the next part's (a large run's peak)
