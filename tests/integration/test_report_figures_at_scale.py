"""Every figure of the report stays what the whole-table pandas path computed.

Read from the run's columnar copy (requests.arrows) and from the CSV's text alike, with the table held
in memory or written to disk (analysis/data/spill.py) from its first block or from midway.

tests/data/wide_run_figures.json holds verdict.json (less the run's folder) of two synthetic run
folders (tests/synthetic_wide.py: every column, errors, requests cut at each step's end, 20-200 gaps
per request; one unscaled, one at --time-scale 10), written by the report when it still read the
whole requests table, inter-token gaps included, into one DataFrame. Regenerate it only for a
deliberate change of a figure: `python tests/integration/test_report_figures_at_scale.py --write`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from synthetic_wide import wide_run  # noqa: E402

from loadline.analysis.data import spill  # noqa: E402
from loadline.analysis.data.load import open_up_to_last_newline  # noqa: E402
from loadline.analysis.data.requests_csv import read_streamed  # noqa: E402
from loadline.analysis.report.build import build_report  # noqa: E402
from loadline.core import runfolder  # noqa: E402

EXPECTED = Path(__file__).resolve().parent.parent / "data" / "wide_run_figures.json"
CASES = {"unscaled": {"seed": 7, "time_scale": 1.0}, "x10": {"seed": 3, "time_scale": 10.0}}
ROWS = 20_000
# the table's bytes before it goes to disk: never, at once, after a few of its blocks (~2.5 MB held)
STORAGE = {"held": 1 << 40, "spilled": 0, "spilled-midway": 1 << 20}


def figures(run_dir: Path) -> dict:
    build_report(run_dir, charts=False)
    verdict = json.loads((run_dir / "report" / "verdict.json").read_text())
    verdict.pop("run")  # the folder's path
    verdict.pop("chart_problems")  # says charts were not drawn
    return verdict


@pytest.mark.parametrize("storage", sorted(STORAGE))
@pytest.mark.parametrize("copy", [True, False], ids=["from-copy", "from-csv"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_verdict_figure_matches_the_whole_table_path(tmp_path, monkeypatch, case, copy, storage):
    expected = json.loads(EXPECTED.read_text())[case]
    run_dir = wide_run(tmp_path / case, ROWS, copy=copy, **CASES[case])
    monkeypatch.setattr(spill, "MEMORY_BYTES", STORAGE[storage])
    streamed = read_streamed(run_dir / runfolder.REQUESTS, open_up_to_last_newline, spill_to=str(tmp_path))
    assert streamed.source == ("copy" if copy else "csv")  # the path under test is the one taken
    assert ("spilled_to" in streamed.frame.attrs) == (storage != "held")  # and the storage under test
    del streamed
    got = figures(run_dir)
    assert got["phases"] == expected["phases"]  # the per-phase percentiles, ITL included, first: the clearest diff
    assert got == expected


if __name__ == "__main__" and "--write" in sys.argv:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = {case: figures(wide_run(Path(tmp) / case, ROWS, **spec)) for case, spec in CASES.items()}
    EXPECTED.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
