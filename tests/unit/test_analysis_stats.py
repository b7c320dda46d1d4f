"""Per-phase statistics against hand-computed answers."""

from __future__ import annotations

import numpy as np
import pytest
from synthetic import make_requests, write_run

from loadline.analysis.data.load import load_run
from loadline.analysis.stats.phases import (
    PHASE_TABLE_COLUMNS,
    error_classes,
    phase_table,
    pooled_itl_us,
)
from loadline.core.slo import SLO

T0 = 1_000_000.0


def _phase(index, start, end, users):
    return {
        "index": index,
        "label": f"p{index}",
        "kind": "step",
        "start_wall": start,
        "end_wall": end,
        "target_users": users,
        "spawn_rate": 1,
        "users_start": users,
        "users_end": users,
        "note": "",
    }


@pytest.fixture
def run(tmp_path):
    # phase 0: 100 ok requests with E2E 1..100 ms; phase 1: 4 ok, 2 errors, 1 cancelled
    e2e = np.arange(1, 101, dtype=float)
    first = make_requests(T0 + np.linspace(0, 9.9, 100), e2e, ttft_ms=e2e / 2, output_tokens=3, itl_us="1000 3000")
    second = make_requests(
        T0 + 10 + np.arange(7),
        [100, 200, 300, 400, 5, 6, 7],
        ttft_ms=[10, 20, 30, 40, np.nan, np.nan, np.nan],
        status=["ok"] * 4 + ["error", "error", "cancelled"],
        error_class=[""] * 4 + ["timeout", "http", "cancelled"],
        output_tokens=[10, 10, 10, 10, 0, 0, 0],
        itl_us=["500", "1500 2500", "", "4500", "", "", ""],
    )
    phases = [_phase(0, T0, T0 + 10, 2), _phase(1, T0 + 10, T0 + 20, 4)]
    import pandas as pd

    return load_run(write_run(tmp_path / "run", pd.concat([first, second], ignore_index=True), phases))


def test_columns_are_exactly_the_contract(run):
    assert list(phase_table(run).columns) == PHASE_TABLE_COLUMNS


def test_percentiles_are_linear_interpolation_of_raw_samples(run):
    row = phase_table(run).iloc[0]
    assert row["e2e_p50_ms"] == pytest.approx(50.5)
    assert row["e2e_p90_ms"] == pytest.approx(90.1)
    assert row["e2e_p95_ms"] == pytest.approx(95.05)
    assert row["e2e_p99_ms"] == pytest.approx(99.01)
    assert row["e2e_max_ms"] == 100
    assert row["ttft_p95_ms"] == pytest.approx(95.05 / 2)


def test_itl_pools_every_gap(run):
    table = phase_table(run)
    # phase 0: 100 requests x gaps {1, 3} ms -> half 1 ms, half 3 ms
    assert table.iloc[0]["itl_p50_ms"] == pytest.approx(2.0)
    assert table.iloc[0]["itl_max_ms"] == pytest.approx(3.0)
    # phase 1: gaps 0.5, 1.5, 2.5, 4.5 ms (errors and cancelled contribute none)
    assert table.iloc[1]["itl_p50_ms"] == pytest.approx(2.0)
    assert table.iloc[1]["itl_max_ms"] == pytest.approx(4.5)


def test_counts_rates_and_cancelled_are_neither_ok_nor_error(run):
    row = phase_table(run).iloc[1]
    assert (row["requests"], row["ok"], row["errors"], row["cancelled"]) == (7, 4, 2, 1)
    assert row["error_rate"] == pytest.approx(2 / 6)
    assert row["rps"] == pytest.approx(0.4)
    assert row["output_tokens_per_s"] == pytest.approx(4.0)
    assert row["users"] == 4
    assert row["e2e_p50_ms"] == pytest.approx(250.0)


def test_goodput_counts_requests_meeting_every_threshold(run):
    table = phase_table(run, SLO(e2e_p95_ms=250, e2e_p99_ms=None, ttft_p95_ms=15))
    assert table.iloc[1]["goodput_rps"] == pytest.approx(0.1)  # only the 100 ms / 10 ms request
    assert table.iloc[0]["goodput_rps"] == pytest.approx(3.0)  # TTFT = e2e/2 <= 15 -> e2e 1..30 ms, 30 in 10 s


def test_error_classes_per_phase(run):
    classes = error_classes(run)
    assert classes.loc[1, "timeout"] == 1 and classes.loc[1, "http"] == 1
    assert classes.loc[0, "timeout"] == 0


def test_pooled_itl_parses_across_chunks():
    values = np.array(["1 2", "", "3", None, "4 5 6"] * 30_000, dtype=object)
    gaps = pooled_itl_us(values)
    assert gaps.size == 6 * 30_000
    assert gaps.sum() == 21 * 30_000


