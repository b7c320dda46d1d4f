"""The generator's side: scraper into server_metrics.csv, the exporter's /metrics, the self-check."""

from __future__ import annotations

import csv
import json
import socket
import time
import urllib.request

import gevent
import pandas as pd
import pytest
from gevent.monkey import get_original

from loadline.analysis.verdict import validity
from loadline.analysis.verdict.generator import is_saturated, watch_rests
from loadline.core.errors import UsageError
from loadline.core.records import COLUMNS, RequestRecord
from loadline.core.runfolder import GENERATOR_COLUMNS, SERVER_METRIC_COLUMNS, SERVER_METRICS
from loadline.runtime.exporter import Exporter
from loadline.runtime.scraper import SCRAPE_ERROR, Scraper, parse_url_option, scrape_targets, start_scraper
from loadline.runtime.selfcheck import SelfCheck, core_wait_ns


def _record(i: int, **kw) -> RequestRecord:
    base = dict(
        request_id=f"r{i}",
        worker_id="w1",
        user_id="u",
        user_class="Chat",
        session_id="s",
        turn=0,
        endpoint="/v1/chat/completions",
        model="m",
        start_wall=time.time(),
        ttft_ms=120.0,
        e2e_ms=900.0,
        output_tokens=10,
        itl_us="20000 30000 25000",
    )
    base.update(kw)
    return RequestRecord(**base)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def exporter():
    exp = Exporter(0, addr="127.0.0.1")
    yield exp
    exp.close()


def test_exporter_counts_records_of_every_shape(exporter):
    rec = _record(1)
    as_dict = dict(zip(COLUMNS, _record(2).to_row()))
    row = _record(3, status="error", error_class="timeout", ttft_ms=None, output_tokens=0, itl_us="").to_row()
    assert exporter.observe_records([rec, row, as_dict], now=1000.0) == 3
    text = exporter.text()
    assert 'loadline_requests_total{status="ok"} 2.0' in text
    assert 'loadline_errors_total{error_class="timeout"} 1.0' in text
    assert "loadline_ttft_seconds_count 2.0" in text  # the failed one had no TTFT
    assert "loadline_itl_seconds_count 6.0" in text  # every gap of the ok records
    assert "loadline_output_tokens_total 20.0" in text
    assert "loadline_requests_per_second 0.3" in text  # 3 records in the 10 s window
    exporter.tick(now=1000.0 + 11)  # the 10 s window empties
    assert "loadline_requests_per_second 0.0" in exporter.text()


def test_exporter_phase_users_cpu_and_http(exporter):
    exporter.set_users(40)
    exporter.set_phase("step-1 (10 users)", 0)
    exporter.set_phase("step-2 (20 users)", 1)
    exporter.set_worker_cpu("w1", 55.5)
    with urllib.request.urlopen(f"http://127.0.0.1:{exporter.port}/metrics", timeout=5) as response:
        text = response.read().decode()
    assert "loadline_users 40.0" in text
    assert 'loadline_phase_info{phase="step-2 (20 users)"} 1.0' in text
    assert "step-1" not in text  # only the current phase is exposed
    assert 'loadline_worker_cpu_percent{worker_id="w1"} 55.5' in text


def test_two_exporters_do_not_share_a_registry():
    a, b = Exporter(), Exporter()
    a.set_users(3)
    assert "loadline_users 3.0" in a.text() and "loadline_users 0.0" in b.text()


def test_scraper_writes_long_rows_and_records_failures(tmp_path, exporter):
    exporter.set_users(7)
    dead = f"http://127.0.0.1:{_closed_port()}/metrics"
    scraper = Scraper(
        tmp_path, {"generator": f"http://127.0.0.1:{exporter.port}/metrics", "gateway": dead}, timeout_s=1.0
    )
    rows = scraper.scrape_once()
    assert scraper.errors == 1
    by_metric = {(r[1], r[2]): r for r in rows}
    assert by_metric[("generator", "loadline_users")][4] == 7.0
    error = by_metric[("gateway", SCRAPE_ERROR)]
    assert error[4] == 1.0 and "reason" in json.loads(error[3])


