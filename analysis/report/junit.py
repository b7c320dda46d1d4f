"""junit.xml: the run's answer as a CI test suite, failing exactly when the exit code says so.

The first testcase is the answer itself (status and trust: loadline/core/answer.py); one testcase
per SLO criterion follows. A criterion that failed in a run whose answer does not rest on it (a
rate sweep's designed flood: a sweep is judged on its answer) is skipped with that reason, so a CI
system counts a failure if and only if the run's exit code is not 0.
"""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape, quoteattr

from loadline.core.answer import Answer

SUITE = "loadline"


def _case(name: str, outcome: str | None = None, message: str = "") -> list[str]:
    lines = [f"  <testcase classname={quoteattr(SUITE)} name={quoteattr(name)}>"]
    if outcome == "failure":
        lines.append(f"    <failure message={quoteattr(message)}>{escape(message)}</failure>")
    elif outcome == "skipped":
        lines.append(f"    <skipped message={quoteattr(message)}/>")
    return lines + ["  </testcase>"]


def junit_xml(verdict: dict[str, Any]) -> str:
    answer = Answer.from_dict(verdict["answer"])
    cases: list[list[str]] = []
    failed = answer.exit_code != 0
    head = f"{answer.headline}: {answer.reason}"
    if answer.trust_reasons:
        head += f" (trust: {answer.trust.value}: {'; '.join(answer.trust_reasons)})"
    cases.append(
        _case(f"run answer: {answer.status.value}, trust {answer.trust.value}", "failure" if failed else None, head)
    )
    for c in (verdict.get("slo") or {}).get("criteria") or []:
        name = f"{c['name']} {c['threshold']}"
        measured = "not measured" if c.get("measured") is None else f"{c['measured']:,.3f}"
        if c.get("passed") is False:
            message = f"measured {measured} (threshold {c['threshold']}) in {c.get('where') or 'run'}"
            cases.append(
                _case(name, "failure", message)
                if failed
                else _case(name, "skipped", f"not gating ({answer.reason}): {message}")
            )
        elif c.get("passed") is None:
            cases.append(_case(name, "skipped", "not judged: no data in this run"))
        else:
            cases.append(_case(name))
    failures = sum(any("<failure" in line for line in case) for case in cases)
    skipped = sum(any("<skipped" in line for line in case) for case in cases)
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<testsuite name={quoteattr(SUITE)} tests="{len(cases)}" failures="{failures}" skipped="{skipped}" errors="0">',
    ]
    for case in cases:
        lines += case
    lines.append("</testsuite>")
    return "\n".join(lines) + "\n"
