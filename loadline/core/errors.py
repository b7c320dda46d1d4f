"""One exception type for every "your input is unusable" case.

Commands raise UsageError with a one-line, human reason; `loadline.commands.main` turns it into
`loadline: error: <reason>` and exit code 2, never a traceback.
"""


class UsageError(Exception):
    """Bad config, unreadable input, unreachable target: exit code 2 with this message."""
