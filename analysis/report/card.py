"""The capacity card: the run's answer (loadline/core/answer.py) as the rows both renderers show first.

Plain text rows (label, value); markdown.py and html.py lay them out. Nothing here computes a
figure: every value is read off the answer, so summary.md, report.html and the log line agree.
"""

from __future__ import annotations

from typing import Any

from loadline.analysis.report import sections
from loadline.core.answer import Answer, Status, Trust, set_aside_text


def answer_of(verdict: dict[str, Any]) -> Answer:
    return Answer.from_dict(verdict["answer"])


def _status(answer: Answer, verdict: dict[str, Any]) -> str:
    return f"{sections.headline(verdict)} (exit {answer.exit_code}): {answer.reason}"


def _trust(answer: Answer) -> str:
    meaning = {
        Trust.TRUSTED: "nothing found against the numbers",
        Trust.DOUBTFUL: "the status stands, but",
        Trust.UNTRUSTED: "the status lies within the measurement's own error:",
        Trust.NOT_ASSESSED: "the measurement could not be checked",
    }[answer.trust]
    reasons = "; ".join(answer.trust_reasons)
    return f"{answer.trust.value} ({meaning}{' ' + reasons if reasons else ''})"


def _slo(answer: Answer) -> str:
    origin = {"run": "the run's own", "given": "given to this report", "defaults": "built-in defaults"}[
        answer.slo.origin
    ]
    return f"{answer.slo.name} ({origin})" + (f": {answer.slo.note}" if answer.slo.note else "")


def rows(verdict: dict[str, Any]) -> list[tuple[str, str]]:
    answer = answer_of(verdict)
    out = [("Status", _status(answer, verdict)), ("Trust", _trust(answer)), ("SLO", _slo(answer))]
    if answer.status is Status.UNUSABLE:  # no capacity statement; what to do follows the card
        return out
    if answer.sweep is not None:
        out.append(("Rate sweep's answer", answer.sweep.text()))
    out += [
        ("Max SLO-compliant load", answer.max_compliant.text()),
        (
            "Safe operating point",
            answer.safe.text() + (f" ({answer.safe.reason})" if answer.safe.found and answer.safe.reason else ""),
        ),
        ("Break point", answer.break_point.text()),
        ("Knee", answer.knee.text()),
    ]
    if answer.set_aside:
        out.append(("Phases set aside", set_aside_text(answer.set_aside)))
    if answer.per_replica_rps is not None:
        out.append(("Per replica", f"{answer.per_replica_rps:.3g} req/s ({answer.per_replica_basis})"))
    if answer.replicas is not None:
        out.append(("Replicas", answer.replicas.text()))
    out.append(("Limiting layer", sections.bottleneck_line(verdict)))
    if answer.time_split.sentence:
        out.append(
            (
                "Where the time goes",
                answer.time_split.sentence + (f" ({answer.time_split.caveat})" if answer.time_split.caveat else ""),
            )
        )
    return out


def evidence(verdict: dict[str, Any]) -> list[str]:
    """The limiting layer's three strongest measured signals against their thresholds."""
    return [e.text() for e in answer_of(verdict).layer.evidence]


def next_steps(verdict: dict[str, Any]) -> list[str]:
    return list(answer_of(verdict).next_steps)
