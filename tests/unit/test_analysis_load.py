"""Loading run folders: tolerant of live-appended files, one clear line for unusable input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from synthetic import make_requests, write_run

from loadline.analysis.data.load import WHOLE_RUN, load_run
from loadline.commands.main import main as cli_main
from loadline.core.errors import UsageError


def _run(tmp_path, n=10, phases=None):
    requests = make_requests(
        1000.0 + np.arange(n), np.full(n, 200.0), ttft_ms=50.0, output_tokens=5, itl_us="1000 2000"
    )
    return write_run(tmp_path / "run", requests, phases)


def test_end_wall_is_start_plus_e2e_and_whole_run_phase_when_no_phases_csv(tmp_path):
    run = load_run(_run(tmp_path))
    assert len(run.requests) == 10
    assert run.requests["end_wall"].iloc[0] == pytest.approx(1000.2)
    assert list(run.phases["label"]) == [WHOLE_RUN]
    assert run.phases["start_wall"].iloc[0] == 1000.0
    assert run.phases["end_wall"].iloc[0] == pytest.approx(1009.2)
    assert any("server_metrics.csv" in m for m in run.missing)


def test_truncated_last_line_is_dropped_not_fatal(tmp_path):
    path = _run(tmp_path)
    text = (path / "requests.csv").read_text()
    (path / "requests.csv").write_text(text + 'r99,w0,u0,ChatUser,s0,0,/v1/chat,sim,1010.0,0,ok,"unterminated')
    run = load_run(path)
    assert len(run.requests) == 10


def test_missing_folder_and_empty_run_raise_one_line(tmp_path):
    with pytest.raises(UsageError, match="not found"):
        load_run(tmp_path / "nope")
    path = _run(tmp_path)
    header = (path / "requests.csv").read_text().splitlines()[0]
    (path / "requests.csv").write_text(header + "\n")
    with pytest.raises(UsageError, match="empty run"):
        load_run(path)
    (tmp_path / "bare").mkdir()
    with pytest.raises(UsageError, match="nothing to analyse"):
        load_run(tmp_path / "bare")


def test_corrupt_requests_table_gives_exit_2_and_one_line(tmp_path, capsys):
    path = tmp_path / "corrupt"
    path.mkdir()
    (path / "requests.csv").write_text("this,is\nnot,a,requests,table,at,all\n")
    assert cli_main(["report", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("loadline report: error:") and "\n" not in err
    assert "Traceback" not in err


def test_cli_report_on_missing_folder_exits_2(tmp_path, capsys):
    assert cli_main(["report", str(tmp_path / "missing")]) == 2
    assert "run folder not found" in capsys.readouterr().err


def test_plain_locust_csv_folder_degrades_and_says_what_is_missing(tmp_path):
    folder = tmp_path / "locust_only"
    folder.mkdir()
    stats = pd.DataFrame(
        [
            {
                "Type": "POST",
                "Name": "/v1/chat/completions",
                "Request Count": 200,
                "Failure Count": 2,
                "Requests/s": 4.0,
                "50%": 400,
                "90%": 700,
                "95%": 900,
                "99%": 1400,
                "Max Response Time": 2100.5,
            },
            {
                "Type": "",
                "Name": "Aggregated",
                "Request Count": 200,
                "Failure Count": 2,
                "Requests/s": 4.0,
                "50%": 400,
                "90%": 700,
                "95%": 900,
                "99%": 1400,
                "Max Response Time": 2100.5,
            },
        ]
    )
    stats.to_csv(folder / "mytest_stats.csv", index=False)
    run = load_run(folder)
    assert not run.has_records and run.locust_stats is not None
    assert any("requests.csv" in m for m in run.missing)
    from loadline.analysis.stats.phases import phase_table

    table = phase_table(run)
    assert table["e2e_p95_ms"].iloc[0] == 900
    assert table["errors"].iloc[0] == 2 and table["error_rate"].iloc[0] == pytest.approx(0.01)
    assert np.isnan(table["ttft_p95_ms"].iloc[0])


@pytest.mark.parametrize(
    "case, expected",
    [
        ("binary", "not a loadline requests table"),  # garbage from the header on: no row can be read
        ("no_newline", "no complete line"),
        ("all_cancelled", "no request completed"),
        ("outside_phases", "inside a phase"),
    ],
)
def test_unusable_runs_exit_2_with_one_line(tmp_path, capsys, case, expected):
    path = tmp_path / case
    status, phases = "ok", None
    if case == "all_cancelled":
        status = "cancelled"
    if case == "outside_phases":
        phases = [
            {
                "index": 0,
                "label": "later",
                "kind": "step",
                "start_wall": 5000.0,
                "end_wall": 5010.0,
                "target_users": 1,
                "spawn_rate": 1,
                "users_start": 1,
                "users_end": 1,
                "note": "",
            }
        ]
    write_run(path, make_requests(1000.0 + np.arange(5), [1, 2, 3, 4, 5], status=status), phases)
    if case == "binary":
        (path / "requests.csv").write_bytes((bytes(range(128, 256)) + b"\n") * 20)
    if case == "no_newline":
        (path / "requests.csv").write_bytes(bytes(range(128, 256)) * 20)
    assert cli_main(["report", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert expected in err and "\n" not in err and "Traceback" not in err


def test_malformed_middle_row_is_skipped_and_reported(tmp_path):
    path = _run(tmp_path)
    lines = (path / "requests.csv").read_text().splitlines(True)
    lines[3] = lines[3][:15] + "\n"
    (path / "requests.csv").write_text("".join(lines))
    run = load_run(path)
    assert len(run.requests) == 9
    assert any("1 malformed row" in m for m in run.missing)


def test_a_phase_the_crashed_master_never_closed_gets_its_records(tmp_path):
    import json

    from loadline.analysis.data.load import load_run
    from loadline.core.records import COLUMNS, RequestRecord
    from loadline.core.runfolder import PHASE_COLUMNS

    rows = []
    for i, start in enumerate([10.0, 11.0, 21.0, 22.0]):
        rec = RequestRecord(f"r{i}", "w", "u", "C", "s", 0, "/v1/chat/completions", "m", start, e2e_ms=500.0)
        rows.append(",".join("" if v is None else str(v) for v in rec.to_row()))
    (tmp_path / "requests.csv").write_text(",".join(COLUMNS) + "\n" + "\n".join(rows) + "\n")
    phase = dict.fromkeys(PHASE_COLUMNS, "")
    phase.update(index=0, label="step-1", kind="step", start_wall=10.0, end_wall=20.0, target_users=1)
    (tmp_path / "phases.csv").write_text(
        ",".join(PHASE_COLUMNS) + "\n" + ",".join(str(phase[c]) for c in PHASE_COLUMNS) + "\n"
    )
    (tmp_path / "manifest.json").write_text(json.dumps({"status": "running"}))
    run = load_run(tmp_path)
    assert list(run.phases["kind"]) == ["step", "unfinished"]
    assert run.phases["end_wall"].iloc[-1] == 22.5
    (tmp_path / "manifest.json").write_text(json.dumps({"status": "finished"}))
    assert list(load_run(tmp_path).phases["kind"]) == ["step"]


@pytest.mark.parametrize(
    "garbage",
    [
        b"a,b,c," + b",".join([b"x"] * 60),  # too many fields
        b"r77,w0,u0,ChatUser,s0,0,/v1/chat,sim,not-a-time,0,0,ok",  # a non-number where a number belongs
        b"\xff\xfe\x00garbage\x80,\x81",  # bytes that are not UTF-8
    ],
)
def test_one_garbage_row_is_skipped_counted_and_said_not_fatal(tmp_path, garbage):
    # one such row must not make `loadline report` refuse the whole run (exit 2)
    path = _run(tmp_path)
    lines = (path / "requests.csv").read_bytes().splitlines()
    (path / "requests.csv").write_bytes(b"\n".join([*lines[:4], garbage, *lines[4:]]) + b"\n")
    run = load_run(path)
    assert len(run.requests) == 10
    assert run.requests["e2e_ms"].dtype == "float64" and run.requests["start_wall"].notna().all()
    assert any("requests.csv: 1 garbage row(s) skipped" in m for m in run.missing), run.missing


def test_phases_csv_is_missing_only_when_a_shape_ran(tmp_path):
    requests = make_requests(1000.0 + np.arange(5), np.full(5, 200.0))
    plain = load_run(write_run(tmp_path / "plain", requests, manifest={"name": "no shape", "shape": None}))
    assert not any("phases.csv" in m for m in plain.missing), plain.missing
    shaped = load_run(write_run(tmp_path / "shaped", requests, manifest={"name": "stepped", "shape": "StepShape"}))
    assert "phases.csv (absent)" in shaped.missing


@pytest.mark.parametrize("late_s", [0.0, 0.4, 2.5])
def test_an_open_loop_whole_run_starts_at_its_first_due_time_however_late_the_first_sends(tmp_path, late_s):
    # 40 arrivals due 0.25 s apart from t=1000; the first ones sent `late_s` late (a busy start), the rest on time
    due = 1000.0 + 0.25 * np.arange(40)
    sent = np.maximum(due, 1000.0 + late_s)
    requests = make_requests(sent, np.full(40, 100.0), due_wall=due, lateness_ms=(sent - due) * 1000)
    run = load_run(write_run(tmp_path / "run", requests))
    assert run.phases["start_wall"].iloc[0] == 1000.0  # not the first send
    assert run.phases["end_wall"].iloc[0] == pytest.approx(due[-1] + 0.1)
