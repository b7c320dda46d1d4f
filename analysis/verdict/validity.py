"""Is this run valid? Asked before any capacity statement. Pure functions: run data in, findings out.

Three questions (issue 9, item 1):
1. Setup failure: did most attempts fail the way a misconfigured test fails (the target rejected the
   request: 400/401/403/404/405/501; or it answered 2xx with something that is not the API's reply,
   e.g. an HTML login page)? Then nothing about capacity can be said: the run is *unusable* and the
   commands exit 2. The report shows status, content type and a short redacted body sample.
2. Was the load generator saturated or behind (analysis/verdict/generator.py, thresholds in
   loadline/core/saturation.py)? Then the client's numbers include its own queueing. `gate_doubts`
   names the SLO criteria whose verdict lies within the error that lag implies (the report then
   exits 2: the rig, not the server, decided the gate).
3. The measurement floor: how much the client side (sockets, event loop, stamping) adds to what it
   measures, per phase, in model time (x time scale: a run compressed 20x multiplies the client's
   milliseconds by 20 too).
   - With the embedded simulator: records minus the truth log (the simulator's own arrival,
     first-token and last-token times, same machine, same wall clock). Exact per request.
   - Against a real target there is no truth. We use the event-loop lag the generator's self-check
     sampled in the same process during the same phase (how late a `gevent.sleep` returned, which
     is how late a token arrival can be stamped). Why not the floor of TTFB or a cheap request:
     those include the network and the target's front end, which are part of what users get, not
     a measurement error; and a calibration request before the load cannot see the lag the load
     itself causes in the generator. The fastest TTFB is reported beside it, as the fixed cost of
     the path (network + front end + client), for reference.
   The floor is material when it takes >= 1/4 of an SLO criterion's margin (|measured - limit|) or
   of the verdict rules' noise floor (Thresholds.noise_floor_ms): the 4:1 test accuracy ratio of
   metrology (ANSI/NCSL Z540.3; MIL-STD-45662A): an instrument should be at least four times finer
   than the tolerance it judges.

`assess(...)` returns a plain dict (verdict.json["validity"]); docs/architecture.md lists its fields.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from analysis.verdict.context import Thresholds
from analysis.verdict.gate import Criterion
from analysis.verdict.generator import behind_evidence, behind_phases, is_saturated
from loadline.core.redact import redact, sample

# The statuses a misconfigured test gets, not an overloaded service (RFC 9110): 400 bad request
# (wrong model name, malformed body), 401/403 auth, 404 wrong path, 405 wrong method, 501 endpoint
# not implemented. 429/503/5xx are the service's answers under load and stay capacity signals.
SETUP_STATUSES = (400, 401, 403, 404, 405, 501)
SETUP_SHARE = 0.5  # "most requests": more than half of the attempts with an outcome
API_MEDIA_TYPES = ("text/event-stream", "application/json")  # what an OpenAI-compatible server answers
NOT_EVENT_STREAM = "not_event_stream"  # records.ErrorClass.NOT_EVENT_STREAM (the value, read back from CSV)
ACCURACY_RATIO = 4.0  # test accuracy ratio 4:1 (module docstring)
FLOOR_QUANTILE = 95.0  # the floor quoted per phase: its P95, as the SLO judges P95s

_HINTS = {
    400: "the server refused the request body: check --model and the request options (max tokens, stream)",
    401: "authentication failed: check --api-key (or the gateway's credentials)",
    403: "the credentials lack access to this model or endpoint",
    404: "wrong path or model: --host must be the base URL (without /v1), and the model must exist",
    405: "the target does not accept POST on this path: is --host the inference API?",
    501: "the target does not implement this endpoint (chat vs completions?)",
}


# --- 1. setup failures --------------------------------------------------------------------------
def _media_type(value: object) -> str:
    return str(value or "").split(";")[0].strip().lower()


def _judged(requests: pd.DataFrame) -> pd.DataFrame:
    return requests[requests["status"].astype(str).isin(("ok", "error"))] if len(requests) else requests


def setup_failure(requests: pd.DataFrame, secrets: tuple[str, ...] = ()) -> dict | None:
    """The setup failure that most attempts share, or None.

    Rejected: HTTP status in SETUP_STATUSES. Not the API's reply: a failed 2xx attempt classed
    `not_event_stream`, or whose Content-Type is neither an event stream nor JSON.
    """
    rows = _judged(requests)
    if rows.empty:
        return None
    status = pd.to_numeric(rows["http_status"], errors="coerce").fillna(0).astype(int)
    error = rows["status"].astype(str) == "error"
    media = rows.get("content_type", pd.Series("", index=rows.index)).map(_media_type)
    rejected = error & status.isin(SETUP_STATUSES)
    foreign = error & status.between(200, 299) & (
        (rows["error_class"].astype(str) == NOT_EVENT_STREAM) | ((media != "") & ~media.isin(API_MEDIA_TYPES)))
    bad = rejected | foreign
    share = float(bad.sum()) / len(rows)
    if share <= SETUP_SHARE:
        return None
    culprits = rows[bad]
    statuses = Counter(int(s) for s in status[bad])
    types = Counter((t or "(none)") for t in media[bad])
    top_status = statuses.most_common(1)[0][0]
    kind = "rejected" if rejected.sum() >= foreign.sum() else "not_event_stream"
    example = culprits[status[bad] == top_status].iloc[0]
    body = _body_sample(example, secrets)
    content_type = str(example.get("content_type") or "") or "no content type"
    if kind == "rejected":
        what = f"rejected with HTTP {top_status} ({content_type})"
        hint = _HINTS.get(top_status, "")
    else:
        what = f"answered HTTP {top_status} with {content_type}, not an event stream"
        hint = "something other than the inference API answered (a login page, a proxy or a web server): check --host"
    reason = f"{len(culprits)} of {len(rows)} requests ({share:.0%}) were {what}" + (f"; {hint}" if hint else "")
    return {
        "kind": kind, "share": share, "attempts": int(len(rows)), "failed": int(len(culprits)),
        "statuses": {str(k): v for k, v in statuses.most_common()},
        "content_types": dict(types.most_common()),
        "http_status": top_status, "content_type": content_type, "body_sample": body,
        "reason": reason, "hint": hint,
    }


def _body_sample(row: pd.Series, secrets: tuple[str, ...]) -> str:
    """The record's redacted body sample; older records only have the error message (redacted here)."""
    detail = str(row.get("error_detail") or "")
    return redact(detail, secrets) if detail else sample(str(row.get("error_message") or ""), secrets)


