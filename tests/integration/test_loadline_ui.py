"""`loadline ui` serves Locust's web UI with every Loadline user class and load shape, from any directory,
and a Ctrl-C stops it together with its Locust child."""

from __future__ import annotations

import json
import re
import socket
import sys
import urllib.request

import process_helpers as ph

HTTP_TIMEOUT_S = 10


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_loadline_ui_serves_the_class_picker_and_stops_with_its_child(tmp_path):
    port = ph.free_port()
    log = tmp_path / "ui.log"
    cmd = [
        sys.executable,
        "-m",
        "loadline",
        "ui",
        "--web-port",
        str(port),
        "--host",
        "http://127.0.0.1:9",
        "--",
        "--think-mean",
        "2",
    ]
    proc = ph.start(cmd, tmp_path, log)  # not the checkout: the shipped entry files are found anyway
    base = f"http://127.0.0.1:{port}"
    try:
        ph.wait_for_http(base + "/", proc, log)
        with urllib.request.urlopen(base + "/", timeout=HTTP_TIMEOUT_S) as response:
            page = response.read().decode()
        args = json.loads(re.search(r"window\.templateArgs = (\{.*?\})\s*\n", page).group(1))
        assert set(args["available_user_classes"]) >= {"ChatSessionUser", "SingleShotUser", "CompletionUser"}
        assert {"StepShape", "PulseShape", "SoakShape", "StagesShape"} <= set(args["available_shape_classes"])
        assert args["host"] == "http://127.0.0.1:9"
        assert args["extra_options"]["think_mean"]["default_value"] == 2  # Locust options after -- pass through
        with urllib.request.urlopen(base + "/loadline/live", timeout=HTTP_TIMEOUT_S) as response:
            assert response.status == 200
    finally:
        code = ph.stop(proc)
    assert code == 130, ph.tail(log)
    ph.wait_until(lambda: not _listening(port), 10, "the web UI's port to close")
    assert "Traceback" not in ph.tail(log, 100_000), ph.tail(log)
    assert not (tmp_path / "runs").exists()  # no test was started: no run folder
