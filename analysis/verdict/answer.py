"""The run's answer (loadline/core/answer.py), computed once from the report's analysis.

Every figure a user acts on is settled here and nowhere else: the status and its exit code, trust,
the capacity points, the safe operating point (clamped to the highest load that met the SLO), the
sweep's answer, replicas for a target, the limiting layer with its measured evidence and the time
split. The renderers (summary.md, report.html, junit.xml, the run's log line, `loadline plan --run`,
the web UI) read the answer and compute nothing of their own.

A rate sweep is judged on its answer (shapes/rate_sweep.py): it floods the server on purpose, so its
flood failing the gate says nothing; the sweep passes when it found a compliant rate that meets the
SLO's target rate x safety factor (any compliant rate when the SLO sets no target).
"""

from __future__ import annotations

from typing import Any

from loadline.analysis.verdict import capacity
from loadline.analysis.verdict.ending import STOPPED, ending
from loadline.core.answer import (
    Answer,
    Evidence,
    Layer,
    Load,
    Point,
    Replicas,
    SafePoint,
    SetAside,
    SloSource,
    Status,
    TimeSplit,
    Trust,
    exit_code,
)
from loadline.core.slo import SLO

TOP_EVIDENCE = 3


def _num(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number else None  # NaN -> None


def load_of(point: dict[str, Any]) -> Load:
    return Load(
        users=_num(point.get("users")),
        rps=_num(point.get("rps")),
        offered_rps=_num(point.get("target_rate")),
        phase=str(point["label"]) if point.get("label") is not None else None,
    )


def point_of(point: dict[str, Any] | None) -> Point:
    point = point or {}
    if not point.get("found"):
        return Point(False, None, str(point.get("reason") or "no data"))
    return Point(True, load_of(point), "; ".join(point.get("reasons") or []) or str(point.get("reason") or ""))


def sweep_of(manifest: dict[str, Any]) -> Point | None:
    """The rate sweep's own answer (manifest `sweep_max_rate`, `sweep`), for sweeps only."""
    if "sweep_max_rate" not in manifest:
        return None
    rate = _num(manifest.get("sweep_max_rate"))
    text = str(manifest.get("sweep") or "")
    if rate is None:
        return Point(False, None, text or "no SLO-compliant rate")
    return Point(True, Load(offered_rps=rate, phase=None), text)


# --- status -------------------------------------------------------------------------------------
def _first_failure(criteria: list[dict[str, Any]]) -> str:
    for c in criteria:
        if c.get("passed") is False:
            measured = c.get("measured")
            shown = (
                "-"
                if measured is None
                else (
                    f"{measured:.2%}"
                    if c.get("unit") == "fraction"
                    else f"{measured:,.0f} {c.get('unit') or ''}".strip()
                )
            )
            return f"{c['name']} {shown} (limit {c['threshold']}) in {c.get('where') or 'the run'}"
    return ""


def status_of(verdict: dict[str, Any], slo: SLO, sweep: Point | None) -> tuple[Status, str]:
    """The status and the one line that says why."""
    v = verdict.get("validity") or {}
    manifest = verdict.get("manifest") or {}
    criteria = (verdict.get("slo") or {}).get("criteria") or []
    if v.get("usable") is False:  # the hint goes to next_steps, said once
        hint = str((v.get("setup_failure") or {}).get("hint") or "")
        reason = str(v.get("reason")).replace(f"; {hint}", "") if hint else str(v.get("reason"))
        return Status.UNUSABLE, f"unusable run: {reason}"
    ended = ending(manifest)  # the one mapping from the manifest's end (verdict/ending.py)
    if ended is not None:
        return (Status.STOPPED_BY_USER if ended.status == STOPPED else Status.INTERRUPTED), ended.reason
    if sweep is not None:
        return _sweep_status(sweep, slo)
    unjudged = (verdict.get("slo") or {}).get("unjudged") or []
    if any(c.get("passed") is False for c in criteria):
        return Status.FAIL, "the SLO failed: " + _first_failure(criteria)
    if unjudged:
        return Status.INCOMPLETE, f"no criterion failed, but {', '.join(unjudged)} applies and had no data"
    return Status.PASS, "every criterion that applies was met in every phase"


def _sweep_status(sweep: Point, slo: SLO) -> tuple[Status, str]:
    if not sweep.found or sweep.load is None or sweep.load.offered_rps is None:
        return Status.FAIL, f"the rate sweep found no SLO-compliant rate ({sweep.reason})"
    rate = sweep.load.offered_rps
    if slo.target_qps is None:
        return Status.PASS, (
            f"the rate sweep found {rate:.3g} req/s SLO-compliant (judged on its answer: the "
            "SLO sets no target_qps, so any compliant rate passes)"
        )
    need = slo.target_qps * slo.safety_factor
    verb = "meets" if rate >= need else "falls short of"
    return (
        Status.PASS if rate >= need else Status.FAIL,
        f"the rate sweep's answer, {rate:.3g} req/s, {verb} the target {slo.target_qps:g} x "
        f"{slo.safety_factor:g} = {need:.3g} req/s (a sweep is judged on its answer)",
    )


# --- trust --------------------------------------------------------------------------------------
def set_aside_of(verdict: dict[str, Any]) -> tuple[SetAside, ...]:
    """The phases a worker left short (analysis/stats/short_phases.py), as build.analyse set them aside."""
    return tuple(
        SetAside(str(p["phase"]), str(p["reason"]), tuple(str(w) for w in p.get("would_be") or ()))
        for p in verdict.get("set_aside") or ()
    )


def trust_of(
    verdict: dict[str, Any], untrusted_note: str | None, aside: tuple[SetAside, ...] = ()
) -> tuple[Trust, tuple[str, ...]]:
    v = verdict.get("validity") or {}
    if not v or v.get("error") or v.get("usable") is False:
        return Trust.NOT_ASSESSED, ((str(v.get("error")),) if v.get("error") else ())
    if untrusted_note:
        return Trust.UNTRUSTED, (untrusted_note,)
    doubts = tuple(str(x["message"]) for x in v.get("findings") or [] if x.get("severity") == "untrustworthy")
    if aside:  # the SLO gate judged phases that carried less than their rows say
        doubts += (
            f"{len(aside)} phase(s) ran below their planned users (a worker lost or short): "
            + ", ".join(p.phase for p in aside),
        )
    return (Trust.DOUBTFUL, doubts) if doubts else (Trust.TRUSTED, ())


# --- safe operating point -----------------------------------------------------------------------
def safe_of(safe: dict[str, Any], best: Point) -> SafePoint:
    """The safe operating point, never above the highest load that met the SLO (untested above it)."""
    if not safe.get("found"):
        return SafePoint(False, reason=str(safe.get("reason") or "no basis"))
    low, high = (float(x) for x in safe["rps"])
    users = (float(safe["users"][0]), float(safe["users"][1])) if safe.get("users") else None
    reason = str(safe.get("reason") or "")
    ceiling = best.load.rps if best.found and best.load is not None else None
    if ceiling is None:
        return SafePoint(
            False, reason=(f"no tested load met the SLO: {reason} would be {low:.3g}-{high:.3g} req/s, untested")
        )
    if high <= ceiling:
        return SafePoint(
            True, (low, high), users, str(safe.get("basis_label") or ""), bool(safe.get("lower_bound")), None, reason
        )
    # the 60-70 % band reaches above every load that met the SLO: what lies above was not tested
    clamped_low = min(low, ceiling)
    users_range = None
    if users and best.load is not None and best.load.users is not None:
        users_range = (min(users[0], best.load.users), min(users[1], best.load.users))
    where = best.load.phase if best.load and best.load.phase else "-"
    between = (
        f"{reason} would be {low:.3g}-{high:.3g} req/s, above the highest load that met the SLO, "
        f"{ceiling:.3g} req/s ({where}): not tested; a step between that load and the break point would say"
    )
    if low >= ceiling:
        return SafePoint(
            True,
            (ceiling, ceiling),
            users_range,
            str(safe.get("basis_label") or ""),
            bool(safe.get("lower_bound")),
            ceiling,
            between,
        )
    return SafePoint(
        True,
        (clamped_low, ceiling),
        users_range,
        str(safe.get("basis_label") or ""),
        bool(safe.get("lower_bound")),
        ceiling,
        f"{reason}, capped at {ceiling:.3g} req/s: the highest load that met the SLO ({where}); "
        f"{ceiling:.3g}-{high:.3g} req/s was not tested",
    )


# --- layer, time split, replicas -------------------------------------------------------------------
def layer_name(bottleneck: dict[str, Any]) -> str | None:
    """The layer as this engine has it: compute with no GPU metric scraped is not called gpu-compute."""
    layer = bottleneck.get("layer")
    if layer == "gpu-compute" and bottleneck.get("gpu_seen") is False:
        return "compute"
    return layer


def layer_of(bottleneck: dict[str, Any]) -> Layer:
    name = layer_name(bottleneck)
    if not name:
        reason = "; ".join(bottleneck.get("not_judged") or []) or str(bottleneck.get("error") or "no verdict")
        return Layer(None, not_judged=reason)
    evidence = tuple(
        Evidence(str(e["signal"]), str(e["measured"]), str(e["threshold"]))
        for e in (bottleneck.get("measured") or [])[:TOP_EVIDENCE]
    )
    if not evidence:  # headroom, unidentified: their evidence is said in words
        evidence = tuple(Evidence(str(line), "", "") for line in (bottleneck.get("evidence") or [])[:TOP_EVIDENCE])
    return Layer(
        name,
        bottleneck.get("confidence"),
        str(bottleneck.get("sentence") or ""),
        evidence,
        tuple(str(a) for a in bottleneck.get("actions") or []),
    )


def time_split_of(split: dict[str, Any]) -> TimeSplit:
    run = split.get("run") or {}
    part = run.get("ttft") or run.get("e2e") or {}
    share = _num(part.get("outside_share"))
    caveat = str(split.get("caveat") or "")
    if share is not None and share < 0:
        caveat = caveat or (
            f"outside-engine share measured {share:.1%}: below zero, within the error of comparing "
            "client and engine clocks; read it as about zero"
        )
        share = 0.0
    return TimeSplit(None if share is None else min(share, 1.0), str(split.get("sentence") or ""), caveat)


def per_replica_of(best: Point, plan: dict[str, Any]) -> tuple[float | None, str]:
    """The max compliant load's req/s per replica behind the target (capacity.replicas_in_run)."""
    if not best.found or best.load is None or not best.load.rps:
        return None, "no load met the SLO"
    replicas = int(plan.get("replicas_in_run") or 1)
    how = str(plan.get("replicas_how") or "assumed")
    return (
        best.load.rps / replicas,
        f"the max SLO-compliant load, {best.load.rps:.3g} req/s, / {replicas} replica(s) ({how})",
    )


def replicas_of(target: float | None, per_replica: float | None, basis: str) -> Replicas | None:
    if not target or not per_replica:
        return None
    plan = capacity.plan(target, per_replica)
    return Replicas(
        float(target),
        round(per_replica, 4),
        int(plan["replicas"]),
        int(plan["serving_replicas"]),
        int(plan["spares"]),
        basis,
        tuple(plan["steps"]),
    )


def sweep_best(sweep: Point, phases: list[dict[str, Any]]) -> Point:
    """The probe the sweep's answer names, as the max compliant load: a sweep's judge decided it."""
    rate = sweep.load.offered_rps if sweep.load else None
    probes = [
        p
        for p in phases
        if _num(p.get("target_rate")) is not None
        and rate is not None
        and abs(float(p["target_rate"]) - rate) <= 1e-6 * max(1.0, rate)
    ]
    if not probes:
        return Point(True, Load(offered_rps=rate, rps=rate), "the rate sweep's answer")
    probe = probes[-1]
    return Point(True, load_of(probe), "the rate sweep's answer")


def sweep_safe(best: Point) -> SafePoint:
    rps = best.load.rps if best.load else None
    if not rps or best.load is None:
        return SafePoint(False, reason="the sweep's answer has no completed rate")
    return SafePoint(
        True,
        (round(rps * 0.6, 3), round(rps * 0.7, 3)),
        None,
        best.load.phase or "",
        False,
        None,
        "60-70 % of the rate sweep's answer (the highest rate that met the SLO)",
    )


def next_steps(status: Status, trust: Trust, layer: Layer, verdict: dict[str, Any]) -> tuple[str, ...]:
    steps: list[str] = []
    if status is Status.UNUSABLE:
        setup = (verdict.get("validity") or {}).get("setup_failure") or {}
        hint = str(setup.get("hint") or "")
        steps.append(hint or "fix the target's setup (see 'Is this run valid?'), then run again")
    if trust is Trust.UNTRUSTED:
        steps.append("rerun with more load-generator CPU (loadline run --workers N), then judge again")
    steps += list(layer.actions[:2])
    return tuple(dict.fromkeys(steps))


def compute(verdict: dict[str, Any], slo: SLO, slo_source: SloSource, untrusted_note: str | None = None) -> Answer:
    """The answer of an analysed run (`verdict`: analysis.report.build.analyse's dict)."""
    manifest = verdict.get("manifest") or {}
    sweep = sweep_of(manifest)
    status, reason = status_of(verdict, slo, sweep)
    aside = set_aside_of(verdict)
    trust, reasons = trust_of(verdict, untrusted_note, aside)
    if sweep is not None and sweep.found:
        best = sweep_best(sweep, verdict.get("phases") or [])
        safe = sweep_safe(best)
    else:
        best = point_of(verdict.get("max_slo_throughput"))
        safe = safe_of(verdict.get("safe_operating_point") or {}, best)
    layer = layer_of(verdict.get("bottleneck") or {})
    plan = verdict.get("capacity") or {}
    per_replica, basis = per_replica_of(best, plan) if status is not Status.UNUSABLE else (None, "unusable run")
    target = slo.target_qps or capacity.target_of(manifest)
    return Answer(
        status=status,
        trust=trust,
        exit_code=exit_code(status, trust),
        reason=reason,
        slo=slo_source,
        max_compliant=best,
        knee=point_of(verdict.get("knee")),
        break_point=point_of(verdict.get("break_point")),
        safe=safe,
        layer=layer,
        time_split=time_split_of(verdict.get("time_split") or {}),
        per_replica_rps=None if per_replica is None else round(per_replica, 4),
        per_replica_basis=basis,
        sweep=sweep,
        replicas=replicas_of(target, per_replica, basis),
        trust_reasons=reasons,
        next_steps=next_steps(status, trust, layer, verdict),
        set_aside=aside,
    )