# --- 3. the measurement floor ----------------------------------------------------------------------
def _phase_of(times: np.ndarray, phases: pd.DataFrame) -> np.ndarray:
    """Index (0..n-1) of the phase each wall time falls in, -1 when in none (phases sorted by start)."""
    starts = pd.to_numeric(phases["start_wall"], errors="coerce").to_numpy(dtype=float)
    ends = pd.to_numeric(phases["end_wall"], errors="coerce").to_numpy(dtype=float)
    ends = np.where(np.isnan(ends), np.inf, ends)
    pos = np.searchsorted(starts, times, side="right") - 1
    inside = (pos >= 0) & (times < ends[np.clip(pos, 0, None)])
    return np.where(inside, pos, -1)


def _q(values: pd.Series | np.ndarray, q: float) -> float | None:
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    return float(np.percentile(values, q)) if values.size else None


def client_overhead(requests: pd.DataFrame, truth: pd.DataFrame) -> pd.DataFrame:
    """Per ok request: start_wall, ttft_overhead_ms, e2e_overhead_ms = client's time - the server's own."""
    ok = requests[requests["status"].astype(str) == "ok"][["request_id", "start_wall", "ttft_ms", "e2e_ms"]]
    served = truth[truth["first_token"].notna() & truth["arrival"].notna()]
    merged = ok.astype({"request_id": str}).merge(served, on="request_id", how="inner")
    return pd.DataFrame({
        "start_wall": merged["start_wall"].astype(float),
        "ttft_overhead_ms": pd.to_numeric(merged["ttft_ms"], errors="coerce") - (merged["first_token"] - merged["arrival"]) * 1000,
        "e2e_overhead_ms": pd.to_numeric(merged["e2e_ms"], errors="coerce") - (merged["last_token"] - merged["arrival"]) * 1000,
    })


