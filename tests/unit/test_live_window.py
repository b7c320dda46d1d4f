"""The master's live window: the per-token percentiles the stop rule judges, model time, the web UI's SLO rows."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from loadline.core.records import RequestRecord
from loadline.runtime import live
from loadline.runtime.live import LiveStats, to_model_time
from loadline.runtime.webui import slo_rows


def row(start: float, gaps_us: list[int], tpot_ms: float, ttft_ms: float = 100.0, status: str = "ok") -> list:
    rec = RequestRecord(
        "r",
        "w",
        "u",
        "chat",
        "s",
        0,
        "/v1/chat/completions",
        "m",
        start,
        status=status,
        ttft_ms=ttft_ms,
        e2e_ms=ttft_ms + sum(gaps_us) / 1000,
        tpot_ms=tpot_ms,
        itl_us=" ".join(map(str, gaps_us)),
        output_tokens=len(gaps_us) + 1,
    )
    return rec.to_row()


def test_itl_percentiles_pool_every_gap_like_the_report_and_tpot_is_per_request():
    stats = LiveStats()
    gaps = [[10_000] * 98 + [200_000, 400_000], [12_000] * 100]
    stats.ingest([row(1000.2, gaps[0], tpot_ms=15.0), row(1000.7, gaps[1], tpot_ms=12.0)])
    summary = stats.window(1000.0, 1002.0)
    pooled = np.array(gaps[0] + gaps[1]) / 1000.0
    assert summary.itl_p95_ms == pytest.approx(float(np.percentile(pooled, 95)))
    assert summary.itl_p99_ms == pytest.approx(float(np.percentile(pooled, 99)))
    assert summary.tpot_p95_ms == pytest.approx(float(np.percentile([15.0, 12.0], 95)))
    scaled = to_model_time(summary, 10.0)
    assert scaled.itl_p99_ms == pytest.approx(summary.itl_p99_ms * 10)
    assert scaled.tpot_p95_ms == pytest.approx(summary.tpot_p95_ms * 10)
    assert scaled.rps == pytest.approx(summary.rps / 10)
    assert scaled.requests == summary.requests


def test_windows_older_than_the_gap_retention_have_no_itl_instead_of_a_wrong_one():
    stats = LiveStats()
    stats.ingest([row(1000.5, [10_000] * 10, tpot_ms=10.0)])
    stats.ingest([row(1000.5 + live.GAP_RETENTION_S + 5, [10_000] * 10, tpot_ms=10.0)])
    old = stats.window(1000.0, 1001.0)
    assert old.requests == 1 and old.itl_p99_ms is None and old.tpot_p95_ms == pytest.approx(10.0)
    assert stats.window(1000.0 + live.GAP_RETENTION_S + 5, 1000.0 + live.GAP_RETENTION_S + 6).itl_p99_ms == 10.0


def test_the_web_ui_tab_shows_the_judges_verdict_per_criterion(tmp_path):
    slo = tmp_path / "slo.toml"
    slo.write_text("[slo]\nitl_p99_ms = 50\n")
    stats = LiveStats()
    stats.ingest([row(1000.0 + i / 10, [60_000] * 20, tpot_ms=60.0) for i in range(10)])
    summary = stats.window(1000.0, 1002.0)
    environment = SimpleNamespace(parsed_options=SimpleNamespace(slo_file=str(slo), non_streaming=False))
    rows = {r["metric"]: (r["last"], r["run"]) for r in slo_rows(environment, summary, summary)}
    assert rows["SLO TTFT P95 <= 800 ms"] == ("100 ms ok", "100 ms ok")
    assert rows["SLO ITL P99 <= 50 ms"] == ("60 ms FAIL", "60 ms FAIL")
    assert rows["SLO error rate <= 0.00%"][0] == "0.00% ok"
    assert rows["SLO E2E P95: not applied"][0].startswith("streaming:")


def test_itl_is_computed_only_when_asked_and_a_window_from_zero_walks_only_the_seconds_held():
    stats = LiveStats()
    stats.ingest([row(1_796_000_000.5, [10_000] * 10, tpot_ms=10.0)])
    assert stats.window(1_796_000_000.0, 1_796_000_001.0, itl=False).itl_p99_ms is None
    everything = stats.window(0.0, 1_796_000_001.0)  # the stop rule's "did anything flow" check: no range walk
    assert everything.requests == 1 and everything.itl_p99_ms == 10.0


def test_gaps_are_kept_for_the_retention_in_model_time_in_a_time_scaled_run():
    """At --time-scale 10, 900 model seconds are 90 wall seconds: a rehearsal holds what a real run holds."""
    later = 1000.5 + live.GAP_RETENTION_S / 10 + 5
    scaled, real = LiveStats(time_scale=10.0), LiveStats()
    for stats in (scaled, real):
        stats.ingest([row(1000.5, [10_000] * 10, tpot_ms=10.0)])
        stats.ingest([row(later, [10_000] * 10, tpot_ms=10.0)])
    assert scaled.window(1000.0, 1001.0).itl_p99_ms is None
    assert real.window(1000.0, 1001.0).itl_p99_ms == 10.0
    # never below the floor: the web UI's points settle after 30 wall seconds
    fast = LiveStats(time_scale=1000.0)
    fast.ingest([row(1000.5, [10_000] * 10, tpot_ms=10.0), row(1000.5 + 30, [10_000] * 10, tpot_ms=10.0)])
    assert fast.window(1000.0, 1001.0).itl_p99_ms == 10.0


def test_packed_rows_count_statuses_error_classes_and_missing_values_as_the_records_say():
    stats = LiveStats()
    failed = RequestRecord(
        "r",
        "w",
        "u",
        "chat",
        "s",
        0,
        "/v1/chat/completions",
        "m",
        1000.3,
        status="error",
        error_class="timeout",
        e2e_ms=5000.0,
    ).to_row()
    reset = RequestRecord(
        "r",
        "w",
        "u",
        "chat",
        "s",
        0,
        "/v1/chat/completions",
        "m",
        1000.4,
        status="error",
        error_class="reset",
        e2e_ms=40.0,
    ).to_row()
    cancelled = RequestRecord(
        "r",
        "w",
        "u",
        "chat",
        "s",
        0,
        "/v1/chat/completions",
        "m",
        1001.2,
        status="cancelled",
        error_class="cancelled",
        e2e_ms=10.0,
    ).to_row()
    no_tpot = row(1001.5, [], tpot_ms=None, ttft_ms=80.0)  # a one-token reply: no TPOT, no gaps
    stats.ingest([row(1000.1, [10_000] * 3, tpot_ms=10.0, ttft_ms=120.0), failed, cancelled])
    stats.ingest([reset, no_tpot, row(1002.5, [10_000] * 3, tpot_ms=10.0)])  # the last one is outside the window
    s = stats.window(1000.0, 1002.0)
    assert (s.requests, s.ok, s.errors, s.cancelled) == (5, 2, 2, 1)
    assert s.errors_by_class == {"timeout": 1, "reset": 1}
    assert s.error_rate == pytest.approx(2 / 4)
    assert s.ttft_p50_ms == pytest.approx(100.0) and s.tpot_p95_ms == pytest.approx(10.0)
    assert s.output_tokens_per_s == pytest.approx((4 + 1) / 2.0)
    assert len(stats) == 6


def test_the_stop_rule_does_not_count_the_tools_invalid_requests_as_the_services_errors():
    stats = LiveStats()
    refused = [
        RequestRecord(
            "r",
            "w",
            "u",
            "chat",
            "s",
            0,
            "/v1/chat/completions",
            "m",
            1000.2 + i / 10,
            status="error",
            error_class="invalid_request",
            http_status=400,
            e2e_ms=3.0,
        ).to_row()
        for i in range(3)
    ]
    overloaded = RequestRecord(
        "r",
        "w",
        "u",
        "chat",
        "s",
        0,
        "/v1/chat/completions",
        "m",
        1000.9,
        status="error",
        error_class="http",
        http_status=503,
        e2e_ms=3.0,
    ).to_row()
    stats.ingest([row(1000.1, [10_000] * 3, tpot_ms=10.0), *refused, overloaded])
    s = stats.window(1000.0, 1002.0)
    assert (s.requests, s.ok, s.errors) == (5, 1, 1)  # the 503 only
    assert s.error_rate == pytest.approx(1 / 2)
    assert s.errors_by_class == {"invalid_request": 3, "http": 1}  # still shown by class


def test_ttfo_is_judged_live_when_the_slo_sets_it_exact_and_after_folding():
    """The stop rule and the web UI judge TTFO as the report does: recent windows from exact rows,
    old ones from the folded minutes' histograms."""
    from loadline.core.judge import judge, values_of
    from loadline.core.slo import SLO

    def thinking(start: float, ttfo_ms: float) -> list:
        rec = RequestRecord(
            "r",
            "w",
            "u",
            "chat",
            "s",
            0,
            "/v1/chat/completions",
            "m",
            start,
            ttft_ms=50.0,
            ttfo_ms=ttfo_ms,
            reasoning_ms=ttfo_ms - 50.0,
            e2e_ms=ttfo_ms + 100.0,
            output_tokens=20,
        )
        return rec.to_row()

    stats = LiveStats()
    ttfo = np.linspace(1000.0, 2990.0, 200)
    stats.ingest([thinking(1000.0 + i * 0.01, value) for i, value in enumerate(ttfo)])
    summary = stats.window(1000.0, 1003.0)
    assert summary.ttft_p95_ms == pytest.approx(50.0)
    assert summary.ttfo_p95_ms == pytest.approx(float(np.percentile(ttfo, 95)))
    judged = judge(SLO(ttfo_p95_ms=2500.0), values_of(summary), True)
    assert [c.name for c in judged.failed] == ["TTFO P95"]
    assert not judge(SLO(), values_of(summary), True).failed  # TTFT alone by default: 50 ms
    stats.ingest([thinking(1000.0 + live.ROW_RETENTION_S + 120, 1000.0)])  # the first minute folds
    folded = stats.window(1000.0, 1003.0)
    assert folded.approx_pct is not None
    assert folded.ttfo_p95_ms == pytest.approx(summary.ttfo_p95_ms, rel=folded.approx_pct / 100)
