"""Service level objectives: the thresholds a run is judged against.

Defaults are DOMAIN.md's (interactive chat): P95 < 1,500 ms and P99 < 3,000 ms end to end,
TTFT P95 < 800 ms, no failed requests, throughput >= target x 1.5 when a target is given,
GPU memory <= 85 % and no out-of-memory restarts (both only when server metrics were scraped).
A TOML file (see configs/slo/) overrides any of them.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass
from pathlib import Path

from loadline.core.errors import UsageError


@dataclass(frozen=True)
class SLO:
    e2e_p95_ms: float | None = 1500.0
    e2e_p99_ms: float | None = 3000.0
    ttft_p95_ms: float | None = 800.0
    ttft_p99_ms: float | None = None
    itl_p99_ms: float | None = None
    tpot_p95_ms: float | None = None
    max_error_rate: float = 0.0  # fraction of requests; "no failed requests" by default
    target_qps: float | None = None  # peak requests/s the service must carry
    safety_factor: float = 1.5  # required throughput = target_qps x safety_factor
    gpu_memory_max_fraction: float | None = 0.85  # judged only when GPU memory was scraped (DCGM)
    max_oom_restarts: int | None = 0  # serving-process OOM restarts; judged only when scraped
    recovery_s_max: float | None = None  # drills: surges/faults must recover within this (model s); None = not judged

    @classmethod
    def from_file(cls, path: str | Path | None) -> "SLO":
        if path is None:
            return cls()
        p = Path(path)
        try:
            data = tomllib.loads(p.read_text())
        except FileNotFoundError:
            raise UsageError(f"SLO file not found: {p}") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise UsageError(f"SLO file {p} is not valid TOML: {exc}") from None
        data = data.get("slo", data)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise UsageError(f"SLO file {p}: unknown keys {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        try:
            return cls(**{k: (None if v == "none" else v) for k, v in data.items()})
        except TypeError as exc:
            raise UsageError(f"SLO file {p}: {exc}") from None
