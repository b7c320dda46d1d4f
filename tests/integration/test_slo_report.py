"""The report's SLO gate on a whole synthetic run: which criteria apply depends on the traffic (loadline/core/judge.py)."""

from __future__ import annotations

import numpy as np
import pytest
from synthetic import make_requests, write_run

from loadline.analysis.report.build import build_report
from loadline.core.slo import SLO


@pytest.mark.parametrize("streaming,passed", [(True, True), (False, False)])
def test_the_report_of_healthy_long_replies_passes_streamed_and_fails_as_request_response(tmp_path, streaming, passed):
    # 256-token replies: ~2.6 s end to end, first token after 300 ms (the healthy default-profile run)
    e2e = np.linspace(2400.0, 2700.0, 100)
    requests = make_requests(1000.0 + np.arange(100) * 0.1, e2e, ttft_ms=300.0, output_tokens=256)
    run = write_run(tmp_path / "run", requests, manifest={"name": "long replies", "streaming": streaming})
    result = build_report(run, SLO(), charts=False)
    assert result.verdict["slo"]["passed"] is passed and result.exit_code == (0 if passed else 1)
    summary = (run / "report" / "summary.md").read_text()
    if streaming:
        assert "Not applied: E2E P95 (streaming:" in summary and "| TTFT P95 | <= 800 ms |" in summary
    else:
        assert "Not applied: TTFT P95 (non-streaming" in summary and "| E2E P95 | <= 1500 ms |" in summary
