"""Is this run valid? Asked before any capacity statement. Pure functions: run data in, findings out.

Three questions:
1. Setup failure: did most attempts fail the way a misconfigured test fails (the target rejected the
   request: 400/401/403/404/405/501; or it answered 2xx with something that is not the API's reply,
   e.g. an HTML login page)? Then nothing about capacity can be said: the run is *unusable* and the
   commands exit 2. The report shows status, content type and a short redacted body sample.
   Likewise when more than INVALID_SHARE of the attempts were refused as invalid requests (a prompt
   over the context, a bad parameter): the tool's requests, not the service's capacity
   (both in analysis/verdict/setup_failure.py).
2. Was the load generator saturated or behind (analysis/verdict/generator.py, thresholds in
   loadline/core/saturation.py)? Then the client's numbers include its own queueing. `gate_doubts`
   names the SLO criteria whose verdict lies within the error that lag implies (the report then
   exits 2: the rig, not the server, decided the gate).
3. The measurement floor (analysis/verdict/floor.py): how much the client side adds to what it
   measures, per phase, in model time, and whether that is material to a criterion's margin.

The generator's delays are properties of its machine: this reads the run as recorded (wall clock)
and states their model-time cost by the one rule, loadline.core.runsettings.model_value.

`assess(...)` returns a plain dict (verdict.json["validity"]); docs/architecture.md lists its fields.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from loadline.analysis.verdict import ending as ending_of
from loadline.analysis.verdict.floor import FLOOR_QUANTILE, floor_materiality, measurement_floor
from loadline.analysis.verdict.floor import q as _q
from loadline.analysis.verdict.gate import Criterion
from loadline.analysis.verdict.generator import behind_phases, behind_summary, is_saturated, watch_rests
from loadline.analysis.verdict.setup_failure import invalid_requests, setup_failure
from loadline.core.runsettings import model_value

# --- 4. did the run end on its own? -------------------------------------------------------------------
FINISHED = ending_of.FINISHED  # loadline/runtime/collector.py writes it when Locust's test ended on its own
COMPLETION = "run completed"  # the gate criterion an interrupted or stopped run fails


def completion(manifest: dict | None) -> dict | None:
    """None when the run ended on its own; else {status, by, reason} (analysis/verdict/ending.py): a run
    stopped in the web UI, by a signal, or whose master died. Its records stop early and the late phases
    are partial, so no SLO pass can rest on it."""
    ended = ending_of.ending(manifest)
    return None if ended is None else {"status": ended.status, "by": ended.by, "reason": ended.reason}


def completion_criterion(manifest: dict | None) -> Criterion | None:
    """The gate's failed "run completed" criterion for an incomplete run (exit 1, never PASS), or None."""
    ended = completion(manifest)
    if ended is None:
        return None
    return Criterion(
        COMPLETION, f"status = {FINISHED}", 1.0, None, False, where=ended["status"], unit="run", why=ended["reason"]
    )


