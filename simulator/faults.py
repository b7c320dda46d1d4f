"""Fault switches shared by the gateway and every replica; settable at start and through /admin."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from loadline.core.errors import UsageError

# fault name -> value meaning "off"
OFF_VALUES: dict[str, float] = {
    "error_rate": 0.0,
    "latency_spike": 1.0,
    "leak_blocks_per_s": 0.0,
    "max_connections": 0,
    "accept_delay_ms": 0.0,
}


@dataclass
class FaultState:
    error_rate: float = 0.0
    latency_spike: float = 1.0
    leak_blocks_per_s: float = 0.0
    max_connections: int = 0
    accept_delay_ms: float = 0.0

    def active(self) -> list[str]:
        return [name for name, off in OFF_VALUES.items() if getattr(self, name) != off]

    def update(self, changes: dict[str, object]) -> None:
        """Apply {name: value}; raises UsageError on an unknown name or an out-of-range value."""
        staged = dataclasses.replace(self)
        for name, value in changes.items():
            if name not in OFF_VALUES:
                raise UsageError(f"unknown fault {name!r} (known: {', '.join(OFF_VALUES)})")
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise UsageError(f"fault {name} needs a number")
            setattr(staged, name, int(value) if name == "max_connections" else float(value))
        if not 0.0 <= staged.error_rate <= 1.0:
            raise UsageError("error_rate must be within 0..1")
        if staged.latency_spike <= 0:
            raise UsageError("latency_spike must be > 0 (1 = off)")
        if min(staged.leak_blocks_per_s, staged.max_connections, staged.accept_delay_ms) < 0:
            raise UsageError("fault values must be >= 0")
        for name in OFF_VALUES:
            setattr(self, name, getattr(staged, name))

    def as_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in OFF_VALUES}
