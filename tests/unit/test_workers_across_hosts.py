"""Workers on other hosts: clock offsets (NTP style), lost workers, worker errors, unique worker ids."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import gevent
import pandas as pd
import pytest

from loadline.analysis.report.workers import worker_lines
from loadline.core import identity
from loadline.core.records import COLUMNS
from loadline.core.schema import PhaseRow
from loadline.runtime import clocksync
from loadline.runtime import fleet as fleet_mod
from loadline.runtime.clocksync import ClockSample, ClockSync, OffsetEstimate, offset_warnings
from loadline.runtime.collector import START_WALL, WALL_COLUMNS
from loadline.runtime.transport import RecordBuffer


def _sample(true_offset: float, out_s: float, back_s: float, t1: float = 1000.0, busy_s: float = 0.001) -> ClockSample:
    """A probe with `out_s` on the way to the worker and `back_s` on the way back (master clock)."""
    t2 = t1 + out_s + true_offset
    t3 = t2 + busy_s
    t4 = t1 + out_s + busy_s + back_s
    return ClockSample(t1, t2, t3, t4)


def test_ntp_offset_is_exact_for_a_symmetric_path_and_off_by_half_the_asymmetry():
    assert _sample(2.0, 0.005, 0.005).offset_s == pytest.approx(2.0)
    assert _sample(-3.0, 0.005, 0.005).offset_s == pytest.approx(-3.0)
    lopsided = _sample(2.0, 0.100, 0.002)
    assert lopsided.offset_s == pytest.approx(2.0 + 0.049)
    assert lopsided.delay_s == pytest.approx(0.102)
    assert abs(lopsided.offset_s - 2.0) <= lopsided.delay_s / 2  # the error bound the manifest reports


def test_estimate_keeps_the_smallest_round_trip_of_the_recent_samples():
    estimate = OffsetEstimate(window=3)
    estimate.add(_sample(2.0, 0.200, 0.001))  # a busy worker answered late: poor sample
    estimate.add(_sample(2.0, 0.001, 0.001))
    estimate.add(_sample(2.0, 0.050, 0.001))
    assert estimate.offset_s == pytest.approx(2.0)
    # the clock is stepped: once the good old sample leaves the window, the new offset wins
    for _ in range(3):
        estimate.add(_sample(5.0, 0.002, 0.002))
    assert estimate.offset_s == pytest.approx(5.0)
    assert estimate.summary()["samples"] == 6


class _Runner:
    def __init__(self, clients=()):
        self.handlers, self.sent = {}, []
        self.clients = SimpleNamespace(all=list(clients))

    def register_message(self, kind, handler, concurrent=False):
        self.handlers[kind] = handler

    def send_message(self, kind, data=None, client_id=None):
        self.sent.append((kind, data, client_id))


def test_master_probe_and_worker_reply_give_the_worker_offset_and_correct_rows():
    master_now = [1000.0]
    master = _Runner([SimpleNamespace(id="node-a", state="running"), SimpleNamespace(id="node-b", state="missing")])
    sync = ClockSync(master, wall=lambda: master_now[0])
    master.register_message(clocksync.REPLY_MSG, sync.on_reply)
    sync.ready.update({"node-a", "node-b"})
    sync.probe_all()
    assert [(kind, client) for kind, _, client in master.sent] == [
        (clocksync.PROBE_MSG, "node-a")
    ]  # not the missing one
    worker = _Runner()
    clocksync.install_worker(
        worker, "host-1-abcd", lambda: {"in_flight": 3, "unshipped": 7}, wall=lambda: 1000.0 + 0.002 - 3.0
    )  # the worker's clock is 3 s behind
    assert worker.sent == [(clocksync.READY_MSG, {"worker": "host-1-abcd"}, None)]  # after its handler
    probe = master.sent[0][1]
    worker.handlers[clocksync.PROBE_MSG](environment=None, msg=SimpleNamespace(data=probe))
    master_now[0] = 1000.004
    kind, reply, _ = worker.sent[1]
    assert reply["in_flight"] == 3 and reply["worker"] == "host-1-abcd"
    sync.on_reply(environment=None, msg=SimpleNamespace(data=reply, node_id="node-a"))
    assert sync.offset("host-1-abcd") == pytest.approx(-3.0)
    row = [None] * len(COLUMNS)
    row[START_WALL] = 1497.0  # worker clock
    row[COLUMNS.index("due_wall")] = 1496.5  # open loop: when the schedule said it was due
    sync.correct("host-1-abcd", [row], WALL_COLUMNS)
    assert row[START_WALL] == pytest.approx(1500.0) and row[COLUMNS.index("due_wall")] == pytest.approx(1499.5)
    closed_loop = [None] * len(COLUMNS)
    closed_loop[START_WALL] = 1497.0
    sync.correct("host-1-abcd", [closed_loop], WALL_COLUMNS)
    assert closed_loop[COLUMNS.index("due_wall")] is None
    # rows of a worker never probed stay as they are, and are counted
    other = [None] * len(COLUMNS)
    other[START_WALL] = 10.0
    sync.correct("host-2-ffff", [other], WALL_COLUMNS)
    assert other[START_WALL] == 10.0 and sync.manifest(set())["host-2-ffff"]["rows_uncorrected"] == 1
    # generator rows carry their worker id: each is corrected by its own worker's offset
    assert sync.correct_each([(1497.0, "host-1-abcd", 50.0)], 1, 0)[0][0] == pytest.approx(1500.0)


def test_offset_warning_against_the_shortest_phase():
    offsets = {"w1": {"offset_s": 2.0, "uncertainty_ms": 0.4}, "w2": {"offset_s": 0.01, "uncertainty_ms": 0.4}}
    warnings = offset_warnings(offsets, shortest_phase_s=10.0, fraction=0.01)
    assert len(warnings) == 1 and "w1" in warnings[0] and "+2.000 s" in warnings[0]
    assert offset_warnings(offsets, None, 0.01) == [] and offset_warnings(offsets, 10.0, 0) == []


def _phase(index, label, start, end):
    return PhaseRow(index, label, "step", start, end, 4, 4.0, 4, 4)


def test_a_worker_marked_missing_is_recorded_once_with_its_loss_and_phases():
    now = [100.0]
    runner = _Runner([SimpleNamespace(id="node-a", state="running")])
    notes = []
    env = SimpleNamespace(runner=runner)
    watch = fleet_mod.Fleet(env, active=lambda: True, wall=lambda: now[0], annotate=notes.append)
    watch.heard("node-a", "host-1-abcd", in_flight=4, batch_rows=6)
    now[0] = 104.0
    runner.clients.all[0].state = "missing"
    [lost] = watch.check()
    assert watch.check() == []  # once
    assert (lost.worker, lost.last_seen, lost.lost_at, lost.requests_lost_estimate) == ("host-1-abcd", 100.0, 104.0, 10)
    assert notes == ["worker host-1-abcd lost"]
    fields = watch.manifest_fields(
        [
            _phase(0, "2 users", 90.0, 99.0),
            _phase(1, "4 users", 99.0, 103.0),
            _phase(2, "8 users", 103.0, 110.0),
            _phase(3, "16 users", 110.0, 120.0),
        ]
    )
    assert fields["workers_lost"][0]["phases"] == ["1:4 users", "2:8 users"]
    now[0] = 106.0
    runner.clients.all[0].state = "running"
    watch.check()
    assert watch.lost["node-a"].rejoined_at == 106.0
    fields = watch.manifest_fields([])
    assert fields["workers_lost"] == [] and fields["workers_back"][0]["worker"] == "host-1-abcd"


def test_no_loss_is_recorded_between_runs():
    runner = _Runner([SimpleNamespace(id="node-a", state="missing")])
    watch = fleet_mod.Fleet(SimpleNamespace(runner=runner), active=lambda: False)
    assert watch.check() == [] and watch.manifest_fields([])["workers_lost"] == []


def test_a_worker_error_stops_a_headless_run_with_exit_2_once():
    quits = []
    runner = SimpleNamespace(quit=lambda: quits.append(1), stop=lambda: None, clients=SimpleNamespace(all=[]))
    env = SimpleNamespace(runner=runner, web_ui=None, process_exit_code=None)
    watch = fleet_mod.Fleet(env, active=lambda: True)
    for node in ("node-a", "node-b"):
        watch.on_error(
            env, SimpleNamespace(data={"worker": node, "reason": "dataset not found: x.jsonl"}, node_id=node)
        )
    gevent.sleep(0)
    assert env.process_exit_code == 2 and quits == [1]
    assert [e["reason"] for e in watch.manifest_fields([])["worker_errors"]] == ["dataset not found: x.jsonl"] * 2


def test_worker_error_is_sent_as_one_line():
    runner = _Runner()
    fleet_mod.report_error(runner, "w", "bad\nthing   here")
    assert runner.sent == [(fleet_mod.ERROR_MSG, {"worker": "w", "reason": "bad thing here"}, None)]


def test_in_flight_counts_attempts_begun_but_not_recorded():
    buffer = RecordBuffer()
    for _ in range(3):
        buffer.begin()
    buffer.add(SimpleNamespace(to_row=lambda: [1]))
    assert buffer.in_flight == 2 and len(buffer) == 1


def test_worker_ids_differ_for_the_same_host_and_pid_and_stay_readable(monkeypatch):
    monkeypatch.setattr(identity.os, "getpid", lambda: 1)
    monkeypatch.setattr(identity.socket, "gethostname", lambda: "node-7")
    ids = set()
    for _ in range(10_000):  # a fleet far larger than any real one, all with one hostname and PID
        one = identity._Identity()
        assert re.fullmatch(r"node-7-1-[0-9a-f]{16}", one.worker_id)
        assert one.request_id().startswith(identity.request_tag_of_worker(one.worker_id))  # ties rows to ids
        ids.add(one.worker_id)
    assert len(ids) == 10_000  # 64 random bits: any repeat among 10,000 is a 3e-12 event
    assert identity.host_of_worker(one.worker_id) == "node-7"


def test_request_ids_are_the_uuids_of_the_process_base_and_counter_across_resets():
    import uuid

    one = identity._Identity()
    for _ in range(3):
        base = one._base
        for n in (1, 2, 3):
            assert one.request_id() == str(uuid.UUID(int=base | n, version=4))
        one._requests = iter([identity.COUNTER_MASK, identity.COUNTER_MASK + 6])  # the counter wraps in its group
        assert one.request_id() == str(uuid.UUID(int=base | identity.COUNTER_MASK, version=4))
        assert one.request_id() == str(uuid.UUID(int=base | 5, version=4))
        one.reset()  # as after a fork: a new base and prefix
        assert one._base != base


def test_report_lines_name_the_lost_worker_and_count_its_loss_from_the_truth_log():
    manifest = {
        "workers_lost": [
            {
                "worker": "node-1-abcd",
                "how": "missing",
                "lost_at": 3600.0,
                "last_seen": 3596.0,
                "in_flight": 2,
                "requests_lost_estimate": 3,
                "phases": ["1:4 users"],
            }
        ],
        "worker_errors": [{"worker": "node-2-ffff", "reason": "dataset not found: x.jsonl"}],
        "clock_offsets": {"node-1-abcd": {"offset_s": 2.0, "uncertainty_ms": 0.4}, "node-3-0000": {"offset_s": None}},
    }
    requests = pd.DataFrame({"request_id": ["abcd0001-x", "eeee0001-x"]})
    truth = pd.DataFrame({"request_id": ["abcd0001-x", "abcd0002-x", "abcd0003-x", "eeee0001-x"]})
    lines = worker_lines(manifest, requests, lambda: truth)
    assert lines[0].startswith(
        "Workers lost: node-1-abcd at 01:00:00 UTC (heartbeats stopped; last heard 00:59:56 UTC)"
    )
    assert "2 request(s) the server saw were never recorded (about 3 estimated)" in lines[0] and "1:4 users" in lines[0]
    assert lines[1] == "Worker node-2-ffff could not run: dataset not found: x.jsonl"
    assert "node-1-abcd +2.000 s" in lines[2] and "node-3-0000" not in lines[2]
    without_truth = worker_lines(manifest, requests, lambda: None)[0]
    assert "about 3 request(s) in flight or unshipped" in without_truth
    assert worker_lines({"workers_lost": []}, requests, lambda: None) == []
    back = worker_lines({"workers_back": [{"worker": "w", "lost_at": 0.0, "rejoined_at": 5.0}]}, requests, lambda: None)
    assert back == [
        "Workers missing for a while (heartbeats late, then back; their users were moved meanwhile): "
        "w 00:00:00 UTC to 00:00:05 UTC"
    ]


def test_a_ready_worker_gets_a_burst_of_probes_a_connected_one_none_and_a_web_ui_run_only_stops():
    """Probes go to a worker only once it said it can answer them: one sent on its connect could reach
    it before its init event registered the handler, and Locust warned 'Unknown message type received:
    loadline_clock_probe' on every worker of a --workers 2 run."""
    runner = _Runner([SimpleNamespace(id="node-y", state="ready"), SimpleNamespace(id="node-z", state="ready")])
    sync = ClockSync(runner).install()
    try:
        runner.handlers[clocksync.READY_MSG](environment=None, msg=SimpleNamespace(data={}, node_id="node-z"))
        gevent.sleep(clocksync.BURST * clocksync.BURST_SPACING_S + 0.2)
        sync.probe_all()
    finally:
        sync._greenlet.kill()
    probed = [client for kind, _, client in runner.sent if kind == clocksync.PROBE_MSG]
    assert "node-y" not in probed and probed.count("node-z") >= clocksync.BURST + 1
    stops = []
    web = SimpleNamespace(runner=SimpleNamespace(stop=lambda: stops.append(1)), web_ui=object(), process_exit_code=None)
    fleet_mod.Fleet(web, active=lambda: True).on_error(web, SimpleNamespace(data={"reason": "x"}, node_id="n"))
    gevent.sleep(0)
    assert stops == [1] and web.process_exit_code is None  # the user fixes the form and starts again


