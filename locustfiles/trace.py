"""Trace replay: a trace's requests at their times, lengths and shared prefixes (docs/trace-replay.md).

loadline run --trace FILE    (writes the schedule, runs one TraceUser per process with --shape trace)
"""

import loadline.runtime.plugin  # noqa: F401
from loadline.client.users.trace import TraceUser  # noqa: F401
