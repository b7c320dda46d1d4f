"""Stage fault actions (shapes/drill.py): parsing, when they run, what the phase note says."""

import csv
import json
import re

import pytest

from loadline.core import runfolder
from loadline.core.errors import UsageError
from loadline.core.schema import FAULT_FAILED, FAULT_OK, FAULT_SKIPPED, FaultRow
from loadline.shapes.drill import ActionRunner, FaultAction, parse_actions, post
from loadline.shapes.stages import StagesShape, load_stages
from tests.shape_fakes import drive, make_shape

DRILL = """
[[stage]]
duration = 60
users = 4
[[stage]]
label = "surge"
kind = "burst"
duration = 120
users = 12
kill_replica = 0
restart_after_s = 30
fault_after_s = 20
faults = {error_rate = 0.2}
[[stage]]
duration = 30
users = 4
"""


def test_friendly_keys_become_admin_posts():
    actions = parse_actions(
        {
            "kill_replica": 1,
            "restart_after_s": 30,
            "faults": {"latency_spike": 3},
            "actions": [{"post": "/admin/replicas/0/start"}],
        },
        "here",
        60,
    )
    assert [(a.path, json.loads(a.body)) for a in actions] == [
        ("/admin/replicas/1/kill", {"restart_after_s": 30}),
        ("/admin/faults", {"latency_spike": 3}),
        ("/admin/replicas/0/start", {}),
    ]
    assert parse_actions({"faults": "clear"}, "here", 60) == (FaultAction("/admin/faults/clear"),)
    assert parse_actions({}, "here", 60) == ()


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"kill_replica": -1}, "kill_replica must be a replica index"),
        ({"restart_after_s": 3}, "restart_after_s goes with kill_replica"),
        ({"faults": []}, "faults must be a table"),
        ({"actions": [{"post": "/v1/models"}]}, "must be an admin path"),
        ({"actions": [{"get": "/admin/state"}]}, "each action is"),
        ({"kill_replica": 0, "fault_after_s": 60}, "fault_after_s must be >= 0 and shorter than the stage"),
        ({"fault_after_s": 1}, "fault_after_s without an action"),
    ],
)
def test_bad_actions_are_one_line_errors(entry, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        parse_actions(entry, "stage 2", 60)


def test_time_scale_shrinks_the_delay_of_an_action(tmp_path):
    path = tmp_path / "drill.toml"
    path.write_text(DRILL)
    shape = make_shape(StagesShape, stages_file=str(path), time_scale=10.0)
    [surge] = [p for p in shape.planned(shape.runner.environment.parsed_options) if p.actions]
    assert [a.after_s for a in surge.actions] == [2.0, 2.0]
    assert load_stages(path)[1].actions[0].after_s == 20


class Recorder:
    """Runs spawned work at once and answers every POST with the canned outcome."""

    def __init__(self, outcome: str = "ok"):
        self.outcome = outcome
        self.sent: list[tuple[str, str]] = []
        self.slept: list[float] = []

        self.recorded: list[FaultRow] = []

    def runner(self) -> ActionRunner:
        return ActionRunner(
            spawn=lambda work: work(),
            send=self.send,
            sleep=self.slept.append,
            wall=lambda: 123.5,
            record=self.recorded.append,
        )

    def send(self, url: str, action: FaultAction) -> str:
        self.sent.append((url, action.path))
        return self.outcome


def run_drill(tmp_path, recorder: Recorder, admin_url: str = "http://127.0.0.1:9/"):
    path = tmp_path / "drill.toml"
    path.write_text(DRILL)
    shape = make_shape(StagesShape, stages_file=str(path), sim_admin_url=admin_url)
    shape.actions = recorder.runner()
    drive(shape)
    return shape.state.timeline.rows


def test_actions_run_once_when_their_stage_begins_and_the_note_says_how_it_went(tmp_path):
    recorder = Recorder()
    rows = run_drill(tmp_path, recorder)
    assert recorder.sent == [
        ("http://127.0.0.1:9/", "/admin/replicas/0/kill"),
        ("http://127.0.0.1:9/", "/admin/faults"),
    ]
    assert recorder.slept == [20.0]  # both wait for fault_after_s, counted once
    assert [r.note for r in rows] == [  # for people; analysis reads the typed rows
        "",
        (
            'fault: POST /admin/replicas/0/kill {"restart_after_s": 30} ok; '
            'fault: POST /admin/faults {"error_rate": 0.2} ok'
        ),
        "",
    ]
    assert recorder.recorded == [
        FaultRow(123.5, 1, "surge", "POST", "/admin/replicas/0/kill", '{"restart_after_s": 30}', FAULT_OK),
        FaultRow(123.5, 1, "surge", "POST", "/admin/faults", '{"error_rate": 0.2}', FAULT_OK),
    ]


def test_a_failing_action_is_noted_and_the_run_goes_on(tmp_path):
    recorder = Recorder("failed: connection refused")
    rows = run_drill(tmp_path, recorder)
    assert len(rows) == 3 and "kill" in rows[1].note and "failed: connection refused" in rows[1].note
    assert {(r.outcome, r.detail) for r in recorder.recorded} == {(FAULT_FAILED, "connection refused")}


def test_without_an_admin_url_the_stages_run_without_actions(tmp_path, caplog):
    recorder = Recorder()
    rows = run_drill(tmp_path, recorder, admin_url="")
    assert recorder.sent == [] and rows[1].note == "fault: skipped (no --sim-admin-url)"
    assert [(r.path, r.outcome, r.detail) for r in recorder.recorded] == [
        ("/admin/replicas/0/kill", FAULT_SKIPPED, "no --sim-admin-url"),
        ("/admin/faults", FAULT_SKIPPED, "no --sim-admin-url"),
    ]
    assert sum("no --sim-admin-url" in r.message for r in caplog.records) == 1


def test_post_reports_an_unreachable_admin_api_without_raising():
    outcome = post("http://127.0.0.1:9", FaultAction("/admin/faults/clear"), timeout=1.0)
    assert outcome.startswith("failed: ")


def test_fault_rows_land_in_the_run_folder_and_load_back_typed(tmp_path):
    """The default recorder appends to the active run folder's faults.csv, which analysis loads as typed rows."""
    recorder = Recorder()
    runfolder.set_active(runfolder.ActiveRun(tmp_path, 0.0))
    try:
        runner = ActionRunner(spawn=lambda work: work(), send=recorder.send, sleep=lambda s: None, wall=lambda: 123.5)
        runner.start("http://127.0.0.1:9", "kill", (FaultAction("/admin/replicas/0/kill"),), lambda text: None, 2)
    finally:
        runfolder.set_active(None)
    with open(tmp_path / runfolder.FAULTS, newline="") as f:
        rows = list(csv.reader(f))
    assert tuple(rows[0]) == runfolder.FAULT_COLUMNS
    assert rows[1] == ["123.5", "2", "kill", "POST", "/admin/replicas/0/kill", "{}", "ok", ""]
