"""The report reads requests.csv without the columns no analysis reads (analysis/data/requests_csv.py
UNREAD). A column an analysis does read must not be on that list: the analysis would see it missing and
carry on with a default (the twin read every reply as cut at max_tokens when finish_reason was left out)."""

from __future__ import annotations

import re
from pathlib import Path

from loadline.analysis.data.requests_csv import UNREAD

ANALYSIS = Path(__file__).resolve().parents[2] / "analysis"


def test_no_analysis_module_names_a_column_the_reader_leaves_out():
    named = []
    for path in ANALYSIS.rglob("*.py"):
        if path.name == "requests_csv.py":
            continue
        text = path.read_text()
        named += [f"{path.relative_to(ANALYSIS)}: {c}" for c in sorted(UNREAD) if re.search(rf"[\"']{c}[\"']", text)]
    assert not named, named


def test_the_check_sees_a_column_named_in_quotes():
    assert re.search(r"[\"']finish_reason[\"']", 'req.get("finish_reason", None)')