# --- all together ------------------------------------------------------------------------------------
def assess(
    requests: pd.DataFrame,
    phases: pd.DataFrame,
    generator: pd.DataFrame | None,
    criteria: list[dict],
    scale: float,
    truth: pd.DataFrame | None = None,
    secrets: tuple[str, ...] = (),
) -> dict:
    """verdict.json["validity"]: usable / trustworthy, the findings, and the parts the verdict reads.

    usable=False (a setup failure) -> `reason` is the one line the commands print with exit 2.
    trustworthy=False -> a saturated generator or a material floor: the numbers stand, the verdict's
    confidence goes down (`confidence_steps`, read by analysis/verdict/bottleneck.py).
    """
    findings: list[dict] = []
    setup = setup_failure(requests, secrets) if len(requests) else None
    if setup:
        findings.append({"kind": "setup-failure", "severity": "unusable", "message": setup["reason"]})
    invalid = invalid_requests(requests, secrets) if len(requests) else None
    if invalid:
        findings.append(
            {
                "kind": "invalid-requests",
                "severity": "unusable" if invalid["unusable"] else "note",
                "message": invalid["message"],
            }
        )
    unusable_reason = setup["reason"] if setup else (invalid["message"] if invalid and invalid["unusable"] else None)
    saturated, gen_evidence = is_saturated(generator)
    if saturated:
        findings.append(
            {
                "kind": "generator-saturated",
                "severity": "untrustworthy",
                "message": "the load generator was saturated: " + "; ".join(gen_evidence),
            }
        )
    floor = measurement_floor(requests, phases, scale, truth, generator)
    floor.update(floor_materiality(floor, criteria))
    seen_behind = behind_phases(requests, phases)
    behind, doubts, lag_error = _weigh_behind(
        seen_behind, generator if saturated else None, criteria, scale, truth_measured=floor["method"] == "truth"
    )
    if seen_behind:
        message = "the load generator was behind (read its sockets later than one token gap): " + behind_summary(
            seen_behind, scale
        )
        if not behind:
            message += (
                f"; the simulator's truth log measured what that cost TTFT and E2E (the floor, "
                f"{_fmt(floor.get('floor_model_ms'))} ms model time), and no ITL or TPOT criterion is "
                "within the read delay of its limit"
            )
        findings.append(
            {"kind": "generator-behind", "severity": "untrustworthy" if behind else "note", "message": message}
        )
    rests = watch_rests(generator)
    if rests:
        findings.append({"kind": "watch-rested", "severity": "note", "message": "; ".join(rests)})
    for reason in floor["reasons"]:
        findings.append({"kind": "measurement-floor", "severity": "untrustworthy", "message": reason})
    steps = int(saturated or bool(behind)) + int(floor["material"])
    return {
        "usable": unusable_reason is None,
        "trustworthy": unusable_reason is None and steps == 0,
        "reason": unusable_reason,
        "findings": findings,
        "setup_failure": setup,
        "invalid_requests": invalid,
        "generator": {
            "saturated": saturated,
            "evidence": gen_evidence,
            "behind": behind,
            "behind_seen": seen_behind,
            "lag_error_model_ms": lag_error,
            "gate_doubts": doubts,
            "watch_rested": rests,
        },
        "floor": floor,
        "confidence_steps": steps,  # how many steps (high -> medium -> low) the verdict's confidence drops
    }


LATENCY_CRITERIA = ("TTFT", "ITL", "TPOT", "E2E")  # what late stamps move
GAP_CRITERIA = ("ITL", "TPOT")  # what merged stamps move and the truth log (first and last token) cannot see


def _fmt(value: float | None) -> str:
    return "?" if value is None else f"{value:,.1f}"


def _weigh_behind(
    behind: list[dict], saturated_samples: pd.DataFrame | None, criteria: list[dict], scale: float, truth_measured: bool
) -> tuple[list[dict], list[dict], float | None]:
    """(phases where being behind counts, gate doubts, lag error in model ms).

    The read-delay test (read later than one token gap) is a proxy for what late reads cost. With
    the simulator's truth log the cost to TTFT and E2E is measured directly (the floor), so the proxy
    only speaks for the gaps between tokens (ITL, TPOT), which the truth log does not time: being
    behind then counts only when an ITL or TPOT criterion lies within the read delay of its limit.
    Without truth (a real target) it counts as it is."""
    lag_error = _lag_error_model_ms(behind, saturated_samples, scale)
    if not truth_measured or not behind:
        return behind, gate_doubts(criteria, lag_error), lag_error
    gaps = [c for c in criteria if str(c.get("name", "")).upper().startswith(GAP_CRITERIA)]
    doubts = gate_doubts(gaps, lag_error)
    return (behind if doubts else []), doubts, (lag_error if doubts else None)


def _lag_error_model_ms(behind: list[dict], generator: pd.DataFrame | None, scale: float) -> float | None:
    """How late a stamp may be while the generator lagged, model ms: the worst phase's read delay p99
    (kernel clock) or, when the self-check saw saturation, the sampled loop lag's P95 (how late a
    greenlet resumed); the larger. None when neither applies."""
    values = [b["read_delay_p99_ms"] for b in behind]
    if generator is not None and len(generator):
        values.append(_q(pd.to_numeric(generator["loop_lag_ms"], errors="coerce"), FLOOR_QUANTILE))
    values = [v for v in values if v is not None]
    return model_value("lag_error_ms", max(values), scale) if values else None


