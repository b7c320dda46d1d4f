"""The LLM tab's own links work on the README's web UI command: no --out, started from any directory.

Without --out the run folder is the relative `runs/...`; Flask resolves a relative path inside the
installed locust package, so both links answered HTTP 500.
"""

from __future__ import annotations

import re
import sys
import urllib.parse
import urllib.request

import process_helpers as ph
from spine_helpers import REPO

FAST_USER = ["--think-mean", "0.2", "--think-p90", "0.4", "--prompt-mix", "short=1", "--max-tokens", "16"]


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_llm_tab_links_serve_the_run_folder_without_out(sim_server, tmp_path):
    sim = sim_server("tiny")
    port = ph.free_port()
    log = tmp_path / "locust.log"
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(REPO / "locustfiles" / "chat.py"),
        "--web-host",
        "127.0.0.1",
        "--web-port",
        str(port),
        "--host",
        sim.url,
        *FAST_USER,
    ]
    proc = ph.start(cmd, tmp_path, log)  # cwd = tmp_path: the run folder is tmp_path/runs/<id>
    url = f"http://127.0.0.1:{port}"
    try:
        ph.wait_for_http(url + "/", proc, log)
        body = urllib.parse.urlencode({"user_count": 2, "spawn_rate": 2, "host": sim.url}).encode()
        urllib.request.urlopen(urllib.request.Request(url + "/swarm", data=body), timeout=10).read()
        runs = tmp_path / "runs"

        def some_rows() -> bool:
            files = list(runs.glob("*/requests.csv"))
            return bool(files) and len(files[0].read_text().splitlines()) > 3

        ph.wait_until(some_rows, 30, "request rows in the run folder")
        status, csv_body = _get(url + "/loadline/requests.csv")
        assert status == 200 and csv_body.decode().splitlines()[0].startswith("request_id"), csv_body[:300]
        _get(url + "/stop")
        # The report builds in a child process: 202 with a progress page that refreshes itself to
        # ./report?build=N until it is ready; follow it as a browser does.
        report: dict = {"url": url + "/loadline/report"}

        def report_ready() -> bool:
            report["status"], report["page"] = _get(report["url"])
            refresh = re.search(rb"url=\./report\?build=(\d+)", report["page"])
            if refresh:
                report["url"] = f"{url}/loadline/report?build={refresh.group(1).decode()}"
            return report["status"] != 202

        ph.wait_until(report_ready, 120, "the report", interval_s=1.0)
        assert report["status"] == 200 and b"<html" in report["page"][:500].lower(), report["page"][:300]
        [run_dir] = list(runs.iterdir())
        assert (run_dir / "report" / "report.html").is_file()
    finally:
        ph.stop(proc)
    assert "Traceback" not in ph.tail(log, 100_000), ph.tail(log)