def test_scraper_greenlet_runs_and_stops_bounded(tmp_path, exporter):
    dead = f"http://127.0.0.1:{_closed_port()}/metrics"
    handle = start_scraper(
        tmp_path, {"target": f"http://127.0.0.1:{exporter.port}/metrics", "down": dead}, interval_s=0.2, timeout_s=0.5
    )
    gevent.sleep(0.7)
    started = time.monotonic()
    handle.stop()
    assert time.monotonic() - started < 30  # bounded (a hang is the failure), not a speed check
    with open(tmp_path / SERVER_METRICS) as f:
        table = list(csv.reader(f))
    assert tuple(table[0]) == SERVER_METRIC_COLUMNS
    df = pd.DataFrame(table[1:], columns=table[0])
    assert df[df["metric"] == "loadline_users"]["ts"].nunique() >= 2  # several scrapes, plus the final one
    assert (df[df["source"] == "down"]["metric"] == SCRAPE_ERROR).all()
    assert all(lab == json.dumps(json.loads(lab), sort_keys=True, separators=(",", ":")) for lab in df["labels"])


def test_scrape_url_option():
    assert parse_url_option(["http://a/metrics", "dcgm=http://b:9400/metrics"]) == {
        "target": "http://a/metrics",
        "dcgm": "http://b:9400/metrics",
    }
    with pytest.raises(UsageError):
        parse_url_option(["gw=ftp://x"])
    assert scrape_targets("", "http://127.0.0.1:8000/") == {"target": "http://127.0.0.1:8000/metrics"}
    assert scrape_targets("dcgm=http://h:9400/metrics,http://n:9100/metrics", "http://x") == {
        "target": "http://x/metrics",
        "dcgm": "http://h:9400/metrics",
        "extra": "http://n:9100/metrics",
    }
    assert scrape_targets("none", "http://x") == {}


def test_self_check_samples_cpu_and_loop_lag():
    check = SelfCheck("w7", interval_s=0.05, users_fn=lambda: 12, inflight_fn=lambda: 1 / 0).start()
    gevent.sleep(0.3)
    check.stop()
    rows = check.sample_rows()
    assert len(rows) >= 2 and check.sample_rows() == []
    row = dict(zip(GENERATOR_COLUMNS, rows[-1]))
    assert row["worker_id"] == "w7" and row["users"] == 12 and row["inflight"] is None
    assert row["cpu_percent"] >= 0 and row["loop_lag_ms"] >= 0
    assert 0 <= row["cpu_wait_percent"] <= 100  # Linux: the main thread's wait for a core (schedstat)


@pytest.mark.parametrize("text, expected", [(b"123 4567 89\n", 4567), (b"123\n", None), (b"x y z\n", None)])
def test_core_wait_reads_the_schedulers_run_delay(tmp_path, text, expected):
    path = tmp_path / "schedstat"
    path.write_bytes(text)
    assert core_wait_ns(str(path)) == expected
    assert core_wait_ns(str(tmp_path / "absent")) is None  # not Linux: no wait column, CPU alone judges


@pytest.mark.parametrize(
    "probe, expected", [(lambda: True, 1), (lambda: False, 0), (lambda: None, None), (lambda: 1 / 0, None)]
)
def test_self_check_rows_say_whether_the_first_bytes_watch_rested(probe, expected):
    """body_reader.watch_resting: True while resting, False while watching, None without a watch; a
    probe that raises is a gap in the column, never a dead self-check."""
    check = SelfCheck("w3", interval_s=0.02, watch_fn=probe).start()
    gevent.sleep(0.1)
    check.stop()
    rows = [dict(zip(GENERATOR_COLUMNS, row)) for row in check.sample_rows()]
    assert len(rows) >= 2 and all(row["watch_resting"] == expected for row in rows)
    assert all(row["worker_id"] == "w3" for row in rows)


@pytest.mark.parametrize(
    "resting, said",
    [
        ([0] * 5 + [1] * 10 + [0] * 5, "rested ~10 s of 20 s from t=5 s"),
        ([None] * 4 + [1] * 3 + [0] * 13, "rested ~3 s of 16 s from t=4 s"),  # no watch before the first reply
        ([1] * 20, "rested ~20 s of 20 s from t=0 s"),
        ([0] * 20, None),
        ([None] * 20, None),  # LOADLINE_FIRST_BYTES_WATCH=0
    ],
)
def test_a_rested_watch_is_a_validity_note_with_how_long_and_from_when(resting, said):
    gen = _gen([30] * 20, resting=resting)
    lines = watch_rests(gen)
    if said is None:
        assert lines == []
    else:
        assert len(lines) == 1 and said in lines[0] and lines[0].startswith("worker w0: ")
    requests = pd.DataFrame(columns=["status", "start_wall", "ttft_ms", "read_delay_ms"])
    result = validity.assess(requests, pd.DataFrame(columns=["label", "start_wall", "end_wall"]), gen, [], 1.0)
    notes = [f for f in result["findings"] if f["kind"] == "watch-rested"]
    assert [f["severity"] for f in notes] == ([] if said is None else ["note"])
    assert result["generator"]["watch_rested"] == lines and result["confidence_steps"] == 0  # a note, no step down
    assert watch_rests(gen.drop(columns=["watch_resting"])) == []  # folders from before the column