def _floor_rows_truth(requests: pd.DataFrame, truth: pd.DataFrame, phases: pd.DataFrame, scale: float) -> list[dict]:
    over = client_overhead(requests, truth)
    where = _phase_of(over["start_wall"].to_numpy(dtype=float), phases) if len(over) else np.array([], dtype=int)
    rows = []
    for i, phase in enumerate(phases.itertuples(index=False)):
        mine = over[where == i]
        if mine.empty:
            continue
        # streaming runs: the TTFT overhead; non-streaming ones have only E2E
        column = "ttft_overhead_ms" if mine["ttft_overhead_ms"].notna().any() else "e2e_overhead_ms"
        p50, p95 = _q(mine[column], 50), _q(mine[column], FLOOR_QUANTILE)
        rows.append({"phase": str(phase.label), "samples": int(mine[column].notna().sum()), "measure": column[:-12],
                     "p50_ms": p50, "p95_ms": p95, "e2e_p95_ms": _q(mine["e2e_overhead_ms"], FLOOR_QUANTILE),
                     "floor_ms": p95, "floor_model_ms": None if p95 is None else p95 * scale})
    return rows


def _floor_rows_loop_lag(generator: pd.DataFrame | None, phases: pd.DataFrame, scale: float) -> list[dict]:
    if generator is None or len(generator) == 0:
        return []
    ts = pd.to_numeric(generator["ts"], errors="coerce").to_numpy(dtype=float)
    lag = pd.to_numeric(generator["loop_lag_ms"], errors="coerce").to_numpy(dtype=float)
    where = _phase_of(ts, phases)
    rows = []
    for i, phase in enumerate(phases.itertuples(index=False)):
        mine = lag[where == i]
        p95 = _q(mine, FLOOR_QUANTILE)
        if p95 is None:
            continue
        rows.append({"phase": str(phase.label), "samples": int(np.sum(~np.isnan(mine))), "measure": "loop lag",
                     "p50_ms": _q(mine, 50), "p95_ms": p95, "floor_ms": p95, "floor_model_ms": p95 * scale})
    return rows


def measurement_floor(requests: pd.DataFrame, phases: pd.DataFrame, scale: float, truth: pd.DataFrame | None,
                      generator: pd.DataFrame | None) -> dict:
    """The floor per phase (wall and model ms) and how it was measured."""
    rows, method = [], None
    if truth is not None and len(truth) and len(requests):
        rows, method = _floor_rows_truth(requests, truth, phases, scale), "truth"
        why = ("records minus the embedded simulator's truth log (its own arrival and first/last-token "
               "times on the same clock): what sockets, event loop and stamping add, per request")
    if not rows:
        rows, method = _floor_rows_loop_lag(generator, phases, scale), "loop-lag"
        why = ("no truth log (a real target): the event-loop lag the generator sampled during each phase, "
               "i.e. how late a token arrival can be stamped; the fastest TTFB, beside it, is the path's "
               "fixed cost (network, front end), part of what users get rather than a measurement error")
    if method == "loop-lag" and rows and _mostly_kernel_clock(requests):
        why += ("; most arrivals here were stamped by the kernel (clock=kernel), which a late loop does not delay, "
                "so this is an upper bound")
    if not rows:
        return {"method": None, "why": "neither a truth log nor generator samples: the floor is unknown",
                "phases": [], "floor_ms": None, "floor_model_ms": None, "time_scale": scale}
    worst = max(rows, key=lambda r: r["floor_ms"])
    ttfb = pd.to_numeric(requests.get("ttfb_ms", pd.Series(dtype=float)), errors="coerce")
    ttfb = ttfb[requests["status"].astype(str) == "ok"] if len(requests) else ttfb
    fastest = float(ttfb.min()) if ttfb.notna().any() else None
    floors = [r["floor_ms"] for r in rows]
    return {
        "method": method, "why": why, "phases": rows, "time_scale": scale,
        "floor_ms": worst["floor_ms"], "floor_model_ms": worst["floor_ms"] * scale, "worst_phase": worst["phase"],
        # the rules compare phases with a baseline: a floor that moves between phases moves their ratios
        "floor_spread_model_ms": (max(floors) - min(floors)) * scale,
        "ttfb_min_model_ms": None if fastest is None else fastest * scale,
    }


def _mostly_kernel_clock(requests: pd.DataFrame) -> bool:
    clock = requests.get("clock") if len(requests) else None
    return clock is not None and float((clock.astype(str) == "kernel").mean()) > 0.5


