"""A report without charts does not import matplotlib (~0.6 s of CPU per `loadline report --no-charts`,
a CI gate's whole job); the one that draws does. Child processes: this one may have imported it already."""

from __future__ import annotations

import subprocess
import sys

PROBE = "import sys, {module}; print('matplotlib' in sys.modules)"


def imports_matplotlib(module: str) -> bool:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module)], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip() == "True"


def test_the_report_builder_leaves_matplotlib_to_the_charts():
    assert not imports_matplotlib("loadline.analysis.report.build")
    assert not imports_matplotlib("loadline.commands.report")
    assert imports_matplotlib("loadline.analysis.report.figures")
