"""Every worker accounted for: silent workers, users that fail at start, options the master replaced,
and phases a worker left short set aside from the knee, break point and max compliant load."""

from __future__ import annotations

import json
from types import SimpleNamespace

import gevent
import pytest
from locust import User, task
from locust.event import Events
from surfaces import assert_surfaces_agree
from synthetic import stepped_run

from loadline.analysis.report.build import build_report
from loadline.analysis.report.workers import worker_lines
from loadline.analysis.stats import short_phases
from loadline.core.answer import Answer
from loadline.core.schema import PhaseRow
from loadline.core.slo import SLO
from loadline.runtime import fleet as fleet_mod
from loadline.runtime import plugin, worker_checks
from loadline.runtime.silence import EXPECTED_MIN, Activity, SilenceRule


# --- the silence rule ------------------------------------------------------------------------------
def _simulate(users, cycle_s, interval_s, silent=(), join_at=None, seconds=600.0, poll_s=1.0):
    """Workers whose users each finish one request per `cycle_s` (think + duration), shipped every
    `interval_s`; `silent` ones never ship; `join_at`: {worker: time its users start}. Returns
    {worker: time flagged}."""
    rule = SilenceRule(interval_s)
    finished = dict.fromkeys(range(len(users)), 0.0)
    shipped = dict.fromkeys(range(len(users)), 0)
    flagged = {}
    last_ship = 0.0
    now = 0.0
    for _ in range(int(seconds / poll_s)):  # bounded: one poll per step
        now += poll_s
        for w, u in enumerate(users):
            start = (join_at or {}).get(w, 0.0)
            if now > start and w not in silent:
                finished[w] = u * (now - start) / cycle_s
        if now - last_ship >= interval_s:
            last_ship = now
            shipped = {w: int(finished[w]) for w in finished}
        active = [
            Activity(f"n{w}", f"w{w}", u if now > (join_at or {}).get(w, 0.0) else 0, shipped[w])
            for w, u in enumerate(users)
        ]
        for found in rule.update(now, active):
            flagged[int(found.worker[1:])] = (now, found)
    return flagged


@pytest.mark.parametrize("workers", [2, 3, 4])
@pytest.mark.parametrize("cycle_s", [0.5, 3.0, 20.0])
@pytest.mark.parametrize("interval_s", [1.0, 5.0])
def test_a_silent_worker_is_flagged_once_after_its_window_and_no_healthy_one(workers, cycle_s, interval_s):
    users = [4] * workers
    flagged = _simulate(users, cycle_s, interval_s, silent={1}, seconds=max(120.0, 80 * cycle_s))
    assert set(flagged) == {1}
    at, found = flagged[1]
    assert found.expected >= EXPECTED_MIN and at >= 2 * cycle_s  # never before two of its users' cycles
    assert found.quiet_s >= found.window_s
    assert "ran 4 user(s) but sent no records" in found.reason


@pytest.mark.parametrize("cycle_s", [1.0, 30.0, 120.0])
def test_long_think_times_and_one_user_workers_are_not_silent(cycle_s):
    """One user with a 2-minute cycle sends a record every 2 minutes: its quiet spells are normal."""
    assert _simulate([1, 1, 1], cycle_s, 1.0, seconds=40 * cycle_s) == {}


def test_a_worker_that_gets_users_late_is_judged_from_then_and_a_single_worker_never():
    assert _simulate([4, 4], 2.0, 1.0, join_at={1: 60.0}, seconds=200.0) == {}
    assert _simulate([4], 2.0, 1.0, silent={0}) == {}  # nobody to compare with
    late_and_silent = _simulate([4, 4], 2.0, 1.0, silent={1}, join_at={1: 60.0}, seconds=200.0)
    assert late_and_silent[1][0] > 60.0 + 2 * 2.0


def test_a_worker_that_sends_nothing_at_all_is_lost_not_silent():
    """Killed: no empty batches, no clock replies. The heartbeats declare it lost a few seconds later;
    calling it silent first would stop a run that a lost worker must not stop."""
    rule = SilenceRule(1.0)
    for t in range(1, 300):
        dead = Activity("b", "b", 4, 0, heard_s_ago=float(t))
        assert rule.update(float(t), [Activity("a", "a", 4, t * 10), dead]) == []
    alive = SilenceRule(1.0)
    flagged = [
        alive.update(float(t), [Activity("a", "a", 4, t * 10), Activity("b", "b", 4, 0, 0.8)]) for t in range(1, 30)
    ]
    assert sum(map(len, flagged)) == 1


