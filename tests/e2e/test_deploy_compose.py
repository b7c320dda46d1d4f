"""docker-compose.yml without Docker: parse it and run the sim, master and two workers' commands locally.

Hostnames `sim`/`master` become 127.0.0.1 and container ports free ports; the ./runs volume becomes a
tmp folder. The master must leave a run folder whose rows are the simulator's requests, each once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import deploy_helpers as dh
import process_helpers as ph
import pytest
from spine_helpers import REPO, assert_every_request_once, requests_table, truth_table

WORKERS = 2
TEST_CONF = """\
locustfile = locustfiles/chat.py
users = 6
spawn-rate = 6
run-time = 6s
think-mean = 0.3
think-p90 = 0.6
prompt-mix = short=1
max-tokens = 32
"""


@pytest.fixture(scope="module")
def compose() -> dict:
    return dh.load_compose()


def test_services_images_and_volumes(compose):
    services = compose["services"]
    assert {"sim", "master", "worker", "prometheus", "grafana"} <= set(services)
    for name in ("sim", "master", "worker"):
        assert services[name]["build"] == "."
        assert "./runs:/runs" in services[name]["volumes"]
        assert "profiles" not in services[name]  # the default `docker compose up` runs them
    for name in ("prometheus", "grafana"):
        assert services[name]["profiles"] == ["monitoring"]
        for volume in services[name]["volumes"]:
            assert (REPO / volume.split(":")[0]).exists(), volume
    assert "8089:8089" in dh.interpolate(services["master"]["ports"][0], {})
    # the master waits for exactly the workers of `--scale worker=N` (WORKERS=N)
    master = dh.container_command(services["master"], {"WORKERS": "7"})
    assert master[master.index("--expect-workers") + 1] == "7"
    assert "--enable-rebalancing" in master  # a lost worker's users move at once (tests/e2e/test_cross_host.py)
    assert "--headless" not in master  # headless comes from LOCUST_HEADLESS, so HEADLESS=false gives the UI
    assert dh.container_environment(services["master"], {})["LOCUST_HEADLESS"] == "true"
    assert dh.container_environment(services["master"], {"HEADLESS": "false"})["LOCUST_HEADLESS"] == "false"


def test_prometheus_scrapes_the_master_metrics_port_and_the_simulator(compose):
    import yaml

    config = yaml.safe_load((REPO / "deploy/prometheus/prometheus.yml").read_text())
    targets = {t for job in config["scrape_configs"] for c in job["static_configs"] for t in c["targets"]}
    master = dh.container_command(compose["services"]["master"], {})
    assert f"master:{master[master.index('--metrics-port') + 1]}" in targets
    assert "sim:8000" in targets


def test_compose_commands_run_a_distributed_test_with_two_workers(compose, tmp_path):
    services = compose["services"]
    runs = tmp_path / "runs"
    runs.mkdir()
    conf = tmp_path / "test.conf"
    conf.write_text(TEST_CONF)
    env = {"CONFIG": str(conf), "WORKERS": str(WORKERS), "SIM_PROFILE": "tiny"}
    ports = {"8000": ph.free_port(), "8089": ph.free_port(), "9646": ph.free_port(), "5557": ph.free_port()}

    def local(name: str) -> list[str]:
        return dh.localize(dh.container_command(services[name], env), {"sim", "master"}, ports, {"/runs": runs})

    def process_env(name: str) -> dict[str, str]:
        return {**os.environ, **dh.container_environment(services[name], env)}

    # Locust's master port is its default (5557) in the compose file: pass the free one explicitly.
    bind = ["--master-bind-port", str(ports["5557"])]
    started: list[subprocess.Popen] = []
    try:
        sim_log = tmp_path / "sim.log"
        sim = ph.start(local("sim"), REPO, sim_log, process_env("sim"))
        started.append(sim)
        _healthcheck_passes(services["sim"], ports, sim, sim_log)
        master_log = tmp_path / "master.log"
        master = ph.start(local("master") + bind, REPO, master_log, process_env("master"))
        started.append(master)
        for i in range(WORKERS):
            worker_cmd = local("worker") + ["--master-port", str(ports["5557"])]
            started.append(ph.start(worker_cmd, REPO, tmp_path / f"worker-{i}.log", process_env("worker")))
        try:
            code = master.wait(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"master did not finish: {ph.tail(master_log)}") from None
        assert code == 0, ph.tail(master_log)
    finally:
        for proc in reversed(started):
            ph.stop(proc)

    run_dir = next(p for p in runs.iterdir() if p.is_dir())
    records, truth = requests_table(run_dir), truth_table(runs / "sim-truth.jsonl")
    assert_every_request_once(records, truth)
    assert (records.status == "ok").sum() > 0
    assert records.worker_id.nunique() == WORKERS
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "finished" and manifest["workers_lost"] == []
    assert "Traceback" not in ph.tail(master_log, 100_000)


def _healthcheck_passes(service: dict, ports: dict[str, int], proc, log) -> None:
    """The sim's healthcheck command (its python -c probe) on the local port: the master's start gate."""
    test = service["healthcheck"]["test"]
    assert test[:2] == ["CMD", "python"]
    argv = [sys.executable, *(arg.replace("127.0.0.1:8000", f"127.0.0.1:{ports['8000']}") for arg in test[2:])]

    def healthy() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"the simulator exited: {ph.tail(log)}")
        return subprocess.run(argv, capture_output=True, timeout=10, check=False).returncode == 0

    ph.wait_until(healthy, 20, "the simulator's healthcheck", interval_s=0.3)


def test_image_holds_what_the_commands_reference(compose):
    """The image is the source tree at WORKDIR: every relative path the commands use must be in it."""
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "FROM python:3.11-slim" in dockerfile and "WORKDIR /loadline" in dockerfile
    assert "COPY . ." in dockerfile and "pip install -e ." in dockerfile
    ignored = {line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()}
    assert {".venv", "runs", ".git"} <= ignored
    for name in ("sim", "master", "worker"):
        for arg in dh.container_command(compose["services"][name], {}):
            top = arg.split("/")[0]
            if "/" in arg and not arg.startswith(("/", "http")):
                assert (REPO / arg).exists() and top not in ignored, arg


def test_default_conf_parses_and_names_a_real_locustfile(compose):
    master = dh.container_command(compose["services"]["master"], {})
    options = dh.parse_locust(master[1:])  # the default CONFIG, as `docker compose up` runs it
    assert options["master"] and options["host"] == "http://sim:8000" and options["out"] == "/runs"
    assert (REPO / options["locustfile"]).is_file()
    assert options["num_users"] > 0 and options["run_time"] > 0