def floor_materiality(floor: dict, criteria: list[dict], noise_floor_ms: float = Thresholds.noise_floor_ms) -> dict:
    """Where the floor (model ms) takes >= 1/ACCURACY_RATIO of an SLO margin or of the rules' noise floor.

    Latency criteria in ms on TTFT or E2E only: the floor is measured on those. A failed criterion
    whose excess is within the floor `may_flip`: the failure may be the client's own."""
    by_phase = {r["phase"]: r["floor_model_ms"] for r in floor.get("phases") or [] if r.get("floor_model_ms") is not None}
    overall = floor.get("floor_model_ms")
    checks, reasons = [], []
    for c in criteria:
        name = str(c.get("name", ""))
        if c.get("unit") != "ms" or c.get("measured") is None or not name.upper().startswith(("TTFT", "E2E")):
            continue
        at = by_phase.get(str(c.get("where") or ""), overall)
        if at is None:
            continue
        margin = abs(float(c["measured"]) - float(c["limit"]))
        share = at / margin if margin > 0 else float("inf")
        flip = c.get("passed") is False and float(c["measured"]) - at < float(c["limit"])
        checks.append({"criterion": name, "limit_ms": c["limit"], "measured_ms": c["measured"], "margin_ms": margin,
                       "floor_model_ms": at, "share_of_margin": share, "may_flip": flip})
        if flip:
            reasons.append(f"{name} failed by {margin:,.0f} ms, within the client's own floor of {at:,.0f} ms "
                           f"(model time) in {c.get('where') or 'the run'}: the failure may be the client's")
        elif share >= 1 / ACCURACY_RATIO:
            reasons.append(f"the client's floor of {at:,.0f} ms (model time) is {share:.0%} of {name}'s margin "
                           f"({c['measured']:,.0f} vs {c['limit']:,.0f} ms)")
    spread = floor.get("floor_spread_model_ms")
    rules_share = (spread / noise_floor_ms) if spread is not None and noise_floor_ms > 0 else None
    if rules_share is not None and rules_share >= 1 / ACCURACY_RATIO:
        reasons.append(f"the client's floor moved by {spread:,.0f} ms (model time) between phases, "
                       f"{rules_share:.0%} of the {noise_floor_ms:g} ms the verdict rules take as noise")
    return {"material": bool(reasons), "reasons": reasons, "criteria": checks, "rules_noise_floor_ms": noise_floor_ms,
            "share_of_rules_noise_floor": rules_share}


# --- 4. did the run end on its own? -------------------------------------------------------------------
FINISHED = "finished"  # loadline/runtime/collector.py writes it when Locust's test ended normally
COMPLETION = "run completed"  # the gate criterion an interrupted run fails


def completion(manifest: dict | None) -> dict | None:
    """None when the run ended on its own; else {status, by, reason}: a run stopped by a signal
    (`loadline run` writes status=interrupted, interrupted_by=SIGTERM/SIGINT) or whose master died
    (status still `running`). Its records stop early and the late phases are partial, so no SLO pass
    can rest on it. A folder without a manifest status (plain `locust --csv` exports) is not judged here."""
    status = (manifest or {}).get("status")
    if status is None or status == FINISHED:
        return None
    by = str((manifest or {}).get("interrupted_by") or "")
    if status == "interrupted":
        reason = f"the run was interrupted by {by or 'a signal'} before it ended: its last phase is partial"
    elif status == "running":
        reason = "the run never recorded its end (the manifest still says running): the master died or was killed"
    else:
        reason = f"the run ended with status {status!r}, not {FINISHED!r}"
    return {"status": str(status), "by": by, "reason": reason}


def completion_criterion(manifest: dict | None) -> Criterion | None:
    """The gate's failed "run completed" criterion for an incomplete run (exit 1, never PASS), or None."""
    ended = completion(manifest)
    if ended is None:
        return None
    return Criterion(COMPLETION, f"status = {FINISHED}", 1.0, None, False, where=ended["status"], unit="run",
                     why=ended["reason"])