def test_a_worker_with_no_users_is_not_silent():
    rule = SilenceRule(1.0)
    for t in range(1, 300):
        assert rule.update(float(t), [Activity("a", "a", 4, t * 10), Activity("b", "b", 0, 0)]) == []


# --- users that fail at start ------------------------------------------------------------------------
class _Chat(User):
    @task
    def noop(self):
        pass


def test_users_failing_at_start_are_reported_once_with_their_count_and_task_errors_are_not():
    sent = []
    env = SimpleNamespace(events=Events(), runner=SimpleNamespace(target_user_count=4))
    watch = worker_checks.StartFailures(
        env, "host-1-ab", report=lambda *a, **k: sent.append((a, k)), grace_s=0.05
    ).install()
    user = object.__new__(_Chat)  # the User itself, as Locust's User.run fires it when on_start raised
    env.events.user_error.fire(user_instance=SimpleNamespace(), exception=ValueError("a task's"), tb=None)
    for _ in range(3):
        env.events.user_error.fire(user_instance=user, exception=OSError("no such file: prompts.jsonl"), tb=None)
    gevent.sleep(0.2)
    [(args, kwargs)] = sent
    assert args[1:] == (
        "host-1-ab",
        "3 of 4 user(s) failed at start: _Chat.on_start raised OSError: no such file: prompts.jsonl",
    )
    assert kwargs == {"kind": "users failed at start", "users_short": 3}
    env.events.test_start.fire()
    assert watch.failed == 0


def test_worker_error_without_allow_partial_stops_the_run_with_exit_2_naming_the_worker():
    quits = []
    runner = SimpleNamespace(quit=lambda: quits.append(1), target_user_count=8, clients=SimpleNamespace(all=[]))
    env = SimpleNamespace(runner=runner, web_ui=None, process_exit_code=None, parsed_options=SimpleNamespace())
    watch = fleet_mod.Fleet(env, active=lambda: True)
    data = {"worker": "h-2-cd", "reason": "4 of 4 user(s) failed at start: x", "kind": "users failed at start"}
    watch.on_error(env, SimpleNamespace(data={**data, "users_short": 4}, node_id="n2"))
    gevent.sleep(0)
    assert env.process_exit_code == 2 and quits == [1]
    [error] = watch.manifest_fields([])["worker_errors"]
    assert error["worker"] == "h-2-cd" and error["kind"] == "users failed at start"


def _phase(index, label, start, end):
    return PhaseRow(index, label, "step", start, end, 4, 4.0, 4, 4)


def test_allow_partial_workers_goes_on_and_records_the_share_that_ran_and_the_phases_from_then():
    now = [100.0]
    notes = []
    runner = SimpleNamespace(target_user_count=8, clients=SimpleNamespace(all=[]))
    env = SimpleNamespace(
        runner=runner, web_ui=None, process_exit_code=None, parsed_options=SimpleNamespace(allow_partial_workers=True)
    )
    watch = fleet_mod.Fleet(env, active=lambda: True, wall=lambda: now[0], annotate=notes.append)
    msg = {"worker": "h-2-cd", "reason": "4 of 4 user(s) failed at start: x", "kind": "users failed at start"}
    watch.on_error(env, SimpleNamespace(data={**msg, "users_short": 4}, node_id="n2"))
    assert env.process_exit_code is None
    fields = watch.manifest_fields(
        [_phase(0, "4 users", 90, 99), _phase(1, "8 users", 99, 110), _phase(2, "x", 110, 120)]
    )
    [short] = fields["worker_shortfalls"]
    assert fields["worker_errors"] == [] and short["share_ran"] == 0.5 and short["phases"] == ["1:8 users", "2:x"]
    assert notes == ["worker h-2-cd: users failed at start"]
    line = worker_lines(fields, None, lambda: None)[0]
    assert ": users failed at start (the run went on" in line
    assert "50% of the 8 planned users ran from 00:01:40 UTC" in line and "phases set aside: 1:8 users, 2:x" in line