@pytest.mark.parametrize("worker", ["node-1-abcd", "node-1-0a1b2c3d", "node-1-0a1b2c3dfeedf00d"])
def test_a_lost_workers_unrecorded_requests_are_found_by_its_request_tag(worker):
    """Worker ids of every format (4 hex digits in older run folders, 64 bits now) lead to the first
    group of that worker's request ids, and only to those."""
    tag = identity.request_tag_of_worker(worker)
    manifest = {
        "workers_lost": [
            {
                "worker": worker,
                "how": "missing",
                "lost_at": 3600.0,
                "last_seen": 3596.0,
                "in_flight": 1,
                "requests_lost_estimate": 2,
                "phases": [],
            }
        ]
    }
    mine = [f"{tag}-0000-4000-8000-00000000000{i}" for i in range(1, 4)]
    other = "ffffffff-0000-4000-8000-000000000001"
    requests = pd.DataFrame({"request_id": [mine[0], other]})
    truth = pd.DataFrame({"request_id": [*mine, other]})
    (line,) = worker_lines(manifest, requests, lambda: truth)
    assert "2 request(s) the server saw were never recorded" in line


class _FullDisk:
    """A run folder's appender on a disk that fills up after `room` batches."""

    def __init__(self, room: int) -> None:
        self.room, self.rows_written, self.closed = room, 0, False

    def write_rows(self, rows: list) -> int:
        if self.room <= 0:
            raise OSError(28, "No space left on device")
        self.room -= 1
        self.rows_written += len(rows)
        return len(rows)

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("room", [0, 2])
def test_a_batch_the_disk_refused_makes_the_run_failed_not_finished(tmp_path, room: int) -> None:
    """When the end can be recorded after a failed write (giving up the columnar copy frees room),
    the manifest says the run failed and why, never `finished`: records were lost."""
    from loadline.core import runfolder
    from loadline.runtime.collector import RunCollector

    env = SimpleNamespace(
        loadline_records=SimpleNamespace(drain=lambda: []),
        loadline_live=SimpleNamespace(ingest=lambda rows: None),
        runner=None,
        parsed_options=None,
    )
    collector = RunCollector(env, distributed=False)
    collector.run_dir, collector.appender = tmp_path, _FullDisk(room)
    for _ in range(room):
        collector.write([[1], [2]], "w1")
    with pytest.raises(OSError):
        collector.write([[3], [4], [5]], "w1")
    collector.stop()
    manifest = json.loads((tmp_path / runfolder.MANIFEST).read_text())
    assert manifest["status"] == "failed" and manifest["requests_written"] == 2 * room
    assert manifest["write_error"] == "No space left on device: a batch of 3 records could not be written whole"
