"""Master and workers on different "hosts": Linux network namespaces on a private 10.x subnet.

The master and the simulator share one namespace; workers run in two others, reached over veth
pairs (a subnet that exists only inside this machine), with the exact commands of
docker-compose.yml. Two workers run as PID 1 of their own PID namespace (same hostname, same pid:
the id collision of hostNetwork pods), with clocks shifted by +2 s and -3 s (libfaketime). A third
worker is SIGKILLed mid-phase. Checked: per-phase request counts equal the simulator's truth, the
offsets are detected and corrected, the killed worker is in the manifest and the report with its
loss counted and its phase keeps its user count (--enable-rebalancing); a configuration error only
a worker sees fails the run with exit 2 and the worker's reason.

libfaketime shifts time.time() but not the kernel's socket receive stamps, so a faked worker's
kernel-clock TTFT/ITL are off by its shift (a real host's kernel and time.time() share one clock):
durations are not checked here (tests/e2e/test_kernel_clock.py does that).
Needs root and `ip netns` (skips otherwise) and Debian's faketime (`make faketime`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import deploy_helpers as dh
import pandas as pd
import pytest
from process_helpers import start, tail, wait_until
from spine_helpers import REPO, requests_so_far, requests_table, truth_table
from surfaces import assert_surfaces_agree

from loadline.core.identity import request_tag_of_worker

PREFIX = f"ll{os.getpid() % 100000}"
MASTER_NS, NS_A, NS_B = f"{PREFIX}m", f"{PREFIX}a", f"{PREFIX}b"
MASTER_IP = "10.213.1.1"  # the master's address as the workers see it; B reaches it through its own link
SHIFTS = {"ahead": "+2s", "behind": "-3s"}
SHIFT_S = {"ahead": 2.0, "behind": -3.0}
RUN_TIMEOUT_S = 120
# A request stamped before a phase boundary can reach the server after it: the client stamps, then
# sends (at load 9 on 2 cores: up to ~20 ms; a libfaketime'd worker also stalls for up to a few seconds
# now and then, which its heartbeats show too). Such sends straddle the boundary and belong to neither
# side alone; they are counted and left out. A clock error is not one: it moves every record of a worker.
MAX_SEND_S = 1.5
LIBFAKETIME = [Path(f"/usr/lib/{arch}-linux-gnu/faketime/libfaketime.so.1") for arch in ("x86_64", "aarch64")]
CONF = """\
locustfile = {repo}/locustfiles/chat.py,{repo}/locustfiles/shape.py
shape = stepped
baseline-hold = 4
step-start-users = 3
step-factor = 2
step-hold = 16
step-max-users = 6
step-stop-on-slo = false
think-mean = 0.3
think-p90 = 0.6
prompt-mix = short=1
max-tokens = 16
"""


def _libfaketime() -> str:
    return next((str(p) for p in LIBFAKETIME if p.is_file()), "")


def _sh(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, timeout=20)


def _netns_available() -> str:
    """'' when usable, else why not."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if shutil.which("ip") is None or shutil.which("unshare") is None:
        return "needs iproute2's `ip` and util-linux's `unshare`"
    if not _libfaketime():
        return "needs Debian's faketime for libfaketime (make faketime)"
    probe = f"{PREFIX}p"
    try:
        _sh("ip", "netns", "add", probe)
    except (subprocess.SubprocessError, OSError) as exc:
        return f"`ip netns add` is unavailable here: {exc}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=20)
    return ""


@pytest.fixture(scope="module")
def hosts():
    """Three namespaces: master+simulator, worker host A (10.213.1.2), worker host B (10.213.2.2)."""
    reason = _netns_available()
    if reason:
        pytest.skip(reason)
    made: list[str] = []
    try:
        for ns in (MASTER_NS, NS_A, NS_B):
            _sh("ip", "netns", "add", ns)
            made.append(ns)
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
        for n, worker_ns in ((1, NS_A), (2, NS_B)):
            master_end, worker_end = f"{PREFIX}v{n}m", f"{PREFIX}v{n}w"
            _sh("ip", "link", "add", master_end, "type", "veth", "peer", "name", worker_end)
            _sh("ip", "link", "set", master_end, "netns", MASTER_NS)
            _sh("ip", "link", "set", worker_end, "netns", worker_ns)
            _sh("ip", "-n", MASTER_NS, "addr", "add", f"10.213.{n}.1/24", "dev", master_end)
            _sh("ip", "-n", MASTER_NS, "link", "set", master_end, "up")
            _sh("ip", "-n", worker_ns, "addr", "add", f"10.213.{n}.2/24", "dev", worker_end)
            _sh("ip", "-n", worker_ns, "link", "set", worker_end, "up")
            _sh("ip", "-n", worker_ns, "route", "add", "default", "via", f"10.213.{n}.1")
        yield
    finally:
        for ns in made:  # deleting a namespace removes its veth ends too
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)