@pytest.mark.parametrize("allow", [False, True])
def test_the_master_finds_a_worker_that_runs_users_and_sends_nothing(allow):
    now = [0.0]
    clients = [
        SimpleNamespace(id="na", state="running", user_classes_count={"ChatUser": 3}),
        SimpleNamespace(id="nb", state="running", user_classes_count={"ChatUser": 3}),
    ]
    runner = SimpleNamespace(target_user_count=6, clients=SimpleNamespace(all=clients), quit=lambda: None)
    env = SimpleNamespace(
        runner=runner, web_ui=None, process_exit_code=None, parsed_options=SimpleNamespace(allow_partial_workers=allow)
    )
    watch = fleet_mod.Fleet(env, active=lambda: True, wall=lambda: now[0])
    for second in range(1, 120):  # a: 3 users, one record each per second; b: empty batches
        now[0] = float(second)
        watch.heard("na", "host-a", 0, batch_rows=3)
        watch.heard("nb", "host-b", 3, batch_rows=0)
        watch.check_silence()
    fields = watch.manifest_fields([])
    found = fields["worker_shortfalls"] if allow else fields["worker_errors"]
    assert [e["worker"] for e in found] == ["host-b"] and found[0]["kind"] == "sends no records"
    assert (env.process_exit_code is None) is allow
    if allow:
        assert found[0]["share_ran"] == 0.5


# --- options the master replaced ------------------------------------------------------------------
def test_loadline_options_and_their_defaults_are_known_from_the_parser():
    from locust.argument_parser import get_parser

    get_parser()  # fires init_command_line_parser: plugin._add_options records Loadline's options
    assert plugin.OPTION_DEFAULTS["max_tokens"] == 256 and "allow_partial_workers" in plugin.OPTION_DEFAULTS
    assert "api_key" in plugin.SECRET_OPTIONS and "run_time" not in plugin.OPTION_DEFAULTS


def test_a_workers_own_options_that_the_master_replaced_are_sent_without_secrets():
    defaults = {"max_tokens": 256, "api_key": "", "dataset": "", "prompt_mix": ("short",)}
    own = worker_checks.own_options(
        SimpleNamespace(max_tokens=64, api_key="sk-worker", dataset="", prompt_mix=("long",)), defaults
    )
    assert own == {"max_tokens": 64, "api_key": "sk-worker", "prompt_mix": ("long",)}
    master = SimpleNamespace(max_tokens=256, api_key="sk-master", dataset="", prompt_mix=["long"])  # msgpack: a list
    differ = worker_checks.replaced(own, master, frozenset({"api_key"}))
    assert differ == {"max_tokens": [64, 256], "api_key": ["(secret)", "(secret)"]}
    sent = []
    env = SimpleNamespace(
        events=Events(),
        parsed_options=SimpleNamespace(max_tokens=64, api_key="", dataset="", prompt_mix=("short",)),
        runner=SimpleNamespace(send_message=lambda kind, data: sent.append((kind, data))),
    )
    check = worker_checks.OptionCheck(env, "host-3-ef", defaults, frozenset({"api_key"})).install()
    env.parsed_options.max_tokens = 128  # the master's value arrives with the spawn message
    env.events.test_start.fire()
    assert sent == [(fleet_mod.OPTIONS_MSG, {"worker": "host-3-ef", "differ": {"max_tokens": [64, 128]}})]
    env.parsed_options.max_tokens = 64
    assert check.check() == {}  # the same value: nothing to say


def test_the_master_writes_replaced_options_in_the_manifest_and_the_report_names_them():
    env = SimpleNamespace(runner=SimpleNamespace(clients=SimpleNamespace(all=[])), parsed_options=None)
    watch = fleet_mod.Fleet(env, active=lambda: True)
    data = {"worker": "host-3-ef", "differ": {"max_tokens": [64, 128]}}
    watch.on_options(env, SimpleNamespace(data=data, node_id="n3"))
    fields = watch.manifest_fields([])
    assert fields["worker_option_mismatches"] == {"host-3-ef": {"max_tokens": [64, 128]}}
    assert worker_lines(fields, None, lambda: None) == [
        "Worker host-3-ef was started with its own option values, replaced by the master's: "
        "--max-tokens 64 (ran with 128)"
    ]


# --- phases a worker left short, in the verdict ----------------------------------------------------
def test_short_phases_are_marked_and_only_they_are_left_out():
    import pandas as pd

    table = pd.DataFrame({"phase_index": [0, 1, 2], "label": ["a", "b", "c"]})
    manifest = {
        "workers_lost": [{"worker": "w1", "lost_at": 3600.0, "phases": ["1:b"]}, "old-bare-id"],
        "workers_back": [{"worker": "w2", "lost_at": 0.0, "rejoined_at": 5.0, "phases": ["1:b"]}],
        "worker_shortfalls": [{"worker": "w3", "kind": "sends no records", "share_ran": 0.75, "phases": ["2:c"]}],
    }
    marked = short_phases.mark(table, manifest)
    assert marked[short_phases.COLUMN].tolist() == [
        "",
        "worker w1 lost at 01:00:00 UTC; worker w2 missing from 00:00:00 UTC to 00:00:05 UTC",
        "worker w3 sends no records: 75% of the planned users ran",
    ]
    assert short_phases.judged(marked)["label"].tolist() == ["a"]
    assert short_phases.COLUMN not in short_phases.mark(table, {"workers_lost": ["bare"]})


