"""analysis/stats/recovery.py on constructed records whose recovery time is known."""

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from loadline.analysis.data.load import RunData
from loadline.analysis.data.timescale import model_run
from loadline.analysis.stats.recovery import RecoveryRule, find_events, recovery, recovery_window, windows
from loadline.core.runfolder import FAULT_COLUMNS
from loadline.core.schema import FaultRow

T0 = 1_000_000.0


def faults(*rows: tuple) -> pd.DataFrame:
    """faults.csv rows of (offset s, phase index, path, outcome[, detail[, body]]) as analysis loads them."""
    out = []
    for at, index, path, outcome, *rest in rows:
        detail, body = (*rest, "{}")[:2] if rest else ("", "{}")
        out.append(dataclasses.astuple(FaultRow(T0 + at, index, f"phase-{index}", "POST", path, body, outcome, detail)))
    return pd.DataFrame(out, columns=list(FAULT_COLUMNS))


def phases(*rows: tuple) -> pd.DataFrame:
    """rows of (label, kind, start offset, end offset, target users[, note])."""
    out = []
    for index, (label, kind, start, end, users, *note) in enumerate(rows):
        out.append(
            {
                "index": index,
                "label": label,
                "kind": kind,
                "start_wall": T0 + start,
                "end_wall": T0 + end,
                "target_users": users,
                "note": note[0] if note else "",
            }
        )
    return pd.DataFrame(out)


def records(
    start: float,
    end: float,
    per_s: float,
    ttft_ms: float = 100.0,
    e2e_ms: float = 1000.0,
    status: str = "ok",
    error_class: str = "",
) -> pd.DataFrame:
    starts = T0 + np.arange(start, end, 1.0 / per_s)
    return pd.DataFrame(
        {
            "start_wall": starts,
            "status": status,
            "error_class": error_class,
            "ttft_ms": ttft_ms if status == "ok" else np.nan,
            "e2e_ms": e2e_ms,
        }
    )


SURGE = phases(
    ("baseline", "baseline", 0, 60, 4), ("surge (x3)", "burst", 60, 120, 12), ("recovery", "recover", 120, 180, 4)
)


def spike_for(seconds: float) -> pd.DataFrame:
    return pd.concat(
        [records(0, 60, 10), records(60, 60 + seconds, 20, ttft_ms=1000, e2e_ms=5000), records(60 + seconds, 180, 20)],
        ignore_index=True,
    )


def scaled(frame: pd.DataFrame, scale: float) -> pd.DataFrame:
    """The same run compressed `scale` times (what --time-scale does to wall times and latencies)."""
    frame = frame.copy()
    frame["start_wall"] = T0 + (frame["start_wall"] - T0) / scale
    for column in ("ttft_ms", "e2e_ms"):
        if column in frame:
            frame[column] = frame[column] / scale
    if "end_wall" in frame:
        frame["end_wall"] = T0 + (frame["end_wall"] - T0) / scale
    return frame


def test_a_four_second_latency_spike_after_the_surge_recovers_in_four_seconds():
    [entry] = recovery(spike_for(4.0), SURGE)
    assert entry["event"] == "surge x3" and entry["phase"] == "surge (x3)"
    assert (entry["users_from"], entry["users_to"]) == (4, 12)
    assert entry["baseline"]["phase"] == "baseline"
    assert entry["baseline"]["ttft_p95_ms"] == pytest.approx(100) and entry["baseline"]["error_rate"] == 0
    assert entry["impact_s"] == 0 and entry["recovered"] and entry["recovery_s"] == pytest.approx(4.0)
    assert entry["relapse_s"] == 0
    assert entry["baseline_recovery_s"] == pytest.approx(4.0)
    assert entry["peak"]["ttft_p95_ms"] == pytest.approx(1000) and entry["peak"]["e2e_p95_ms"] == pytest.approx(5000)
    assert entry["failed"] == 0 and entry["errors_by_class"] == {}


@pytest.mark.parametrize("seconds", [2.0, 8.0, 20.0])
def test_recovery_time_follows_the_spike_length(seconds):
    [entry] = recovery(spike_for(seconds), SURGE)
    assert entry["recovery_s"] == pytest.approx(seconds)


def test_time_scaled_runs_are_reported_in_model_time():
    compressed = RunData(
        Path("run"),
        {"time_scale": 20},
        scaled(spike_for(6.0), 20),
        scaled(SURGE, 20),
        pd.DataFrame(),
        pd.DataFrame(),
        None,
    )
    model = model_run(compressed)  # what the report reads: the run folder in model time
    [entry] = recovery(model.requests, model.phases)
    assert entry["recovery_s"] == pytest.approx(6.0)
    assert entry["peak"]["ttft_p95_ms"] == pytest.approx(1000)
    assert entry["phase_s"] == pytest.approx(60)


def test_a_spike_lasting_the_whole_surge_is_not_recovered():
    [entry] = recovery(spike_for(60.0), SURGE)
    assert entry["recovered"] is False and entry["recovery_s"] is None


def test_a_surge_with_no_visible_impact_recovers_at_once():
    [entry] = recovery(spike_for(0.0), SURGE)
    assert entry["impact_s"] is None and entry["recovery_s"] == 0 and entry["recovered"]


def test_the_slo_limit_counts_as_back_to_normal_when_looser_than_the_baseline():
    # latency settles at 3x the baseline but inside the SLO: recovered once the spike is over
    data = pd.concat(
        [
            records(0, 60, 10),
            records(60, 64, 20, ttft_ms=1000, e2e_ms=5000),
            records(64, 180, 20, ttft_ms=300, e2e_ms=1200),
        ],
        ignore_index=True,
    )
    [without_slo] = recovery(data, SURGE)
    [with_slo] = recovery(data, SURGE, slo_ttft_p95_ms=800, slo_e2e_p95_ms=1500)
    assert without_slo["recovered"] is False
    assert with_slo["recovery_s"] == pytest.approx(4.0)
    assert with_slo["baseline_recovery_s"] is None  # latency never came back to the baseline's


