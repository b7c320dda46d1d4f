"""The run's answer: what a user acts on, as one typed value.

`loadline.analysis.verdict.answer.compute` fills it once from the report's analysis; every surface
renders it and computes nothing of its own: the run's last log line, summary.md, report.html,
junit.xml, verdict.json (`answer`, validated by the JSON Schema shipped beside this module),
`loadline plan --run` and the web UI. Standard library only, so the master's runtime and the plan
command read it without pandas.

Terms, defined here once:
- status: how the run ended against its SLO (`Status`).
- trust: whether the numbers can carry that status (`Trust`).
- load: users (closed loop) and requests/s completed; for arrival-rate runs also the offered rate.
- max compliant load: the heaviest phase that met the SLO (and carried its offered rate).
- break point: the lightest load that broke the SLO, with enough samples to say so.
- safe point: 60-70 % of the capacity the run showed (DOMAIN.md), never above the max compliant load.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from importlib import resources
from typing import Any

SCHEMA_VERSION = 1
SCHEMA_FILE = "verdict.schema.json"  # verdict.json; the answer is its `$defs/answer`


class Status(StrEnum):
    """How the run ended against its SLO."""

    PASS = "pass"  # every criterion that applies was measured and met
    FAIL = "fail"  # a criterion failed
    INCOMPLETE = "incomplete"  # nothing failed, but a criterion that applies had no data
    INTERRUPTED = "interrupted"  # stopped by a signal or a dead master before its end
    STOPPED_BY_USER = "stopped by user"  # STOP in the web UI before the shape ended
    UNUSABLE = "unusable"  # the requests never reached a working engine (setup failure)

    @property
    def headline(self) -> str:
        return self.value.upper()


class Trust(StrEnum):
    """Whether the measurement can carry the status. One term, used by every surface."""

    TRUSTED = "trusted"  # nothing found against the numbers
    DOUBTFUL = "doubtful"  # findings lower confidence (named in `trust_reasons`); the status stands
    UNTRUSTED = "untrusted"  # an SLO verdict lies within the measurement's own error: exit 2
    NOT_ASSESSED = "not assessed"  # the run could not be checked (no records, or the check failed)


# 0 pass; 1 the SLO (or the run's own end) failed; 2 unusable, or a verdict the rig decided.
EXIT_CODES = {
    Status.PASS: 0,
    Status.FAIL: 1,
    Status.INCOMPLETE: 1,
    Status.INTERRUPTED: 1,
    Status.STOPPED_BY_USER: 1,
    Status.UNUSABLE: 2,
}


def exit_code(status: Status, trust: Trust) -> int:
    return 2 if trust is Trust.UNTRUSTED else EXIT_CODES[status]


@dataclass(frozen=True)
class Load:
    """A load level: users (closed loop), requests/s completed, and the offered rate of open-loop phases."""

    users: float | None = None
    rps: float | None = None
    offered_rps: float | None = None
    phase: str | None = None

    def text(self) -> str:
        parts = []
        if self.offered_rps is not None:
            parts.append(f"{self.offered_rps:.3g} req/s offered")
        if self.users is not None and self.offered_rps is None:
            parts.append(f"{self.users:g} users")
        if self.rps is not None:
            parts.append(f"{self.rps:.3g} req/s completed")
        return ", ".join(parts) or "-"


@dataclass(frozen=True)
class Point:
    """A named load (knee, break point, max compliant load, a sweep's answer), or why there is none."""

    found: bool
    load: Load | None = None
    reason: str = ""

    def text(self) -> str:
        if not self.found or self.load is None:
            return f"none ({self.reason})" if self.reason else "none"
        where = f" ({self.load.phase})" if self.load.phase else ""
        return self.load.text() + where


@dataclass(frozen=True)
class SafePoint:
    found: bool
    rps: tuple[float, float] | None = None
    users: tuple[float, float] | None = None
    basis: str = ""  # what the 60-70 % is of
    lower_bound: bool = False  # no break point: the service may carry more
    untested_above: float | None = None  # req/s: the range was clamped to the highest load that met the SLO
    reason: str = ""

    def text(self) -> str:
        if not self.found or self.rps is None:
            return f"none ({self.reason})" if self.reason else "none"
        users = ""
        if self.users:  # whole users: an interpolated "8.1 users" reads as a precision it has not
            low, high = (max(1, round(u)) for u in self.users)
            users = f" (about {low} user{'s' * (low != 1)})" if low == high else f" (about {low}-{high} users)"
        tail = f"; untested above {self.untested_above:.3g} req/s" if self.untested_above is not None else ""
        bound = " (a lower bound)" if self.lower_bound else ""
        if self.rps[0] == self.rps[1]:  # the band lay above every load that met the SLO: only its top is tested
            return f"up to {self.rps[1]:.3g} req/s{users}{tail}"
        return f"{self.rps[0]:.3g}-{self.rps[1]:.3g} req/s{users}{bound}{tail}"


@dataclass(frozen=True)
class SloSource:
    """The SLO the status was judged against, and where it came from."""

    name: str  # a file's name, or "defaults"
    origin: str  # "run" (recorded at the run's start), "given" (this report's --slo) or "defaults"
    note: str = ""  # said whenever it is not the run's own SLO


@dataclass(frozen=True)
class Replicas:
    target_rps: float
    per_replica_rps: float
    replicas: int  # serving + spares, at the stated scaling efficiency
    serving: int
    spares: int
    basis: str
    steps: tuple[str, ...] = ()  # the arithmetic, as `loadline plan` prints it

    def text(self) -> str:
        return (
            f"{self.replicas} replicas for {self.target_rps:g} req/s ({self.serving} serving + {self.spares} spare, "
            f"{self.per_replica_rps:.3g} req/s per replica: {self.basis})"
        )


@dataclass(frozen=True)
class Evidence:
    """One measured signal against its threshold."""

    signal: str
    measured: str
    threshold: str

    def text(self) -> str:
        if self.threshold:
            return f"{self.signal}: {self.measured} (threshold {self.threshold})"
        return f"{self.signal}: {self.measured}" if self.measured else self.signal  # said in words


@dataclass(frozen=True)
class Layer:
    """The limiting layer: its name for this engine, confidence, evidence (strongest first), what to do."""

    name: str | None
    confidence: str | None = None
    sentence: str = ""
    evidence: tuple[Evidence, ...] = ()
    actions: tuple[str, ...] = ()
    not_judged: str = ""


@dataclass(frozen=True)
class TimeSplit:
    outside_share: float | None = None  # of client TTFT (else E2E) spent outside the engine
    sentence: str = ""
    caveat: str = ""  # the measurement's limit when a share is negative or unreliable


@dataclass(frozen=True)
class SetAside:
    """A phase that ran below its planned users (a worker lost or short): no knee, break point or max
    compliant load is taken from it; `would_be` names those it would have been."""

    phase: str
    reason: str
    would_be: tuple[str, ...] = ()

    def text(self) -> str:
        would = f"; it would have been the {' and '.join(self.would_be)}" if self.would_be else ""
        return f"{self.phase} ({self.reason}{would})"


def set_aside_text(phases: tuple[SetAside, ...]) -> str:
    return (
        "; ".join(p.text() for p in phases)
        + ": ran below the planned users, not used as knee, break point or max compliant load"
    )


@dataclass(frozen=True)
class Answer:
    status: Status
    trust: Trust
    exit_code: int
    reason: str  # the one line that says why the status is what it is
    slo: SloSource
    max_compliant: Point
    knee: Point
    break_point: Point
    safe: SafePoint
    layer: Layer
    time_split: TimeSplit = TimeSplit()
    per_replica_rps: float | None = None  # the max compliant load's req/s per replica behind the target
    per_replica_basis: str = ""
    sweep: Point | None = None  # the rate sweep's answer (the highest passing probe), sweeps only
    replicas: Replicas | None = None  # with a target rate (the SLO's target_qps)
    trust_reasons: tuple[str, ...] = ()
    next_steps: tuple[str, ...] = ()
    set_aside: tuple[SetAside, ...] = ()  # phases a worker left short (analysis/stats/short_phases.py)
    schema_version: int = field(default=SCHEMA_VERSION)

    @property
    def headline(self) -> str:
        head = self.status.headline
        if self.trust is Trust.UNTRUSTED:
            return f"{head}, NOT TRUSTED"
        return head

    def log_line(self) -> str:
        """The run's last log line: status, trust, the capacity figures."""
        parts = [
            f"{self.headline} (exit {self.exit_code})",
            f"trust {self.trust.value}",
            f"max compliant {self.max_compliant.text()}",
            f"safe {self.safe.text()}",
        ]
        if self.sweep is not None:
            parts.insert(2, f"sweep answer {self.sweep.text()}")
        if self.replicas is not None:
            parts.append(f"{self.replicas.replicas} replicas for {self.replicas.target_rps:g} req/s")
        if self.layer.name:
            parts.append(f"limit {self.layer.name}")
        if self.set_aside:
            parts.append(f"set aside (workers lost or short): {', '.join(p.phase for p in self.set_aside)}")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Answer:
        """The answer of a verdict.json (`answer`), for surfaces that read a finished report."""

        def point(d: dict[str, Any] | None) -> Point | None:
            if d is None:
                return None
            load = d.get("load")
            return Point(bool(d["found"]), Load(**load) if load else None, str(d.get("reason") or ""))

        safe = dict(data["safe"])
        for key in ("rps", "users"):
            safe[key] = tuple(safe[key]) if safe.get(key) is not None else None
        layer = dict(data["layer"])
        layer["evidence"] = tuple(Evidence(**e) for e in layer.get("evidence") or ())
        layer["actions"] = tuple(layer.get("actions") or ())
        return cls(
            status=Status(data["status"]),
            trust=Trust(data["trust"]),
            exit_code=int(data["exit_code"]),
            reason=str(data["reason"]),
            slo=SloSource(**data["slo"]),
            max_compliant=point(data["max_compliant"]) or Point(False),
            knee=point(data["knee"]) or Point(False),
            break_point=point(data["break_point"]) or Point(False),
            safe=SafePoint(**safe),
            layer=Layer(**layer),
            time_split=TimeSplit(**(data.get("time_split") or {})),
            per_replica_rps=data.get("per_replica_rps"),
            per_replica_basis=str(data.get("per_replica_basis") or ""),
            sweep=point(data.get("sweep")),
            replicas=(
                Replicas(**{**data["replicas"], "steps": tuple(data["replicas"].get("steps") or ())})
                if data.get("replicas")
                else None
            ),
            trust_reasons=tuple(data.get("trust_reasons") or ()),
            next_steps=tuple(data.get("next_steps") or ()),
            set_aside=tuple(
                SetAside(str(p["phase"]), str(p["reason"]), tuple(p.get("would_be") or ()))
                for p in data.get("set_aside") or ()
            ),
            schema_version=int(data.get("schema_version", SCHEMA_VERSION)),
        )


def verdict_schema() -> dict[str, Any]:
    """The JSON Schema of report/verdict.json (shipped as package data), versioned by its `$id`."""
    schema: dict[str, Any] = json.loads(resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))
    return schema


def answer_schema() -> dict[str, Any]:
    """The schema of verdict.json's `answer` alone (the same definitions)."""
    root = verdict_schema()
    return {"$schema": root["$schema"], "$defs": root["$defs"], "$ref": "#/$defs/answer"}