def _stepped_with_loss(tmp_path, lost_phase):
    run_dir = stepped_run(tmp_path / "run", (2, 4, 8, 16, 32), step_s=20)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest.update(status="finished", ended_by="test")
    if lost_phase:
        manifest["workers_lost"] = [
            {
                "worker": "node-1-abcd",
                "how": "missing",
                "lost_at": 1_700_000_070.0,
                "last_seen": 1_700_000_066.0,
                "in_flight": 1,
                "requests_lost_estimate": 2,
                "phases": [lost_phase],
            }
        ]
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    return run_dir


def test_a_phase_hit_by_a_lost_worker_is_not_the_knee_and_every_surface_says_so(tmp_path):
    whole = build_report(_stepped_with_loss(tmp_path / "whole", None), SLO(), charts=False)
    knee = whole.verdict["answer"]["knee"]
    assert knee["found"] and knee["load"]["phase"] == "step-3 (8 users)"  # the knee of the full run
    assert "Phases set aside" not in whole.summary and whole.verdict["answer"]["set_aside"] == []

    run_dir = _stepped_with_loss(tmp_path / "hit", "2:step-3 (8 users)")
    result = build_report(run_dir, SLO(), charts=False)
    answer = Answer.from_dict(result.verdict["answer"])
    assert answer.knee.found and answer.knee.load.phase != "step-3 (8 users)"
    [aside] = answer.set_aside
    assert aside.phase == "2:step-3 (8 users)" and "worker node-1-abcd lost" in aside.reason
    assert "knee" in aside.would_be
    assert answer.trust.value == "doubtful" and "ran below their planned users" in answer.trust_reasons[-1]
    row = next(p for p in result.verdict["phases"] if p["label"] == "step-3 (8 users)")
    assert row["workers_short"].startswith("worker node-1-abcd lost at ")
    assert "| worker node-1-abcd lost at" in result.summary  # the phase table's own row says it
    assert_surfaces_agree(run_dir, result.exit_code)
    assert "it would have been the knee" in (run_dir / "report" / "report.html").read_text()


def test_loadline_run_ends_with_the_workers_reason_when_the_master_stopped_on_it(tmp_path):
    from loadline.commands import run_outcome

    (tmp_path / "manifest.json").write_text(
        json.dumps({"status": "failed", "worker_errors": [{"worker": "h-1-ab", "reason": "2 of 2 user(s) failed"}]})
    )
    assert run_outcome.worker_error_of(tmp_path) == "worker h-1-ab cannot run: 2 of 2 user(s) failed"
    (tmp_path / "manifest.json").write_text(json.dumps({"status": "finished", "worker_errors": []}))
    assert run_outcome.worker_error_of(tmp_path) == ""
    assert run_outcome.worker_error_of(tmp_path / "absent") == ""


def test_a_headless_shape_run_is_ended_by_its_shape_and_quit_only_if_the_shape_is_stuck(monkeypatch):
    monkeypatch.setattr(fleet_mod, "SHAPE_STOP_WAIT_S", 0.05)
    quits = []
    shape = SimpleNamespace(tick=lambda: (4, 1.0))
    busy = gevent.spawn(gevent.sleep, 5)
    try:
        runner = SimpleNamespace(shape_greenlet=busy, state="running", quit=lambda: quits.append(1))
        fleet_mod.quit_headless(SimpleNamespace(runner=runner, shape_class=shape))
        assert shape.tick() is None and quits == []  # the shape's next tick ends the run
        runner.state = "stopping"  # ...as Locust's shape worker does
        gevent.sleep(0.1)
        assert quits == []
        runner.state = "running"  # a shape greenlet stuck in a long ramp: quit from here
        fleet_mod.quit_headless(SimpleNamespace(runner=runner, shape_class=shape))
        gevent.sleep(0.1)
        assert quits == [1]
    finally:
        busy.kill()
    no_shape = SimpleNamespace(runner=SimpleNamespace(shape_greenlet=None, quit=lambda: quits.append(2)))
    fleet_mod.quit_headless(no_shape)
    gevent.sleep(0)
    assert quits == [1, 2]