# --- all together ------------------------------------------------------------------------------------
def assess(requests: pd.DataFrame, phases: pd.DataFrame, generator: pd.DataFrame | None, criteria: list[dict],
           scale: float, truth: pd.DataFrame | None = None, secrets: tuple[str, ...] = ()) -> dict:
    """verdict.json["validity"]: usable / trustworthy, the findings, and the parts the verdict reads.

    usable=False (a setup failure) -> `reason` is the one line the commands print with exit 2.
    trustworthy=False -> a saturated generator or a material floor: the numbers stand, the verdict's
    confidence goes down (`confidence_steps`, read by analysis/verdict/bottleneck.py).
    """
    findings: list[dict] = []
    setup = setup_failure(requests, secrets) if len(requests) else None
    if setup:
        findings.append({"kind": "setup-failure", "severity": "unusable", "message": setup["reason"]})
    saturated, gen_evidence = is_saturated(generator)
    if saturated:
        findings.append({"kind": "generator-saturated", "severity": "untrustworthy",
                         "message": "the load generator was saturated: " + "; ".join(gen_evidence)})
    behind = behind_phases(requests, phases)
    if behind:
        findings.append({"kind": "generator-behind", "severity": "untrustworthy",
                         "message": "the load generator was behind (read its sockets later than one token gap): "
                                    + "; ".join(behind_evidence(behind, scale))})
    lag_error = _lag_error_model_ms(behind, generator if saturated else None, scale)
    doubts = gate_doubts(criteria, lag_error)
    floor = measurement_floor(requests, phases, scale, truth, generator)
    floor.update(floor_materiality(floor, criteria))
    for reason in floor["reasons"]:
        findings.append({"kind": "measurement-floor", "severity": "untrustworthy", "message": reason})
    steps = int(saturated or bool(behind)) + int(floor["material"])
    return {
        "usable": setup is None,
        "trustworthy": setup is None and steps == 0,
        "reason": setup["reason"] if setup else None,
        "findings": findings,
        "setup_failure": setup,
        "generator": {"saturated": saturated, "evidence": gen_evidence, "behind": behind,
                      "lag_error_model_ms": lag_error, "gate_doubts": doubts},
        "floor": floor,
        "confidence_steps": steps,  # how many steps (high -> medium -> low) the verdict's confidence drops
    }


LATENCY_CRITERIA = ("TTFT", "ITL", "TPOT", "E2E")  # what late stamps move


def _lag_error_model_ms(behind: list[dict], generator: pd.DataFrame | None, scale: float) -> float | None:
    """How late a stamp may be while the generator lagged, model ms: the worst phase's read delay p99
    (kernel clock) or, when the self-check saw saturation, the sampled loop lag's P95 (how late a
    greenlet resumed); the larger. None when neither applies."""
    values = [b["read_delay_p99_ms"] for b in behind]
    if generator is not None and len(generator):
        values.append(_q(pd.to_numeric(generator["loop_lag_ms"], errors="coerce"), FLOOR_QUANTILE))
    values = [v for v in values if v is not None]
    return max(values) * scale if values else None


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
            out.append({"criterion": name, "passed": c.get("passed"), "margin_ms": margin,
                        "message": f"{name} {verdict} by {margin:,.0f} ms, within the {lag_error_model_ms:,.0f} ms "
                                   "the lagging generator may add (model time)"})
    return out


def generator_gate_note(validity: dict, passed: bool, criteria: list[dict] = (),
                        unjudged: list[str] = ()) -> tuple[str | None, bool]:
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
    fails_anyway = bool(unjudged) or any(c.get("passed") is False and str(c.get("name")) not in doubtful
                                         for c in criteria)
    if doubts and not fails_anyway:
        within = "; ".join(d["message"] for d in doubts)
        return (f"{outcome}, but the load generator was behind: numbers not trustworthy ({within}); "
                "rerun with more generator CPU (--workers N)"), True
    error = generator.get("lag_error_model_ms")
    size = f" (up to {error:,.0f} ms, model time)" if error else ""
    why = ("a criterion failed beyond the lag's reach (or had no data), so the run fails anyway" if doubts else
           "every criterion is further than that from its limit, so the verdict stands")
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
    out["evidence"] = list(out.get("evidence") or []) + [
        (f"confidence lowered from {before} to {out['confidence']}: {doubt}" if out["confidence"] != before
         else f"confidence stays {before}: {doubt}") for doubt in doubts[:1]] + [
        f"also: {doubt}" for doubt in doubts[1:]]
    return out