def gate_doubts(criteria: list[dict], lag_error_model_ms: float | None) -> list[dict]:
    """Latency criteria (ms) whose pass or failure lies within the lag's error: |measured - limit| <= error.

    Only those can make the gate untrustworthy (exit 2); a criterion far from its limit keeps its
    verdict and the lag is a warning. Each: criterion, passed, margin_ms, message."""
    if not lag_error_model_ms:
        return []
    out = []
    for c in criteria:
        name = str(c.get("name", ""))
        if c.get("unit") != "ms" or c.get("measured") is None or not name.upper().startswith(LATENCY_CRITERIA):
            continue
        margin = abs(float(c["measured"]) - float(c["limit"]))
        if margin <= lag_error_model_ms:
            verdict = "passed" if c.get("passed") else "failed"
            out.append(
                {
                    "criterion": name,
                    "passed": c.get("passed"),
                    "margin_ms": margin,
                    "message": f"{name} {verdict} by {margin:,.0f} ms, within the {lag_error_model_ms:,.0f} ms "
                    "the lagging generator may add (model time)",
                }
            )
    return out


def generator_gate_note(
    validity: dict, passed: bool, criteria: Sequence[dict] = (), unjudged: Sequence[str] = ()
) -> tuple[str | None, bool]:
    """(note for the gate, untrustworthy) when the generator was saturated or behind, else (None, False).

    Untrustworthy (the report exits 2, like an unusable run: the test rig, not the server, decided)
    only when a latency criterion's verdict lies within the lag's error (gate_doubts) and that could
    change the outcome: a criterion the lag cannot move that failed (error rate, run completed), or
    one that had no data, makes the run fail anyway (exit 1). Otherwise the verdict stands with a
    warning, since the lag can only have moved latencies by less than the margin."""
    generator = validity.get("generator") or {}
    if not (generator.get("saturated") or generator.get("behind")):
        return None, False
    outcome = "PASS" if passed else "FAIL"
    doubts = generator.get("gate_doubts") or []
    doubtful = {d["criterion"] for d in doubts}
    fails_anyway = bool(unjudged) or any(
        c.get("passed") is False and str(c.get("name")) not in doubtful for c in criteria
    )
    if doubts and not fails_anyway:
        within = "; ".join(d["message"] for d in doubts)
        return (
            f"{outcome}, but the load generator was behind: trust: untrusted ({within}); "
            "rerun with more generator CPU (--workers N)"
        ), True
    error = generator.get("lag_error_model_ms")
    size = f" (up to {error:,.0f} ms, model time)" if error else ""
    why = (
        "a criterion failed beyond the lag's reach (or had no data), so the run fails anyway"
        if doubts
        else "every criterion is further than that from its limit, so the verdict stands"
    )
    return f"{outcome}, but the load generator was behind: latencies include its own delay{size}; {why}", False


_LEVELS = ("low", "medium", "high")


def lower_confidence(confidence: str | None, steps: int) -> str | None:
    """`confidence` lowered by `steps` levels (high -> medium -> low), never below low."""
    if confidence not in _LEVELS or steps <= 0:
        return confidence
    return _LEVELS[max(0, _LEVELS.index(confidence) - steps)]


def qualify(bottleneck: dict, validity: dict) -> dict:
    """The bottleneck verdict with validity's doubts said and its confidence lowered.

    A stop-gap for the report until analysis/verdict/bottleneck.py weighs validity itself: a verdict
    that sets `validity_considered` is returned unchanged. A `load-generator` verdict already names
    the saturation, so only the floor lowers it."""
    if not bottleneck or bottleneck.get("validity_considered") or not bottleneck.get("layer"):
        return bottleneck
    floor = validity.get("floor") or {}
    generator = validity.get("generator") or {}
    saturated = bool(generator.get("saturated") or generator.get("behind"))
    steps = int(bool(floor.get("material"))) + int(saturated and bottleneck["layer"] != "load-generator")
    if steps == 0:
        return bottleneck
    out = dict(bottleneck)
    before = out.get("confidence")
    out["confidence"] = lower_confidence(before, steps)
    doubts = [f["message"] for f in validity.get("findings") or [] if f.get("severity") == "untrustworthy"]
    out["evidence"] = (
        list(out.get("evidence") or [])
        + [
            (
                f"confidence lowered from {before} to {out['confidence']}: {doubt}"
                if out["confidence"] != before
                else f"confidence stays {before}: {doubt}"
            )
            for doubt in doubts[:1]
        ]
        + [f"also: {doubt}" for doubt in doubts[1:]]
    )
    return out
