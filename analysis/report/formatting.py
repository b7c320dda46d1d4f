"""Number formatting shared by the Markdown and HTML renderers (one place, one style)."""

from __future__ import annotations

import math
from typing import Any

DEFINITIONS = {
    "TTFT": "request sent -> first chunk carrying a token of any kind (reasoning, content or a tool call)",
    "TTFO": "request sent -> first answer token (content or a tool call, after any reasoning); TTFT without reasoning",
    "ITL": "gaps between consecutive token chunks (reasoning and answer); percentiles pool every gap of every ok request in the phase",
    "TPOT": "the answer's (E2E - TTFO) / (answer tokens - 1), per request; answer tokens = output - reasoning tokens",
    "E2E": "request sent -> last byte of the response",
    "requests/s": "ok requests per second of phase duration (cancelled attempts count as neither ok nor error)",
    "error rate": "errors / (ok + errors), per HTTP attempt (a retry is an attempt of its own)",
    "goodput": "ok requests per second whose E2E, TTFT and TPOT each met the SLO's tightest threshold for that metric",
    "percentiles": "from raw per-request samples of ok requests, linear interpolation (numpy default); "
    "a record belongs to the phase in which it started; a step the stop rule judged is judged on the "
    "requests that started before its last `loadline run -- --step-settle` seconds, as the rule judged it live (those later "
    "ran into the next step's load)",
    "gate": "each latency/error criterion must hold in every phase; the measured value is the worst phase's",
}


def missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def num(value: Any, digits: int | None = None) -> str:
    """Thousands separators; decimals shrink as values grow (2 below 10, 1 below 100, else none)."""
    if missing(value):
        return "-"
    value = float(value)
    if digits is None:
        digits = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2
    text = f"{value:,.0f}" if value == int(value) else f"{value:,.{digits}f}"
    # a tiny negative (a client stamp a few us before the truth's) rounds to zero: no sign on a zero
    return text[1:] if text.startswith("-") and not text.strip("-0.,") else text


def ms(value: Any) -> str:
    return "-" if missing(value) else f"{num(value)} ms"


def pct(value: Any) -> str:
    return "-" if missing(value) else f"{float(value):.2%}"


def duration(seconds: float) -> str:
    if missing(seconds) or seconds <= 0:
        return "short"
    if seconds < 120:
        return f"{seconds:.0f}-second"
    if seconds < 7200:
        return f"{seconds / 60:.1f}-minute".replace(".0-", "-")
    return f"{seconds / 3600:.1f}-hour".replace(".0-", "-")


def span(values: Any, unit: str) -> str:
    if not values:
        return "-"
    low, high = values
    return f"{num(low)}-{num(high)} {unit}"


def safe_point(safe: dict) -> str:
    """The safe operating point's line: its request rate, and about how many users (whole ones: the
    rate's users are interpolated between steps, and "8.10 users" reads as a precision it has not)."""
    if safe.get("none"):  # no load is safe (knee.broke_with_time): the reason says why
        return f"Safe operating point: {safe['reason']}"
    users = safe.get("users")
    about = ""
    if users:
        low, high = (max(1, round(u)) for u in users)
        about = f", about {low}" if low == high else f", about {low}-{high}"
        about += " user" if high == 1 else " users"
    return f"Safe operating point: {span(safe['rps'], 'req/s')}{about} ({safe['reason']})"


def point(p: dict, what: str) -> str:
    """One line about a knee / break point / max-throughput dict."""
    if not p or not p.get("found"):
        return f"{what}: not found ({(p or {}).get('reason', 'no data')})"
    level = (
        f"{num(p['target_rate'])} req/s offered" if p.get("target_rate") is not None else f"{num(p.get('users'))} users"
    )
    text = f"{what}: {level}, {num(p.get('rps'))} req/s, E2E P95 {ms(p.get('e2e_p95_ms'))} ({p.get('label')})"
    reasons = p.get("reasons") or []
    return text + (f" - {'; '.join(reasons)}" if reasons else "")


PHASE_COLUMNS = [  # (title, key, formatter) of the compact phase table both renderers show
    ("phase", "label", str),
    ("users", "users", num),
    ("requests", "requests", num),
    ("req/s", "rps", num),
    ("goodput/s", "goodput_rps", num),
    ("tok/s", "output_tokens_per_s", num),
    ("errors", "errors", num),
    ("err rate", "error_rate", pct),
    ("E2E P50", "e2e_p50_ms", num),
    ("E2E P95", "e2e_p95_ms", num),
    ("E2E P99", "e2e_p99_ms", num),
    ("TTFT P95", "ttft_p95_ms", num),
    ("TPOT P95", "tpot_p95_ms", num),
    ("ITL P99", "itl_p99_ms", num),
]
# shown only when the run's phase table has them (analysis/stats/token_kinds.py says when)
TOKEN_KIND_COLUMNS = [
    ("TTFO P95", "ttfo_p95_ms", num),
    ("reasoning", "reasoning_share", pct),
    ("cache hits", "prompt_cache_hit_share", pct),
]


def _text_or_dash(value: object) -> str:
    return str(value) if value else "-"


# shown only when a phase ran short of its workers' users (analysis/stats/short_phases.py)
SHORT_COLUMN = ("workers", "workers_short", _text_or_dash)


def phase_columns(phases: list[dict]) -> list:
    """PHASE_COLUMNS, plus the reasoning / tool-call / prompt-cache columns the phases carry, and which
    workers a phase ran short of."""
    present = {key for phase in phases for key in phase}
    extra = [column for column in TOKEN_KIND_COLUMNS if column[1] in present]
    return PHASE_COLUMNS + extra + ([SHORT_COLUMN] if SHORT_COLUMN[1] in present else [])


def measured(criterion: dict) -> str:
    """A criterion's measured value in its own unit (rates as percentages)."""
    value = criterion.get("measured")
    if value is None:
        return "-"
    return pct(value) if criterion.get("unit") == "fraction" else num(value)
