"""Is this run valid? Asked before any capacity statement. Pure functions: run data in, findings out.

Three questions:
1. Setup failure: did most attempts fail the way a misconfigured test fails (the target rejected the
   request: 400/401/403/404/405/501; or it answered 2xx with something that is not the API's reply,
   e.g. an HTML login page)? Then nothing about capacity can be said: the run is *unusable* and the
   commands exit 2. The report shows status, content type and a short redacted body sample.
   Likewise when more than INVALID_SHARE of the attempts were refused as invalid requests (a prompt
   over the context, a bad parameter): the tool's requests, not the service's capacity.
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

from collections import Counter
from collections.abc import Sequence

import pandas as pd

from loadline.analysis.verdict import ending as ending_of
from loadline.analysis.verdict.floor import FLOOR_QUANTILE, floor_materiality, measurement_floor
from loadline.analysis.verdict.floor import q as _q
from loadline.analysis.verdict.gate import Criterion
from loadline.analysis.verdict.generator import behind_phases, behind_summary, is_saturated, watch_rests
from loadline.core.records import ErrorClass, Status
from loadline.core.redact import redact, sample
from loadline.core.runsettings import model_value

# The statuses a misconfigured test gets, not an overloaded service (RFC 9110): 400 bad request
# (wrong model name, malformed body), 401/403 auth, 404 wrong path, 405 wrong method, 501 endpoint
# not implemented. 429/503/5xx are the service's answers under load and stay capacity signals.
SETUP_STATUSES = (400, 401, 403, 404, 405, 501)
SETUP_SHARE = 0.5  # "most requests": more than half of the attempts with an outcome
API_MEDIA_TYPES = ("text/event-stream", "application/json")  # what an OpenAI-compatible server answers

_HINTS = {
    400: "the server refused the request body: check the model (`loadline run -- --model NAME`) and the request options (max tokens, stream)",
    401: "authentication failed: check the API key (LOADLINE_API_KEY or OPENAI_API_KEY in the environment, "
    "`loadline run -- --api-key KEY`, or the web UI's API key field) or the gateway's credentials",
    403: "the credentials lack access to this model or endpoint",
    404: "wrong path or model: --host must be the base URL (without /v1), and the model must exist",
    405: "the target does not accept POST on this path: is --host the inference API?",
    501: "the target does not implement this endpoint (chat vs completions?)",
}


# --- 1. setup failures --------------------------------------------------------------------------
def _media_type(value: object) -> str:
    return str(value or "").split(";")[0].strip().lower()


_JUDGED_COLUMNS = ("status", "error_class", "http_status", "content_type", "error_detail", "error_message")


def _judged(requests: pd.DataFrame) -> pd.DataFrame:
    """The ok and failed attempts, with the columns the setup checks read (not a whole-width copy)."""
    if not len(requests):
        return requests
    columns = [c for c in _JUDGED_COLUMNS if c in requests.columns]
    return requests.loc[requests["status"].isin((Status.OK, Status.ERROR)).to_numpy(), columns]


def setup_failure(requests: pd.DataFrame, secrets: tuple[str, ...] = ()) -> dict | None:
    """The setup failure that most attempts share, or None.

    Rejected: HTTP status in SETUP_STATUSES. Not the API's reply: a failed 2xx attempt classed
    `not_event_stream`, or whose Content-Type is neither an event stream nor JSON.
    """
    rows = _judged(requests)
    if rows.empty:
        return None
    status = pd.to_numeric(rows["http_status"], errors="coerce").fillna(0).astype(int)
    error = rows["status"] == Status.ERROR
    media = rows.get("content_type", pd.Series("", index=rows.index)).map(_media_type)
    # the tool's own invalid requests have a finding of their own (invalid_requests), with the server's words
    rejected = error & status.isin(SETUP_STATUSES) & (rows["error_class"] != INVALID_REQUEST)
    foreign = (
        error
        & status.between(200, 299)
        & ((rows["error_class"] == ErrorClass.NOT_EVENT_STREAM) | ((media != "") & ~media.isin(API_MEDIA_TYPES)))
    )
    bad = rejected | foreign
    share = float(bad.sum()) / len(rows)
    if share <= SETUP_SHARE:
        return None
    culprits = rows[bad]
    statuses = Counter(int(s) for s in status[bad])
    types = Counter((t or "(none)") for t in media[bad])
    top_status = statuses.most_common(1)[0][0]
    kind = "rejected" if rejected.sum() >= foreign.sum() else ErrorClass.NOT_EVENT_STREAM
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
        "kind": kind,
        "share": share,
        "attempts": int(len(rows)),
        "failed": int(len(culprits)),
        "statuses": {str(k): v for k, v in statuses.most_common()},
        "content_types": dict(types.most_common()),
        "http_status": top_status,
        "content_type": content_type,
        "body_sample": body,
        "reason": reason,
        "hint": hint,
    }


def _body_sample(row: pd.Series, secrets: tuple[str, ...]) -> str:
    """The record's redacted body sample; older records only have the error message (redacted here)."""
    detail = str(row.get("error_detail") or "")
    return redact(detail, secrets) if detail else sample(str(row.get("error_message") or ""), secrets)


