"""Read the run's answer back off every surface it is rendered on, for the consistency tests.

Each reader returns the figures a user acts on as that surface states them; a test asserts they are
the same everywhere (loadline/core/answer.py: computed once, rendered many times).
"""

from __future__ import annotations

import html
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema

from loadline.core.answer import Answer, set_aside_text, verdict_schema

CARD_ROWS = (
    "Status",
    "Trust",
    "SLO",
    "Max SLO-compliant load",
    "Safe operating point",
    "Per replica",
    "Replicas",
    "Rate sweep's answer",
    "Phases set aside",
)


def from_verdict(run_dir: Path) -> Answer:
    data = json.loads((run_dir / "report" / "verdict.json").read_text())
    jsonschema.validate(data, verdict_schema())  # the whole verdict.json, its answer included
    return Answer.from_dict(data["answer"])


def card_of_markdown(run_dir: Path) -> dict[str, str]:
    text = (run_dir / "report" / "summary.md").read_text()
    block = text.split("### The answer", 1)[1].split("\n\n", 2)[1]
    rows = [line.strip("|").split(" | ", 1) for line in block.splitlines()[2:]]
    return {k.strip(): v.strip() for k, v in rows if k.strip() in CARD_ROWS}


def card_of_html(run_dir: Path) -> dict[str, str]:
    page = (run_dir / "report" / "report.html").read_text()
    table = re.search(r'<table class="card">(.*?)</table>', page, re.S).group(1)
    cells = re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td></tr>", table, re.S)
    return {html.unescape(k): html.unescape(v) for k, v in cells if html.unescape(k) in CARD_ROWS}


def junit_of(run_dir: Path) -> tuple[str, int]:
    """(the answer testcase's name, failures)."""
    root = ET.fromstring((run_dir / "report" / "junit.xml").read_text())
    first = next(root.iter("testcase")).get("name")
    return first, int(root.get("failures"))


def expected_card(answer: Answer) -> dict[str, str]:
    """What every card must say, straight from the answer."""
    out = {"Trust": answer.trust.value}
    if answer.status.value != "unusable":
        out["Max SLO-compliant load"] = answer.max_compliant.text()
    if answer.replicas is not None:
        out["Replicas"] = answer.replicas.text()
    if answer.sweep is not None:
        out["Rate sweep's answer"] = answer.sweep.text()
    if answer.set_aside:
        out["Phases set aside"] = set_aside_text(answer.set_aside)
    return out


def assert_surfaces_agree(run_dir: Path, exit_code: int, log: str | None = None, plan: dict | None = None) -> Answer:
    """verdict.json, summary.md, report.html, junit.xml, the exit code, the run's log line and
    `loadline plan --run --json` all state one answer."""
    answer = from_verdict(run_dir)
    assert answer.exit_code == exit_code
    expected = expected_card(answer)
    for name, card in (("summary.md", card_of_markdown(run_dir)), ("report.html", card_of_html(run_dir))):
        assert card["Status"].split(" (exit ")[0].startswith(answer.headline.split(",")[0]), (name, card["Status"])
        assert f"(exit {exit_code})" in card["Status"], (name, card["Status"])
        assert card["Trust"].startswith(expected["Trust"]), (name, card["Trust"])
        if answer.exit_code != 2 or answer.trust.value != "not assessed":  # an unusable run states no capacity
            assert card["Safe operating point"].startswith(answer.safe.text()), (name, card)
        assert ("Phases set aside" in card) is bool(answer.set_aside), (name, card)
        for key in ("Max SLO-compliant load", "Replicas", "Rate sweep's answer", "Phases set aside"):
            if key in expected:
                assert card.get(key) == expected[key], (name, key, card.get(key), expected[key])
    md_head = (run_dir / "report" / "summary.md").read_text().splitlines()[0]
    assert md_head.startswith(f"## Loadline report: {answer.headline.split(',')[0]}"), md_head
    name, failures = junit_of(run_dir)
    assert name == f"run answer: {answer.status.value}, trust {answer.trust.value}"
    assert (failures > 0) is (exit_code != 0)
    if log is not None:
        assert f"loadline: {answer.log_line()}" in log
    if plan is not None and answer.per_replica_rps:
        assert plan["per_replica_qps"] == round(answer.per_replica_rps, 3)
    if (run_dir / "manifest.json").exists():
        assert_stop_reason_agrees(run_dir)
    return answer


QUOTED = re.compile(r"\b(TTFT|TTFO|ITL|TPOT|E2E) (P\d\d) ([\d,.]+) ms >")


def assert_stop_reason_agrees(run_dir: Path, tolerance: float = 0.02) -> int:
    """The live stop rule's numbers (manifest `stop_reason`) are the report's for the step that broke: both
    judge the same window (docs/shapes.md, "The stepped stop rule"); replies still running when the step
    ended are in the report's only, hence the tolerance. Returns how many numbers were compared."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    reason = manifest.get("stop_reason") or ""
    label, _, text = reason.partition(": ")
    quoted = QUOTED.findall(text)
    if not quoted:
        return 0
    phases = json.loads((run_dir / "report" / "verdict.json").read_text())["phases"]
    row = next(p for p in phases if p["label"] == label)
    for metric, percentile, value in quoted:
        live = float(value.replace(",", ""))
        report = row[f"{metric.lower()}_{percentile.lower()}_ms"]
        assert abs(report - live) <= tolerance * live + 1.0, (label, metric, percentile, live, report)
    return len(quoted)
