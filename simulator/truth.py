"""The truth log: one JSON line per request the simulator received, buffered off the hot path.

Records are kept in memory and written by the server's housekeeping tick (every 0.25 s) and at
shutdown, so a request's completion costs a list append, not a file write. Field meanings are in
docs/architecture.md ("The simulator's truth log") and docs/simulator.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO

FIELDS = (
    "request_id",
    "replica",
    "endpoint",
    "stream",
    "arrival",
    "queue_start",
    "queue_end",
    "first_token",
    "last_token",
    "first_write_s",
    "last_write_s",
    "prompt_tokens",
    "output_tokens",
    "status",
    "outcome",
    "finish_reason",
    "preemptions",
    "faults",
    "first_reasoning_token",
    "first_answer_token",
    "reasoning_tokens",
    "tool_calls",
    "cached_tokens",
)


def new_record(request_id: str, arrival: float, endpoint: str, faults: list[str]) -> dict:
    record = dict.fromkeys(FIELDS)
    record.update(
        request_id=request_id, arrival=arrival, endpoint=endpoint, faults=faults, output_tokens=0, preemptions=0
    )
    return record


class TruthLog:
    def __init__(self, path: str | Path | None) -> None:
        self._file: IO[str] | None = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115
        self._pending: list[dict] = []
        self.written = 0

    def add(self, record: dict) -> None:
        if self._file is not None:
            self._pending.append(record)

    def flush(self) -> None:
        if self._file is None or not self._pending:
            return
        pending, self._pending = self._pending, []
        self._file.write("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in pending))
        self._file.flush()
        self.written += len(pending)

    def close(self) -> None:
        self.flush()
        if self._file is not None:
            self._file.close()
            self._file = None