# --- 1b. the tool's own invalid requests -------------------------------------------------------------
INVALID_REQUEST = "invalid_request"  # records.ErrorClass.INVALID_REQUEST (the value, read back from CSV)
# Above this share the run says nothing about the service. P99 criteria judge the worst 1 % of
# requests; the server refuses the longest prompts (context overflows) first, i.e. exactly the heavy
# requests that make that tail, so with more than 1 % refused the P99 can have been drawn from a
# workload without its tail, and the load the service carried was lighter than the one planned.
INVALID_SHARE = 0.01
# how the engines word a request over the context (REFERENCE-workloads.md section 2)
_CONTEXT_WORDS = ("context", "too long", "longer than", "must have less than", "input tokens", "max_new_tokens")


def invalid_requests(requests: pd.DataFrame, secrets: tuple[str, ...] = ()) -> dict | None:
    """The attempts the server refused as invalid (ErrorClass.INVALID_REQUEST), or None.

    They are excluded from the capacity judgement (analysis/stats/phases.py); here they are counted,
    with the server's own words (redacted, short) and what to change."""
    rows = _judged(requests)
    if rows.empty or "error_class" not in rows:
        return None
    refused = rows[rows["error_class"] == INVALID_REQUEST]
    if refused.empty:
        return None
    share = len(refused) / len(rows)
    words = Counter(sample(str(m), secrets)[:160] for m in refused.get("error_message", pd.Series(dtype=str)))
    said = [w for w, _ in words.most_common(3)]
    if any(w in " ".join(said).lower() for w in _CONTEXT_WORDS):
        hint = (
            "the prompts (with history and max_tokens) did not fit the server's context in its own tokens: "
            "let Loadline discover the context (`loadline run -- --max-context-tokens -1`) and count tokens "
            "exactly (`loadline run -- --tokenizer PATH`, or the server's /tokenize), or lower the lengths "
            "(`loadline run -- --prompt-tokens N`, `-- --prompt-mix`, `-- --max-tokens N`)"
        )
    else:
        hint = (
            "the server refused a request option: check what `loadline run -- --model NAME --max-tokens N "
            "--output-tokens N --ignore-eos` sent"
        )
    unusable = share > INVALID_SHARE
    message = (
        f"{len(refused)} of {len(rows)} requests ({share:.1%}) were refused by the server as invalid, "
        f"the load tool's own requests, not the service's failures: {'; '.join(repr(w) for w in said)}; {hint}"
    )
    if unusable:
        message += (
            f"; above {INVALID_SHARE:.0%} the run is unusable: the refused requests are the heaviest ones, "
            "so the P99 tail and the load carried are not the planned workload's"
        )
    return {
        "count": int(len(refused)),
        "attempts": int(len(rows)),
        "share": share,
        "messages": said,
        "hint": hint,
        "unusable": unusable,
        "message": message,
    }


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