class Cluster:
    """The compose file's sim, master and worker commands, each in its namespace."""

    def __init__(self, tmp: Path, conf: Path, workers: int) -> None:
        self.tmp, self.runs = tmp, tmp / "runs"
        self.runs.mkdir()
        self.services = dh.load_compose()["services"]
        self.env = {
            "CONFIG": str(conf),
            "WORKERS": str(workers),
            "TARGET": f"http://{MASTER_IP}:8000",
            "SIM_PROFILE": "tiny",
        }
        self.procs: list[subprocess.Popen] = []

    def command(self, service: str, master_host: str = MASTER_IP) -> list[str]:
        args = dh.container_command(self.services[service], self.env)
        out = list(dh.LOCAL_EXECUTABLES[args[0]])
        for previous, arg in zip(["", *args[1:]], args[1:]):
            if previous == "--master-host":
                arg = master_host
            elif arg == "/runs" or arg.startswith("/runs/"):
                arg = str(self.runs) + arg[len("/runs") :]
            out.append(arg)
        return out

    def start(self, name: str, ns: str, argv: list[str], cwd: Path, env: dict | None = None) -> subprocess.Popen:
        proc = start(
            ["ip", "netns", "exec", ns, *argv], cwd, self.tmp / f"{name}.log", env={**os.environ, **(env or {})}
        )
        self.procs.append(proc)
        return proc

    def start_sim(self) -> None:
        self.start("sim", MASTER_NS, self.command("sim"), REPO)
        wait_until(lambda: b"listening" in (self.tmp / "sim.log").read_bytes(), 30, "the simulator")

    def start_master(self, cwd: Path = REPO) -> subprocess.Popen:
        env = dh.container_environment(self.services["master"], self.env)
        return self.start("master", MASTER_NS, self.command("master"), cwd, env)

    def start_worker(
        self,
        name: str,
        ns: str,
        gateway: str,
        cwd: Path = REPO,
        shift: str = "",
        pid1: bool = False,
        extra_env: dict | None = None,
    ) -> subprocess.Popen:
        argv = self.command("worker", master_host=gateway)
        if pid1:  # PID 1 in a PID namespace of its own, like a container
            argv = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", *argv]
        env = dh.container_environment(self.services["worker"], self.env)
        if shift:  # libfaketime preloaded: time.time() shifted, monotonic clocks untouched. (Not the
            # `faketime` wrapper: its semaphore is named by pid, and both PID-1 workers are pid 1.)
            env.update(LD_PRELOAD=_libfaketime(), FAKETIME=shift, DONT_FAKE_MONOTONIC="1")
        return self.start(name, ns, argv, cwd, {**env, **(extra_env or {})})

    def run_dir(self) -> Path:
        return next(p.parent for p in self.runs.glob("*/manifest.json"))

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 20
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


def _per_phase(times: pd.Series, phases: pd.DataFrame) -> list[int]:
    """Counts per phase, the last one open-ended: a request sent a few ms before the stop reaches the
    server after it (and is cancelled); where the clocks matter is the boundaries between phases."""
    ends = [*phases.start_wall.iloc[1:], float("inf")]
    return [int(((times >= start) & (times < end)).sum()) for start, end in zip(phases.start_wall, ends)]


def _straddling(start: pd.Series, arrival: pd.Series, phases: pd.DataFrame) -> pd.Series:
    """Sends stamped before a phase boundary that reached the server after it (within MAX_SEND_S)."""
    out = pd.Series(False, index=start.index)
    for boundary in phases.start_wall.iloc[1:]:
        out |= (start < boundary) & (arrival >= boundary) & (arrival - start < MAX_SEND_S)
    return out


def _phase_of(times: pd.Series, phases: pd.DataFrame) -> pd.Series:
    return times.apply(lambda t: int((phases.start_wall <= t).sum()) - 1)


