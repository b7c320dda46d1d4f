"""The LLM tab's live charts in a real headless Chromium, against the simulator, time-scaled.

One stepped run started from the form: the charts grow, a phase marker appears, an SLO criterion turns
red (the engine runs one sequence at a time; the SLO file is tight), the stop rule ends the run and the
tab says why; the report and the run folder download. The charts' numbers equal the report's for the
same window. A second test runs `--processes 2` (a master and its workers) and a "reset stats".
A screenshot of the tab is kept in the test's tmp folder (copied to docs/img/webui-llm-tab.png, the README's
picture, with LOADLINE_UPDATE_SCREENSHOT=1).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import time
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

import pandas as pd
import process_helpers as ph
import pytest
from browser_helpers import PAGE_TIMEOUT_S, button, chromium, fetch, needs_browser, screenshot_on_failure, tab, wait_for
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select
from spine_helpers import REPO

from loadline.analysis.stats.phases import percentiles, pooled_itl_ms

pytestmark = needs_browser

SCALE = 20  # model time: x20 (simulator and shape); a 100 s step lasts 5 s
STEPPED = [
    "--step-start-users",
    "4",
    "--step-max-users",
    "8",
    "--baseline-hold",
    "60",
    "--step-hold",
    "120",
    "--step-settle",
    "1",
    "--step-min-requests",
    "3",
]
USERS = ["--prompt-mix", "short=1", "--max-tokens", "24", "--think-mean", "0", "--turns-max", "2"]
# One sequence at a time (max_num_seqs=1): 4 users queue, and the first token waits for the others' replies.
TIGHT_SLO = "[slo]\nttft_p95_ms = 400\nttft_p99_ms = 800\nitl_p99_ms = 2000\nmax_error_rate = 0.05\n"
SCREENSHOT = REPO / "docs" / "img" / "webui-llm-tab.png"
STEP_SUMMARY = "Where is the knee, and where is the break point?"  # shapes/stepped.py StepShape's first line
REPORT_TIMEOUT_S = 180.0  # `loadline report` in a child process on a busy 2-core machine


def start_web_ui(sim, tmp_path: Path, *extra: str):
    port = ph.free_port()
    log = tmp_path / "locust.log"
    slo = tmp_path / "tight-slo.toml"
    slo.write_text(TIGHT_SLO)
    cmd = ph.web_ui_command(
        port, sim.url, tmp_path / "runs", "--time-scale", str(SCALE), "--slo-file", str(slo), *USERS, *STEPPED, *extra
    )
    proc = ph.start(cmd, REPO, log)
    url = f"http://127.0.0.1:{port}"
    ph.wait_for_http(url + "/", proc, log)
    return proc, url, log


@pytest.fixture
def overloaded_sim(sim_server):
    return sim_server("tiny", "--time-scale", str(SCALE), "--max-num-seqs", "1")


@pytest.fixture
def browser(tmp_path):
    with chromium(tmp_path / "chromium-profile", window_size="1400,1650") as driver:
        yield driver


def points(driver, chart: str = "ttft") -> int:
    return int(driver.find_element(By.ID, f"chart-{chart}").get_attribute("data-points"))


def test_stepped_run_from_the_form_draws_charts_phases_slo_and_serves_report_and_zip(overloaded_sim, browser, tmp_path):
    proc, url, log = start_web_ui(overloaded_sim, tmp_path)
    try:
        with screenshot_on_failure(browser, tmp_path / "failure.png"):
            browser.get(url + "/")
            wait_for(browser, lambda d: button(d, "START"), PAGE_TIMEOUT_S, "the start form")
            # the class picker: shapes with their one-line summaries
            # the custom parameters in groups (Locust lists them alphabetically), each with its help line
            headings = wait_for(
                browser,
                lambda d: [e.get_attribute("textContent") for e in d.find_elements(By.CLASS_NAME, "loadline-group")],
                10,
                "the option groups",
            )
            assert {"Server and connection", "Workload: what each user sends", "Stepped shape (StepShape)"} <= set(
                headings
            )
            picker = Select(browser.find_element(By.NAME, "shapeClass"))
            step = next(o for o in picker.options if o.get_attribute("value") == "StepShape")
            wait_for(browser, lambda d: STEP_SUMMARY in step.text, 5, "the shape's summary in the picker")
            picker.select_by_value("StepShape")
            wait_for(
                browser,
                lambda d: STEP_SUMMARY in d.find_element(By.CLASS_NAME, "loadline-shape-help").text,
                5,
                "the selected shape's summary under the picker",
            )
            button(browser, "START").click()

            wait_for(browser, lambda d: tab(d, "LLM"), 15, "the LLM tab").click()
            frame = wait_for(browser, lambda d: d.find_element(By.ID, "loadline-live"), 15, "the live charts frame")
            browser.switch_to.frame(frame)
            first = wait_for(browser, lambda d: points(d) >= 2 and points(d), 20, "the first chart points")
            wait_for(browser, lambda d: points(d) > first, 15, "the charts to grow")
            wait_for(
                browser,
                lambda d: int(d.find_element(By.ID, "chart-ttft").get_attribute("data-phase-markers")) >= 2,
                30,
                "a phase marker (baseline, then step-1)",
            )
            # P99 may turn red first: over a few dozen replies it is the worst one, P95 not yet over its limit
            wait_for(
                browser,
                lambda d: [
                    r
                    for r in d.find_elements(By.CSS_SELECTOR, "#slo tr[data-outcome=fail]")
                    if r.get_attribute("data-key") == "ttft_p95_ms"
                ],
                40,
                "the TTFT P95 criterion in red",
            )
            browser.save_screenshot(str(tmp_path / "webui-llm-tab-running.png"))  # while the overloaded step runs
            assert "step" in browser.find_element(By.ID, "phase").text or "Stopped" in browser.page_source
            # the stop rule ends the run at the overloaded step and the tab says why
            reason = wait_for(browser, lambda d: d.find_element(By.ID, "stopreason").text, 60, "the stop reason")
            assert "TTFT P95" in reason and "step-1" in reason, reason
            assert "broke the SLO" in browser.find_element(By.ID, "stoprule").text
            time.sleep(2.5)  # one more refresh: the last points settled after the stop
            browser.switch_to.default_content()
            browser.execute_script("window.scrollTo(0, 0)")  # Locust's header and tabs, then the LLM view
            shot = tmp_path / "webui-llm-tab.png"
            browser.save_screenshot(str(shot))
            if (
                os.environ.get("LOADLINE_UPDATE_SCREENSHOT") == "1"
            ):  # the README's picture; never a side effect of make test
                SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(shot, SCREENSHOT)
            print(f"screenshot: {shot}")

        status = json.loads(fetch(url + "/loadline/status")[2])
        run_dir = Path(status["run_dir"])
        ph.wait_until(
            lambda: json.loads((run_dir / "manifest.json").read_text()).get("status") == "finished",
            20,
            "the run folder to be closed",
        )
        assert_series_equal_the_report(json.loads(fetch(url + "/loadline/series")[2]), run_dir)

        report = download_report(url)
        assert b"Loadline report" in report and run_dir.name.encode() in report
        status_code, content_type, body = fetch(url + "/loadline/run.zip", timeout_s=60)
        assert status_code == 200 and content_type == "application/zip"
        with zipfile.ZipFile(io.BytesIO(body)) as archive:
            assert archive.testzip() is None
            names = set(archive.namelist())
            copy = run_dir / "requests.arrows"  # the columnar copy of requests.csv: the same rows, left out
            assert copy.is_file()
            expected = {
                f"{run_dir.name}/{p.relative_to(run_dir)}" for p in run_dir.rglob("*") if p.is_file() and p != copy
            }
            assert names == expected
            assert archive.read(f"{run_dir.name}/requests.csv") == (run_dir / "requests.csv").read_bytes()
    finally:
        browser.get("about:blank")  # no page polls while Locust stops (Ctrl-C would land in a request)
        ph.stop(proc, sig=signal.SIGTERM)  # a clean shutdown: no KeyboardInterrupt in a busy greenlet
    assert "Traceback" not in ph.tail(log, 100_000), ph.tail(log)


def assert_series_equal_the_report(series: dict, run_dir: Path) -> None:
    """A chart point's TTFT P95 and pooled ITL P99 equal analysis' percentiles over the same rows."""
    records = pd.read_csv(run_dir / "requests.csv", keep_default_na=False, na_values={"ttft_ms": [""]})
    busy = [p for p in series["points"] if p["requests"] >= 5]
    assert busy, series["points"]
    for point in busy:
        rows = records[(records.start_wall >= point["start_wall"]) & (records.start_wall < point["end_wall"])]
        assert len(rows) == point["requests"]
        ok = rows[rows.status == "ok"]
        ttft = percentiles(ok.ttft_ms.dropna().to_numpy(dtype=float))
        assert point["ttft_p95_ms"] == pytest.approx(ttft["p95"] * SCALE, rel=1e-9)
        itl = percentiles(pooled_itl_ms(ok.itl_us))
        assert point["itl_p99_ms"] == pytest.approx(itl["p99"] * SCALE, rel=1e-9)


def download_report(url: str) -> bytes:
    """The report link: 202 + a progress page while it builds, then the report itself."""
    deadline = time.monotonic() + REPORT_TIMEOUT_S
    target = url + "/loadline/report"
    while time.monotonic() < deadline:
        with urllib.request.urlopen(target, timeout=30) as response:
            body = response.read()
            if response.status == 200:
                return body
            assert response.status == 202 and b"Building the Loadline report" in body
            build = body.split(b"report?build=")[1].split(b"'")[0].decode()
            target = f"{url}/loadline/report?build={build}"
        time.sleep(2)
    raise AssertionError(f"no report within {REPORT_TIMEOUT_S:.0f} s")


def post(url: str, form: dict) -> bytes:
    request = urllib.request.Request(url, data=urllib.parse.urlencode(form).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read()


def test_processes_and_reset_stats_keep_the_series_and_the_form_remembers(overloaded_sim, tmp_path):
    """`--processes 2`: a master and two forked workers; the series lives on the master's records."""
    proc, url, log = start_web_ui(overloaded_sim, tmp_path, "--processes", "2")
    try:
        ph.wait_until(
            lambda: (
                json.loads(fetch(url + "/")[2].split(b"window.templateArgs = ")[1].split(b"\n")[0])["worker_count"] == 2
            ),
            30,
            "two workers",
        )
        form = {
            "user_count": "3",
            "spawn_rate": "3",
            "host": overloaded_sim.url,
            "user_classes": "ChatSessionUser",
            "shape_class": "Default",
            "max_tokens": "16",
        }
        assert json.loads(post(url + "/swarm", form))["success"]

        def series():
            return json.loads(fetch(url + "/loadline/series")[2])

        before = ph.wait_until(
            lambda: (s := series()) and any(p["requests"] for p in s["points"]) and s,
            30,
            "points with requests from the workers",
        )
        post(url + "/stats/reset", {})
        after = ph.wait_until(
            lambda: (s := series()) and len(s["points"]) > len(before["points"]) and s,
            15,
            "more points after the reset",
        )
        assert after["started_wall"] == before["started_wall"]  # the same run: nothing was reset
        for old, new in zip(before["points"], after["points"]):  # settled history is unchanged by the reset
            assert new["t"] == old["t"] and new["requests"] >= old["requests"]
        status = json.loads(fetch(url + "/loadline/status")[2])
        assert status["requests_recorded"] > 0 and status["users"] == 3
        post(url + "/stop", {})
        # the form shows the last start's values, not the command line's (Locust alone forgets on reload)
        page = fetch(url + "/")[2]
        args = json.loads(page.split(b"window.templateArgs = ")[1].split(b"\n")[0])
        assert args["extra_options"]["max_tokens"]["default_value"] == 16
        assert args["extra_options"]["max_tokens"]["help_text"]  # every LLM option has a help line
    finally:
        ph.stop(proc, sig=signal.SIGTERM)  # a clean shutdown: no KeyboardInterrupt in a busy greenlet
    assert "Traceback" not in ph.tail(log, 100_000), ph.tail(log)