def test_self_check_sees_a_blocked_event_loop():
    check = SelfCheck("w1", interval_s=0.02).start()
    gevent.sleep(0.05)
    busy_until = time.perf_counter() + 0.1
    while time.perf_counter() < busy_until:  # blocks the hub (time.sleep may be gevent's once locust patched it)
        pass
    gevent.sleep(0.05)
    check.stop()
    assert max(r[3] for r in check.sample_rows()) >= 50


def _gen(
    cpu: list[float],
    lag: list[float] | None = None,
    wait: list[float | None] | None = None,
    resting: list[int | None] | None = None,
) -> pd.DataFrame:
    lag = lag or [1.0] * len(cpu)
    wait = wait or [None] * len(cpu)
    resting = resting or [None] * len(cpu)
    return pd.DataFrame(
        [
            (1000.0 + i, "w0", c, lag_ms, 10, 10, w, r)
            for i, (c, lag_ms, w, r) in enumerate(zip(cpu, lag, wait, resting))
        ],
        columns=list(GENERATOR_COLUMNS),
    )


def test_is_saturated_needs_a_sustained_stretch():
    assert is_saturated(_gen([30] * 20)) == (False, [])
    assert not is_saturated(_gen([30] * 8 + [100, 100] + [30] * 10))[0]  # a blip
    hot, evidence = is_saturated(_gen([30] * 8 + [97] * 8 + [30] * 4))
    assert hot and "worker w0" in evidence[0]
    assert is_saturated(_gen([30] * 20, [2] * 10 + [60] * 10))[0]  # loop lag alone
    assert is_saturated(None) == (False, [])


@pytest.mark.parametrize(
    "cpu, wait, saturated",
    [
        (60, 35, True),  # a starved worker: it got 60 % of a core and waited for it 35 % of the time
        (45, 50, True),
        (60, 20, False),  # 20 % idle: room for bursts
        (85, 0, False),
        (30, None, False),  # no wait column (an older folder, or not Linux): CPU alone
        (95, None, True),
    ],
)
def test_is_saturated_counts_the_time_spent_waiting_for_a_core(cpu, wait, saturated):
    hot, evidence = is_saturated(_gen([cpu] * 10, wait=[wait] * 10))
    assert hot == saturated
    if saturated and wait:
        assert f"waiting for a core a neighbour held {wait} %" in evidence[0]
    old_folder = _gen([cpu] * 10).drop(columns=["cpu_wait_percent"])
    assert is_saturated(old_folder)[0] == (cpu >= 90)


