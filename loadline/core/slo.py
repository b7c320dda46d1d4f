"""Service level objectives: the thresholds a run is judged against (loadline/core/judge.py judges).

Defaults are DOMAIN.md's (interactive chat): P95 < 1,500 ms and P99 < 3,000 ms end to end for
request-response calls, TTFT P95 < 800 ms for streaming, no failed requests, throughput >= target
x 1.5 when a target is given, GPU memory <= 85 % and no out-of-memory restarts (both only when
server metrics were scraped). A TOML file (see configs/slo/) overrides any of them; "none" switches
an optional criterion off. Every limit is inclusive: a value exactly at its limit passes.

Which latency criteria apply depends on the traffic (loadline/core/judge.py): streaming runs are
judged on TTFT and per-token time (ITL / TPOT), request-response runs on E2E. A streaming run is
judged on E2E too only when the file says `gate_e2e_on_streams = true`: a 256-token stream takes
~2.5 s end to end on a healthy engine, so DOMAIN.md's interactive E2E limits would fail it.

TTFT is gated by default and TTFO (time to the first answer token: for a reasoning model, after
its thinking) only when the file sets `ttfo_p95_ms` / `ttfo_p99_ms`. TTFT counts the first token of
any kind, reasoning included: a chat UI that shows the model "thinking" has answered the user then.
Which wait matters (the first sign of life, or the first word of the answer) is the user's choice;
without reasoning the two are equal.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadline.core import resources
from loadline.core.errors import UsageError


@dataclass(frozen=True)
class SLO:
    e2e_p95_ms: float | None = 1500.0
    e2e_p99_ms: float | None = 3000.0
    ttft_p95_ms: float | None = 800.0
    ttft_p99_ms: float | None = None
    itl_p95_ms: float | None = None
    itl_p99_ms: float | None = None
    tpot_p95_ms: float | None = None
    tpot_p99_ms: float | None = None
    ttfo_p95_ms: float | None = None  # time to the first answer token (after reasoning); off unless set
    ttfo_p99_ms: float | None = None
    gate_e2e_on_streams: bool = False  # judge E2E P95/P99 on streaming runs too (see module docstring)
    max_error_rate: float = 0.0  # fraction of requests; "no failed requests" by default
    target_qps: float | None = None  # peak requests/s the service must carry
    safety_factor: float = 1.5  # required throughput = target_qps x safety_factor
    gpu_memory_max_fraction: float | None = 0.85  # judged only when GPU memory was scraped (DCGM)
    max_oom_restarts: int | None = 0  # serving-process OOM restarts; judged only when scraped
    recovery_s_max: float | None = None  # drills: surges/faults must recover within this (model s); None = not judged

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            problem = _problem(f.name, getattr(self, f.name))
            if problem:
                raise UsageError(f"SLO {f.name}: {problem}")

    @classmethod
    def from_file(cls, path: str | Path | None) -> SLO:
        if path is None:
            return cls()
        p = resources.resolve(path, "slo")  # here first, then Loadline's shipped configs/slo/ (any directory, a wheel)
        try:
            data = tomllib.loads(p.read_text())
        except FileNotFoundError:
            raise UsageError(
                f"SLO file not found: {p} (a path, or one of Loadline's: {resources.shipped_names('slo')})"
            ) from None
        except OSError as exc:
            raise UsageError(f"cannot read SLO file {p}: {exc.strerror or exc}") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise UsageError(f"SLO file {p} is not valid TOML: {exc}") from None
        data = data.get("slo", data)
        if not isinstance(data, dict):
            raise UsageError(f"SLO file {p}: [slo] must be a table")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise UsageError(f"SLO file {p}: unknown keys {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        values: dict[str, Any] = {k: (None if v == "none" else v) for k, v in data.items()}
        for key, value in values.items():
            problem = _problem(key, value)
            if problem:
                raise UsageError(f"SLO file {p}: {key} {problem}")
        return cls(**values)


# Value rules per field: (optional, kind, low, high); kind "number" | "int" | "bool".
_FRACTION = (0.0, 1.0)
_RULES: dict[str, tuple[bool, str, float | None, float | None]] = {
    **{
        name: (True, "number", 0.0, None)
        for name in (
            "e2e_p95_ms",
            "e2e_p99_ms",
            "ttft_p95_ms",
            "ttft_p99_ms",
            "itl_p95_ms",
            "itl_p99_ms",
            "tpot_p95_ms",
            "tpot_p99_ms",
            "ttfo_p95_ms",
            "ttfo_p99_ms",
            "target_qps",
            "recovery_s_max",
        )
    },
    "gate_e2e_on_streams": (False, "bool", None, None),
    "max_error_rate": (False, "number", *_FRACTION),
    "safety_factor": (False, "number", 0.0, None),
    "gpu_memory_max_fraction": (True, "number", *_FRACTION),
    "max_oom_restarts": (True, "int", 0, None),
}


def _problem(name: str, value: Any) -> str | None:
    """Why `value` is not valid for the SLO field `name` (None when it is)."""
    optional, kind, low, high = _RULES[name]
    if value is None:
        return None if optional else 'cannot be "none"'
    if kind == "bool":
        return None if isinstance(value, bool) else f"must be true or false (got {value!r})"
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (kind == "int" and not float(value).is_integer())
    ):
        expected = ("a whole number" if kind == "int" else "a number") + (' or "none"' if optional else "")
        return f"must be {expected} (got {value!r})"
    if not math.isfinite(value) or (low is not None and value < low) or (high is not None and value > high):
        bounds = f"between {low:g} and {high:g}" if high is not None else f">= {low:g}"
        return f"must be {bounds} (got {value!r})"
    return None


def defaults_text() -> str:
    """The default SLO in one line, for help texts (users have no DOMAIN.md to look it up in)."""
    d = SLO()
    errors = "no failed requests" if d.max_error_rate == 0 else f"error rate <= {d.max_error_rate:g}"
    # no percent sign: argparse %-formats help texts
    return (
        f"TTFT P95 <= {d.ttft_p95_ms:g} ms on streams, E2E P95 <= {d.e2e_p95_ms:g} ms and P99 <= "
        f"{d.e2e_p99_ms:g} ms on request-response, {errors}"
    )


# --- the run's SLO, recorded at its start ----------------------------------------------------------
def record(path: str | Path | None) -> dict[str, Any]:
    """The manifest's `slo`: which SLO the run was started with and its thresholds, so that a report
    built later (or elsewhere, after the file moved or changed) judges with the same one."""
    name = str(path) if path else "defaults"
    try:
        return {"source": name, "thresholds": dataclasses.asdict(SLO.from_file(path))}
    except UsageError as exc:  # the run itself refused it already; the manifest says why
        return {"source": name, "error": str(exc)}


def recorded(manifest: dict[str, Any] | None) -> tuple[SLO, str] | None:
    """(SLO, source) the run recorded at its start, or None (an older run folder, plain Locust CSVs)."""
    entry = (manifest or {}).get("slo")
    if not isinstance(entry, dict) or not isinstance(entry.get("thresholds"), dict):
        return None
    known = {f.name for f in dataclasses.fields(SLO)}
    try:
        return SLO(**{k: v for k, v in entry["thresholds"].items() if k in known}), str(
            entry.get("source") or "defaults"
        )
    except (TypeError, UsageError):
        return None
