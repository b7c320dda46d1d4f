"""The twin's typed values: fitted parameters with their evidence, and the workload they were fitted on.

A `TwinProfile` serialises two ways: a simulator profile (TOML, `loadline sim --profile FILE` and
`loadline run --sim-profile FILE` read it) holding only the numbers, and `twin.json` holding, for
every parameter, where it came from and how well it is identified, the fitted range (loads,
prompt lengths, cap) that bounds a prediction's stated error, and the workload to replay.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

TWIN_JSON = "twin.json"
TWIN_TOML = "twin.toml"

# Identification grades, one word each so a table reads at a glance.
MEASURED = "measured"  # read from the engine's own configuration or metrics
FITTED = "fitted"  # estimated from the run's requests (a regression), with its residual
BOUNDED = "bounded"  # only a bound follows from the run; the value sits at that bound
ASSUMED = "assumed"  # not identifiable from this run: the simulator's default, said so


@dataclass(frozen=True)
class Parameter:
    name: str  # the simulator profile key (simulator/config.py)
    value: float | int | bool | str
    grade: str  # MEASURED | FITTED | BOUNDED | ASSUMED
    evidence: str  # one sentence: the data and the rule it came from


@dataclass(frozen=True)
class FittedRange:
    """What the run covered: a prediction beyond it says so and widens its error."""

    max_users: float  # most concurrent users of any phase (closed loop)
    max_rps: float  # most completed requests/s of any phase (model time)
    max_running: float  # most requests seen running at once per replica
    prompt_tokens: tuple[int, int]  # p5, p95 of the prompts
    output_tokens: tuple[int, int]
    cap: int | None  # the batch/slot cap in force, when the run reached it


@dataclass
class TwinProfile:
    run: str  # the run folder it was fitted on
    engine: str  # the vendor of the scraped metrics (vllm, llama.cpp...) or "unknown"
    replicas: int
    parameters: list[Parameter]
    fitted_range: FittedRange
    workload: dict[str, Any]  # scenario, shape and the Locust options to replay the run's load
    regressions: dict[str, dict[str, float]] = field(default_factory=dict)  # name -> coefficients, r2, n
    goodness: list[dict[str, Any]] = field(default_factory=list)  # per phase: measured vs twin (replay)
    notes: list[str] = field(default_factory=list)

    def values(self) -> dict[str, float | int | bool | str]:
        return {p.name: p.value for p in self.parameters}

    def to_toml(self) -> str:
        """A flat simulator profile: every key is unique across tables (simulator/config.py), so one table."""
        lines = [
            f"# Digital twin of {self.run} ({self.engine}, {self.replicas} replica(s)), fitted by `loadline twin fit`.",
            f"# Evidence and goodness of fit: {TWIN_JSON} beside this file.",
            "[twin]",
        ]
        lines += [f"{p.name} = {_toml_value(p.value)}  # {p.grade}" for p in self.parameters]
        return "\n".join(lines) + "\n"

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, default=str) + "\n"

    def write(self, folder: Path) -> tuple[Path, Path]:
        folder.mkdir(parents=True, exist_ok=True)
        toml, js = folder / TWIN_TOML, folder / TWIN_JSON
        toml.write_text(self.to_toml())
        js.write_text(self.to_json())
        return toml, js

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TwinProfile:
        rng = data["fitted_range"]
        return cls(
            run=data["run"],
            engine=data["engine"],
            replicas=int(data["replicas"]),
            parameters=[Parameter(**p) for p in data["parameters"]],
            fitted_range=FittedRange(
                float(rng["max_users"]),
                float(rng["max_rps"]),
                float(rng["max_running"]),
                tuple(rng["prompt_tokens"]),
                tuple(rng["output_tokens"]),
                rng["cap"],
            ),
            workload=data["workload"],
            regressions=data.get("regressions", {}),
            goodness=data.get("goodness", []),
            notes=data.get("notes", []),
        )


def _toml_value(value: float | int | bool | str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(round(value, 9))
    return json.dumps(value)