def test_requests_started_after_the_first_cut_stream_are_left_out_of_percentiles():
    import pandas as pd

    from loadline.analysis.stats.phases import uncensored

    # the phase ends at 10: streams cut then censor everything that started after the first of them
    rows = pd.DataFrame(
        {
            "start_wall": [1.0, 2.0, 3.0, 4.0, 5.0],
            "end_wall": [2.0, 3.0, 10.0, 6.0, 10.0],
            "status": ["ok", "ok", "cancelled", "ok", "cancelled"],
        }
    )
    assert uncensored(rows, 10.0).tolist() == [True, True, False, False, False]
    # a user stopped mid-phase by a ramp-down (cancelled at 3.5) censors nothing
    ramp = rows.assign(end_wall=[2.0, 3.0, 3.5, 6.0, 7.0], status=["ok", "ok", "cancelled", "ok", "ok"])
    assert uncensored(ramp, 10.0).all()


def test_the_tools_own_invalid_requests_are_neither_ok_nor_the_services_errors(tmp_path):

    rows = make_requests(
        T0 + np.arange(10) * 0.5,
        [100.0] * 10,
        ttft_ms=10.0,
        status=["ok"] * 6 + ["error"] * 4,
        http_status=[200] * 6 + [400, 400, 400, 503],
        error_class=[""] * 6 + ["invalid_request"] * 3 + ["http"],
    )
    run = load_run(write_run(tmp_path / "run", rows, [_phase(0, T0, T0 + 10, 1)]))
    row = phase_table(run).iloc[0]
    # the 503 is the service's; the three context overflows are the tool's and judge nothing
    assert (row["requests"], row["ok"], row["errors"]) == (10, 6, 1)
    assert row["error_rate"] == pytest.approx(1 / 7)
    assert error_classes(run).iloc[0]["invalid_request"] == 3  # still shown among the failures


def test_lengths_asked_and_got_per_phase(tmp_path):

    from loadline.analysis.report import sections
    from loadline.analysis.stats.lengths import LENGTH_COLUMNS, length_table

    rows = make_requests(
        T0 + np.arange(6),
        [100.0] * 6,
        status=["ok"] * 5 + ["error"],
        prompt_tokens=[100, 200, 301, 400, 500, np.nan],
        prompt_tokens_requested=[100, 200, 300, 400, 500, 2500],
        output_tokens=[64, 64, 64, 60, 64, 0],
        output_tokens_requested=64,
        token_counter="server",
    )
    run = load_run(write_run(tmp_path / "run", rows, [_phase(0, T0, T0 + 10, 1)]))
    table = length_table(run)
    assert list(table.columns) == list(LENGTH_COLUMNS)
    row = table.iloc[0]  # the refused request (error) is not among what the server served
    assert (row["requests"], row["counter"], row["prompt_asked_p50"], row["prompt_got_p50"]) == (5, "server", 300, 301)
    assert row["prompt_exact_share"] == pytest.approx(4 / 5) and row["reply_exact_share"] == pytest.approx(4 / 5)
    shown = sections.length_rows({"lengths": table.to_dict(orient="records")})
    assert shown == [["p0", "5", "server", "300", "301", "80.00%", "64", "64", "80.00%"]]


def test_a_folder_from_before_the_asked_lengths_has_no_length_table(run):
    from loadline.analysis.stats.lengths import length_table

    assert length_table(run).empty  # the fixture's records never say what they asked for


@pytest.mark.parametrize("settle_s", [1.0, 2.5, 4.0])
def test_a_judged_step_is_described_by_the_stop_rules_window(tmp_path, settle_s):
    """Requests started in a judged step's last --step-settle seconds ran into the next step's load: the row
    leaves them out as the live rule did, counts them in after_window, and every record stays accounted for."""

    starts = T0 + np.arange(0, 10, 0.1)  # 100 requests, 10 per second
    e2e = np.where(starts < T0 + 10 - settle_s, 100.0, 5000.0)  # the tail is slow: the next step's load
    rows = make_requests(starts, e2e, ttft_ms=e2e / 2, output_tokens=3, itl_us="1000 3000")
    judged = _phase(0, T0, T0 + 10, 2) | {"judged_until_wall": T0 + 10 - settle_s}
    table = phase_table(load_run(write_run(tmp_path / "run", rows, [judged])), SLO())
    row = table.iloc[0]
    inside = int((starts < T0 + 10 - settle_s).sum())
    assert (row["requests"], row["after_window"]) == (inside, 100 - inside)
    assert row["e2e_max_ms"] == 100.0 and row["ttft_p99_ms"] == 50.0  # none of the tail's replies
    assert row["rps"] == pytest.approx(inside / (10 - settle_s))  # over the window's duration


def test_a_phase_without_a_judged_window_is_judged_whole(run):
    table = phase_table(run)
    assert list(table["after_window"]) == [0, 0] and list(table["requests"]) == [100, 7]