def test_a_fault_starts_the_clock_when_it_was_sent_and_its_failures_are_counted_by_class():
    kill = faults((70, 1, "/admin/replicas/0/kill", "ok", "", '{"restart_after_s": 30}'))
    table = phases(("baseline", "baseline", 0, 60, 4), ("surge + kill", "burst", 60, 120, 12, "fault: for people only"))
    data = pd.concat(
        [
            records(0, 60, 10),
            records(60, 70, 20),
            records(70, 71, 4, status="error", error_class="stream_error"),
            records(71, 73, 4, status="error", error_class="http"),
            records(70, 76, 20, ttft_ms=2000, e2e_ms=6000),
            records(76, 120, 20),
        ],
        ignore_index=True,
    )
    [entry] = recovery(data, table, faults=kill)
    assert entry["event"] == "surge x3 + fault"
    assert entry["faults"] == ['POST /admin/replicas/0/kill {"restart_after_s": 30} ok']
    assert entry["disturbance_at_s"] == pytest.approx(10)
    assert entry["recovery_s"] == pytest.approx(6.0)
    assert entry["failed"] == 12 and entry["errors_by_class"] == {"http": 8, "stream_error": 4}
    assert entry["peak"]["error_rate"] > 0


def test_only_big_jumps_from_a_non_zero_level_and_fault_phases_are_events():
    table = phases(
        ("idle", "stage", 0, 10, 0),
        ("start", "stage", 10, 20, 4),
        ("bit more", "stage", 20, 30, 6),
        ("double", "stage", 30, 40, 12),
        ("ramp", "ramp", 40, 50, 40),
        ("kill", "hold", 50, 60, 40, "fault: POST /admin/faults/clear failed: HTTP 404"),
    )
    events = find_events(table, faults((51, 5, "/admin/faults/clear", "failed", "HTTP 404")))
    assert [e.position for e in events] == [3, 5]
    assert events[1].faults == ("POST /admin/faults/clear failed (HTTP 404)",)
    assert [e.position for e in find_events(table)] == [3]  # the note alone is no event: nothing parses it
    assert events[0].surge_factor == 2 and events[1].surge_factor is None
    assert events[1].disturbance_wall == T0 + 50  # a failed action does not move the clock


def test_sparse_windows_widen_back_to_enough_samples():
    data = records(0, 20, 1.0)  # one request per 2 s window
    table = windows(data, T0, T0 + 20, min_samples=4)
    assert list(table["ok"]) == [2] * 10
    assert list(table["samples"]) == [2, 4, 4, 4, 4, 4, 4, 4, 4, 4]


def test_recovery_waits_for_the_first_bad_window():
    good = np.array([True, True, False, False, True, True, True, False, True])
    assert recovery_window(good, hold_windows=3) == (2, 4)
    assert recovery_window(good, hold_windows=4) == (2, None)
    assert recovery_window(np.array([True, True]), 5) == (None, 0)


def test_failures_count_when_they_ended():
    table = phases(("baseline", "baseline", 0, 60, 4), ("kill", "burst", 60, 120, 12))
    failed = records(68, 70, 2, status="error", error_class="stream_error")
    failed["end_wall"] = T0 + 70.5  # in flight when the replica died
    data = pd.concat([records(0, 60, 10), records(60, 120, 20), failed], ignore_index=True)
    [entry] = recovery(data, table, faults=faults((70, 1, "/admin/replicas/0/kill", "ok")))
    assert entry["failed"] == 4 and entry["impact_s"] == 0 and entry["recovery_s"] == pytest.approx(2.0)
    assert entry["windows"][0]["errors"] == 4


def test_no_records_or_no_events_give_an_empty_list():
    assert recovery(records(0, 0, 1), SURGE) == []
    flat = phases(("a", "stage", 0, 60, 4), ("b", "stage", 60, 120, 4))
    assert recovery(records(0, 120, 5), flat) == []
    assert RecoveryRule().window_s == 2.0


def test_recovery_s_max_fails_a_slow_or_missing_recovery_and_ignores_an_unset_limit():
    from loadline.analysis.verdict.gate import recovery_criteria as criteria

    [four] = recovery(spike_for(4.0), SURGE)
    [stuck] = recovery(spike_for(60.0), SURGE)
    assert criteria([four], None) == []
    assert criteria([four], 5.0)[0].passed is True and criteria([four], 5.0)[0].measured == 4.0
    assert criteria([four], 3.0)[0].passed is False
    [never] = criteria([four, stuck], 300.0)
    assert never.passed is False and "not recovered" in never.where
    assert criteria([], 5.0)[0].passed is None  # nothing to judge is not a pass or a fail


def test_recovery_rows_say_when_and_what_failed():
    from loadline.analysis.report.recovery_table import recovery_rows

    table = phases(("baseline", "baseline", 0, 60, 4), ("kill", "burst", 60, 120, 12))
    data = pd.concat(
        [
            records(0, 60, 10),
            records(60, 61, 4, status="error", error_class="http"),
            records(60, 64, 20, ttft_ms=900, e2e_ms=4000),
            records(64, 120, 20),
        ],
        ignore_index=True,
    )
    [row] = recovery_rows(recovery(data, table, faults=faults((60, 1, "/admin/replicas/0/kill", "ok"))))
    assert row[6] == "4 s" and row[7] == "4 s" and row[8] == "4 (http 4)" and row[9] == "POST /admin/replicas/0/kill ok"