def test_shifted_clocks_and_a_killed_worker_across_hosts(hosts, tmp_path):
    conf = tmp_path / "cross.conf"
    conf.write_text(CONF.format(repo=REPO))
    cluster = Cluster(tmp_path, conf, workers=3)
    try:
        cluster.start_sim()
        master = cluster.start_master()
        cluster.start_worker("ahead", NS_A, "10.213.1.1", shift=SHIFTS["ahead"], pid1=True)
        cluster.start_worker("behind", NS_B, "10.213.2.1", shift=SHIFTS["behind"], pid1=True)
        victim = cluster.start_worker("victim", NS_B, "10.213.2.1")
        phases_csv = wait_until(lambda: next(cluster.runs.glob("*/phases.csv"), None), 40, "the first phase to end")
        # once the victim (the one worker not running as PID 1) has shipped records
        wait_until(
            lambda: (requests_so_far(phases_csv.parent).worker_id.str.split("-").str[-2] != "1").any(),
            16,
            "records from the victim",
        )
        time.sleep(1)
        os.kill(victim.pid, signal.SIGKILL)
        killed_at = time.time()
        master.wait(timeout=RUN_TIMEOUT_S)
        cluster.close()
    finally:
        cluster.close()
    log = (tmp_path / "master.log").read_text(errors="replace")
    assert master.returncode == 0, tail(tmp_path / "master.log")
    assert "Traceback" not in log
    run_dir = phases_csv.parent
    manifest = json.loads((run_dir / "manifest.json").read_text())
    records, truth = requests_table(run_dir), truth_table(cluster.runs / "sim-truth.jsonl")
    phases = pd.read_csv(run_dir / "phases.csv")
    assert len(phases) == 3

    # worker ids: two PID-1 workers on one hostname still differ
    ids = sorted(manifest["rows_by_worker"])
    assert len(ids) == 3 and sum(i.split("-")[-2] == "1" for i in ids) == 2, ids

    # offsets found (to within the probe's uncertainty) and recorded per worker
    offsets = manifest["clock_offsets"]
    tags = {w: request_tag_of_worker(w) for w in ids}  # the first group of every request id of that worker
    found = sorted(round(offsets[w]["offset_s"]) for w in ids)
    assert found == [-3, 0, 2], offsets
    for w in ids:
        assert abs(offsets[w]["offset_s"] - round(offsets[w]["offset_s"])) < 0.05, offsets[w]
    assert manifest["clock_warnings"], "a 2-3 s offset is far above 1 % of a 4 s phase"

    # corrected: each worker's records start where the simulator saw them arrive (same clock as the
    # phases): a typical send takes well under 10 ms, an uncorrected clock would move them all by seconds
    merged = records.merge(truth, on="request_id")
    merged["gap"] = merged.arrival - merged.start_wall
    assert (merged.groupby("worker_id").gap.median().abs() < 0.01).all(), merged.groupby("worker_id").gap.describe()
    assert (merged.gap > -0.05).all(), "the server saw a request before its client sent it"
    tag_of = records.request_id.str[:8]
    victim_id = next(w for w in ids if round(offsets[w]["offset_s"]) == 0)
    survivors = records[tag_of != tags[victim_id]]
    truth_survivors = truth[truth.request_id.str[:8] != tags[victim_id]]
    assert set(truth_survivors.request_id) <= set(records.request_id), "a survivor's request has no record"
    # the survivors' per-phase counts are the simulator's (a cancel at the stop never reached it)
    sent = survivors[survivors.request_id.isin(truth.request_id)]
    arrival = sent.request_id.map(truth.set_index("request_id").arrival)
    straddling = _straddling(sent.start_wall, arrival, phases)
    assert straddling.sum() <= 0.05 * len(sent), sent[straddling]
    sent, arrival = sent[~straddling], arrival[~straddling]
    assert _per_phase(sent.start_wall, phases) == _per_phase(arrival, phases)
    # ...where the workers' own clocks would have put requests in other phases
    raw = sent.start_wall + sent.request_id.str[:8].map({tags[w]: offsets[w]["offset_s"] for w in ids})
    assert (_phase_of(raw, phases) != _phase_of(arrival, phases)).sum() > 0

    # the killed worker: named, when, its loss counted, its phase marked and kept at its user count
    # (a live worker can miss heartbeats for a few seconds, libfaketime'd ones especially: workers_back)
    [lost] = manifest["workers_lost"]
    assert lost["worker"] == victim_id and lost["how"] == "missing" and lost["rejoined_at"] is None
    assert victim_id not in {entry["worker"] for entry in manifest["workers_back"]}
    assert killed_at - 2 < lost["last_seen"] <= killed_at + 0.5 < lost["lost_at"] < killed_at + 15
    never_recorded = truth[(truth.request_id.str[:8] == tags[victim_id]) & ~truth.request_id.isin(records.request_id)]
    assert len(never_recorded) <= lost["requests_lost_estimate"] + 3
    hit = phases[phases.start_wall <= lost["lost_at"]].iloc[-1]
    assert f"{hit['index']}:{hit.label}" in lost["phases"]
    assert f"worker {victim_id} lost" in str(hit.note)
    assert hit.users_end == hit.target_users  # rebalanced onto the survivors
    # the report names it; with the server's log in the run folder (as `loadline run` leaves it) the
    # loss is counted exactly
    shutil.copy(cluster.runs / "sim-truth.jsonl", run_dir / "truth.jsonl")
    report = subprocess.run(
        [sys.executable, "-m", "loadline", "report", str(run_dir), "--no-charts"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    # (exit 2 is possible: libfaketime leaves kernel receive stamps unshifted, so the shifted workers'
    # kernel-clock TTFTs are off by their shift and the validity check may call the run unusable)
    assert report.returncode in (0, 1, 2) and "Traceback" not in report.stderr, report.stderr[-2000:]
    summary = (run_dir / "report" / "summary.md").read_text()
    assert f"Workers lost: {victim_id} at " in summary
    assert f"{len(never_recorded)} request(s) the server saw were never recorded" in summary
    # its phases say so in their rows, and none of them is the knee, break point or max compliant load
    verdict = json.loads((run_dir / "report" / "verdict.json").read_text())
    short = {p["label"] for p in verdict["phases"] if p.get("workers_short")}
    assert short == {key.split(":", 1)[1] for key in lost["phases"]}, verdict["phases"]
    answer = assert_surfaces_agree(run_dir, report.returncode)
    for point in (answer.knee, answer.break_point, answer.max_compliant):
        assert not point.found or point.load.phase not in short, point
    if answer.status.value != "unusable":
        assert {p.phase for p in answer.set_aside} == set(lost["phases"])
    print(
        f"lost worker: {len(never_recorded)} requests never recorded, estimated {lost['requests_lost_estimate']} "
        f"({lost['in_flight']} in flight, {lost['unshipped_estimate']} unshipped); offsets "
        + ", ".join(f"{offsets[w]['offset_s']:+.4f} s ±{offsets[w]['uncertainty_ms']} ms" for w in ids)
    )


def test_a_config_error_only_a_worker_sees_fails_the_run_with_exit_2(hosts, tmp_path):
    """The dataset path is relative: it exists in the master's directory, not on the worker's host."""
    master_dir, worker_dir = tmp_path / "master-host", tmp_path / "worker-host"
    master_dir.mkdir()
    worker_dir.mkdir()
    (master_dir / "conversations.jsonl").write_text(
        json.dumps({"conversations": [{"from": "human", "value": "hello there"}]}) + "\n"
    )
    conf = tmp_path / "cross.conf"
    conf.write_text(CONF.format(repo=REPO) + "dataset = conversations.jsonl\n")
    cluster = Cluster(tmp_path, conf, workers=1)
    try:
        cluster.start_sim()
        master = cluster.start_master(cwd=master_dir)
        cluster.start_worker("worker", NS_A, "10.213.1.1", cwd=worker_dir)
        master.wait(timeout=RUN_TIMEOUT_S)
    finally:
        cluster.close()
    log = (tmp_path / "master.log").read_text(errors="replace")
    assert master.returncode == 2, tail(tmp_path / "master.log")
    assert "cannot run: dataset not found: conversations.jsonl" in log
    manifest = json.loads(next(cluster.runs.glob("*/manifest.json")).read_text())
    assert manifest["status"] == "failed"
    assert manifest["worker_errors"][0]["reason"] == "dataset not found: conversations.jsonl"


HOST_BOUND = """
import os

import loadline.runtime.plugin  # noqa: F401
from loadline.client import users


class HostBoundChat(users.ChatSessionUser):
    def on_start(self):
        if os.environ.get("LOADLINE_TEST_BROKEN_HOST"):
            raise FileNotFoundError("/etc/llm/credentials: no such file on this host")
        super().on_start()
"""


def test_a_worker_whose_users_raise_at_start_fails_the_run_with_exit_2_naming_it(hosts, tmp_path):
    """Users that need a file only one host lacks: that worker's users raise in on_start, the other's run."""
    locustfile = tmp_path / "host_bound.py"
    locustfile.write_text(HOST_BOUND)
    conf = tmp_path / "cross.conf"
    conf.write_text(CONF.format(repo=REPO).replace(f"{REPO}/locustfiles/chat.py", str(locustfile)))
    cluster = Cluster(tmp_path, conf, workers=2)
    try:
        cluster.start_sim()
        master = cluster.start_master()
        broken = cluster.start_worker("broken", NS_A, "10.213.1.1", extra_env={"LOADLINE_TEST_BROKEN_HOST": "1"})
        cluster.start_worker("healthy", NS_B, "10.213.2.1")
        master.wait(timeout=RUN_TIMEOUT_S)
    finally:
        cluster.close()
    log = (tmp_path / "master.log").read_text(errors="replace")
    assert master.returncode == 2, tail(tmp_path / "master.log")
    manifest = json.loads(next(cluster.runs.glob("*/manifest.json")).read_text())
    [error] = manifest["worker_errors"]
    assert f"-{broken.pid}-" in error["worker"], error  # `ip netns exec` execs: the pid is the worker's
    assert "user(s) failed at start: HostBoundChat.on_start raised FileNotFoundError" in error["reason"]
    assert f"worker {error['worker']} cannot run: " in log
    assert manifest["status"] == "failed" and "Traceback" not in log
