"""phases.csv: columns, contiguity, and rows finished before the run folder existed."""

import csv

from loadline.core import runfolder
from loadline.runtime.timeline import Timeline


def read_rows(path):
    with open(path / runfolder.PHASES, newline="") as f:
        return list(csv.DictReader(f))


def test_rows_are_written_when_a_run_folder_becomes_active(tmp_path):
    runfolder.set_active(None)
    line = Timeline(3, wall=lambda: 130.0)
    line.begin(0, "baseline", "baseline", 1, 1.0, users_now=0, wall=100.0, planned_s=10.0)
    line.begin(1, "step-1 (10 users)", "step", 10, 9.0, users_now=1, wall=110.0, planned_s=10.0)
    assert not (tmp_path / runfolder.PHASES).exists()  # kept in memory meanwhile
    try:
        runfolder.set_active(runfolder.ActiveRun(path=tmp_path, started_wall=100.0))
        line.begin(2, "step-2 (20 users)", "step", 20, 10.0, users_now=10, wall=120.0, planned_s=10.0)
        line.close(users_now=20, wall=125.0)
        line.close(users_now=0, wall=999.0)  # idempotent
    finally:
        runfolder.set_active(None)
    rows = read_rows(tmp_path)
    assert [
        (r["index"], r["label"], r["start_wall"], r["end_wall"], r["users_start"], r["users_end"], r["note"])
        for r in rows
    ] == [
        ("0", "baseline", "100.0", "110.0", "0", "1", ""),
        ("1", "step-1 (10 users)", "110.0", "120.0", "1", "10", ""),
        ("2", "step-2 (20 users)", "120.0", "125.0", "10", "20", "cut short"),
    ]


def test_current_phase_describes_the_open_phase():
    line = Timeline(2)
    assert line.current() is None
    line.begin(0, "burst-1 (12 users)", "burst", 12, 8.0, users_now=4, wall=50.0, planned_s=60.0)
    assert line.current() == {
        "index": 0,
        "label": "burst-1 (12 users)",
        "kind": "burst",
        "target_users": 12,
        "start_wall": 50.0,
        "planned_s": 60.0,
        "phases": 2,
    }