def test_grafana_dashboard_uses_only_exported_metric_names():
    import re
    from pathlib import Path

    dashboard = json.loads((Path(__file__).resolve().parents[2] / "deploy/grafana/loadline-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {name for e in exprs for name in re.findall(r"\bloadline_[a-z0-9_]+", e)}
    exp = Exporter()
    exp.observe_records([_record(1), _record(2, status="error", error_class="http")])
    exp.set_phase("p", 0)
    exp.set_worker_cpu("w", 1)
    exposed = {
        line.split("{")[0].split(" ")[0] for line in exp.text().splitlines() if line and not line.startswith("#")
    }
    assert used and used <= exposed, used - exposed


def test_generator_writer_appends_to_the_active_run_and_feeds_the_exporter(tmp_path, exporter):
    from types import SimpleNamespace

    from loadline.core import runfolder
    from loadline.runtime.selfcheck import GeneratorWriter

    writer = GeneratorWriter(SimpleNamespace(loadline_exporter=exporter))
    assert writer.write([(time.time(), "w1", 50.0, 1.0, 3, None)]) == 0  # no run yet: dropped
    runfolder.set_active(runfolder.ActiveRun(tmp_path, time.time()))
    try:
        assert writer.write([(time.time(), "w1", 42.0, 1.5, 3, None), (time.time(), "w2", 97.0, 30.0, 3, None)]) == 2
    finally:
        runfolder.set_active(None)
    df = pd.read_csv(tmp_path / runfolder.GENERATOR_METRICS)
    assert list(df.columns) == list(GENERATOR_COLUMNS) and df["worker_id"].tolist() == ["w1", "w2"]
    assert 'loadline_worker_cpu_percent{worker_id="w2"} 97.0' in exporter.text()


def test_exporter_install_counts_observed_batches_and_users():
    from types import SimpleNamespace

    from loadline.runtime import exporter as exporter_module

    env = SimpleNamespace(runner=SimpleNamespace(user_count=9), loadline_observers=[])
    exp = exporter_module.install(env, 0, addr="127.0.0.1")
    try:
        assert env.loadline_exporter is exp and len(env.loadline_observers) == 1
        env.loadline_observers[0]([_record(1).to_row()])
        gevent.sleep(0.05)  # let the ticker run once
        text = exp.text()
        assert "loadline_users 9.0" in text and 'loadline_requests_total{status="ok"} 1.0' in text
    finally:
        exp.close()


def test_master_collects_worker_rows_from_their_reports(tmp_path):
    from types import SimpleNamespace

    from loadline.core import runfolder
    from loadline.runtime.selfcheck import REPORT_KEY, install_master

    class Hook:  # Locust's EventHook, without importing Locust (it monkey-patches the process)
        def __init__(self):
            self.listeners = []

        def add_listener(self, fn):
            self.listeners.append(fn)

        def fire(self, **kwargs):
            for fn in self.listeners:
                fn(**kwargs)

    env = SimpleNamespace(events=SimpleNamespace(worker_report=Hook()))
    install_master(env)
    runfolder.set_active(runfolder.ActiveRun(tmp_path, time.time()))
    try:
        env.events.worker_report.fire(client_id="w9", data={REPORT_KEY: [(time.time(), "w9", 93.0, 4.0, 20, None)]})
        env.events.worker_report.fire(client_id="w9", data={"other": 1})  # a report without rows
    finally:
        runfolder.set_active(None)
    df = pd.read_csv(tmp_path / runfolder.GENERATOR_METRICS)
    assert df["worker_id"].tolist() == ["w9"] and df["cpu_percent"].tolist() == [93.0]
    assert env.loadline_generator_writer.latest_cpu == {"w9": 93.0}


def test_a_large_page_is_parsed_without_holding_the_token_reads(tmp_path):
    """The scraper shares the loop with the users' reads: a page that takes ~100 ms to parse must let
    a stream's reads run all along (scraper.PARSE_SLICE_S), not stall every stream for the whole parse."""
    from gevent.event import Event
    from gevent.pywsgi import WSGIServer

    from loadline.runtime.promtext import text_to_rows

    family = (
        "# TYPE m{i} histogram\n"
        + "".join(f'm{{i}}_bucket{{{{le="{b}"}}}} {b}\n' for b in range(1, 30))
        + 'm{i}_bucket{{le="+Inf"}} 30\nm{i}_sum 1\nm{i}_count 30\n'
    )
    page = "".join(family.format(i=i) for i in range(150)).encode()  # 150 histograms, 4,800 samples
    started = time.perf_counter()
    whole = text_to_rows(page.decode(), 0.0, "target")
    parse_s = time.perf_counter() - started
    server = WSGIServer(
        ("127.0.0.1", 0), lambda env, reply: (reply("200 OK", [("Content-Type", "text/plain")]), [page])[1], log=None
    )
    server.start()
    ticks: list[float] = []
    done = Event()
    # a stream's bytes: an OS thread writes a byte every 0.5 ms, a greenlet reads them as they come
    # (woken by the loop's poll of its socket, as the body reader is: a callback-only yield would not do)
    theirs, ours = socket.socketpair()
    writing = [True]
    pause = get_original("time", "sleep")

    def server_writes() -> None:
        for _ in range(20_000):  # bounded: 10 s at most
            if not writing[0]:
                return
            ours.send(b"x")
            pause(0.0005)

    def other_streams() -> None:
        for _ in range(10**6):  # bounded: the scrape ends long before
            theirs.recv(65536)
            ticks.append(time.perf_counter())  # the last one after the scrape: a stall to its end counts
            if done.is_set():
                return

    get_original("_thread", "start_new_thread")(server_writes, ())
    reader = gevent.spawn(other_streams)
    try:
        rows = Scraper(tmp_path, {"target": f"http://127.0.0.1:{server.server_port}/metrics"}).scrape_once()
    finally:
        done.set()
        reader.join(5)
        writing[0] = False
        server.stop()
        theirs.close()
        ours.close()
    assert len(rows) == len(whole) + 1 == 4801  # every sample, plus the scrape's duration row
    longest_stall = max(b - a for a, b in zip(ticks, ticks[1:]))
    assert longest_stall < parse_s / 4, (longest_stall, parse_s)
