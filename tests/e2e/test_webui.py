"""The Locust web UI in a real headless Chromium: our options in the start form, the "LLM" tab, the run folder.

Needs Debian's chromium + chromedriver (`make browser`). On failure a screenshot is left in the test's
tmp folder (its path is in the failure message).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import process_helpers as ph
import pytest
from browser_helpers import (
    PAGE_TIMEOUT_S,
    button,
    chromium,
    fetch,
    needs_browser,
    open_custom_parameters,
    screenshot_on_failure,
    type_into,
    wait_for,
)
from selenium.webdriver.common.by import By
from spine_helpers import REPO, assert_every_request_once, truth_table
from surfaces import assert_surfaces_agree

from loadline.runtime.simprocess import start_simulator

FAST_USER = ["--think-mean", "0.3", "--think-p90", "0.6", "--prompt-mix", "short=1", "--max-tokens", "32"]
SECRET = "sk-loadline-webui-SECRET-7331"

pytestmark = needs_browser


# One simulator, web UI and browser for the module (5 s of startup each time, more on a busy box): the
# form test only reads the start form and starts nothing; the run test comes after it in this file and
# loads the page afresh, so it meets the same untouched web UI and a simulator that served no request.
@pytest.fixture(scope="module")
def web_ui(tmp_path_factory):
    """(base URL, simulator, --out folder, its truth log) of a Locust web UI with every shape in the class picker.

    The simulator wants a key, given to Locust the recommended way (environment variable)."""
    tmp = tmp_path_factory.mktemp("webui")
    truth = tmp / "truth.jsonl"
    sim = start_simulator(
        ["--profile", "tiny", "--api-key", SECRET, "--truth", str(truth)],
        log_path=tmp / "sim.stderr",
        startup_timeout=20.0,
    )
    port = ph.free_port()
    out = tmp / "runs"
    log = tmp / "locust.log"
    cmd = ph.web_ui_command(port, sim.url, out, *FAST_USER)
    proc = ph.start(cmd, REPO, log, env={**os.environ, "LOADLINE_API_KEY": SECRET})
    url = f"http://127.0.0.1:{port}"
    try:
        ph.wait_for_http(url + "/", proc, log)
        yield url, sim, out, truth
    finally:
        ph.stop(proc)
        sim.stop()
    assert "Traceback" not in ph.tail(log, 100_000), ph.tail(log)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with chromium(tmp_path_factory.mktemp("browser") / "chromium-profile") as driver:
        yield driver


# One script, so one snapshot: the tab re-renders every second, and a read cell by cell (a round trip
# each) straddled two renders on a busy box (the whole-run "-" of the first poll beside the next's TTFT)
TABLE_TEXT = """return Array.from(document.querySelectorAll("table tr"),
  tr => Array.from(tr.querySelectorAll("td"), td => td.innerText.trim()));"""


def llm_table(driver) -> dict[str, tuple[str, str]]:
    """The LLM tab's rows, as one render shows them: metric -> (last 30 s, whole run)."""
    return {cells[0]: (cells[1], cells[2]) for cells in driver.execute_script(TABLE_TEXT) if len(cells) == 3}


def as_ms(text: str) -> float | None:
    try:
        return float(text.removesuffix(" ms").replace(",", ""))
    except ValueError:
        return None


def test_start_form_offers_loadline_options_and_masks_the_api_key(web_ui, browser, tmp_path):
    url, _, _, _ = web_ui
    with screenshot_on_failure(browser, tmp_path / "form.png"):
        browser.get(url + "/")
        wait_for(browser, lambda d: button(d, "START"), PAGE_TIMEOUT_S, "the start form")
        # The picker lists our shapes; "Default" (no shape) is preselected.
        assert browser.find_element(By.NAME, "shapeClass").get_attribute("value") == "Default"
        page = browser.page_source
        for shape in ("StepShape", "PulseShape", "SoakShape", "StagesShape"):
            assert shape in page
        prompt_mix = open_custom_parameters(browser, "promptMix")
        # Command-line values are the form's defaults; the labels carry our help texts.
        assert prompt_mix.get_attribute("value") == "short=1"
        assert browser.find_element(By.NAME, "maxTokens").get_attribute("value") == "32"
        assert "Prompt Mix (weights of prompt length classes" in browser.page_source
        key_box = browser.find_element(By.NAME, "apiKey")
        assert key_box.get_attribute("type") == "password"
        # Not even masked: the key from the environment is nowhere in the page (Locust would embed it).
        assert key_box.get_attribute("value") == ""
        assert SECRET not in browser.page_source
        assert SECRET.encode() not in fetch(url + "/")[2]
        # the live page before any run: its time axis is named, with no unset scale in it
        browser.get(url + "/loadline/live")
        wait_for(browser, lambda d: d.find_element(By.ID, "clock").text, 10, "the page's first answer from the server")
        axis = browser.find_element(By.ID, "chart-ttft").get_attribute("data-axis")
        assert axis == "time since start" and "undefined" not in browser.find_element(By.TAG_NAME, "body").text


def test_test_started_in_the_browser_fills_the_llm_tab_and_the_run_folder(web_ui, browser, tmp_path):
    url, sim, out, truth = web_ui
    with screenshot_on_failure(browser, tmp_path / "run.png"):
        browser.get(url + "/")
        wait_for(browser, lambda d: button(d, "START"), PAGE_TIMEOUT_S, "the start form")
        type_into(browser, "userCount", "4")
        type_into(browser, "spawnRate", "4")
        # a field whose name the page mangles when it posts the form (thinkP90 -> think_p9_0)
        open_custom_parameters(browser, "thinkP90")
        type_into(browser, "thinkP90", "0.5")
        button(browser, "START").click()

        tab = wait_for(
            browser,
            lambda d: [t for t in d.find_elements(By.CSS_SELECTOR, "[role=tab]") if t.text.strip().upper() == "LLM"],
            15,
            "the LLM tab",
        )[0]
        tab.click()
        seen: list[dict] = [{}]

        def running_with_numbers(driver):
            seen[0] = rows = llm_table(driver)
            running = rows.get("Users running", ("",))[0] == "4"
            return running and as_ms(rows.get("TTFT p95", ("-",))[0]) is not None and rows

        try:
            rows = wait_for(browser, running_with_numbers, 30, "4 users and a numeric TTFT p95 in the LLM tab")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last table: {seen[0]}") from None
        assert as_ms(rows["TTFT p95"][1]) is not None  # whole-run column too
        assert float(rows["Output tokens/s"][1].replace(",", "")) > 0
        run_dir = Path(rows["Run folder"][0])
        assert run_dir.parent == out

        wait_for(browser, lambda d: button(d, "STOP"), 10, "the STOP button").click()
        manifest = ph.wait_until(lambda: _ended_manifest(run_dir), 20, "the run folder to be closed")
        # STOP is a person ending the run before its end: never a finished run (its report says STOPPED BY USER)
        assert (manifest["status"], manifest["ended_by"]) == ("stopped", "user")
    assert manifest["options"]["think_p90"] == 0.5  # what the browser posted, not the command line's 0.6

    records = pd.read_csv(run_dir / "requests.csv")
    assert len(records) == manifest["requests_written"] > 0
    assert (records.status == "ok").sum() > 0, records.http_status.value_counts()  # the hidden key was sent
    for path in run_dir.rglob("*"):
        assert not path.is_file() or SECRET.encode() not in path.read_bytes(), path

    # After the stop the tab describes the finished run: every row counted, rates over the run's own length.
    stats = json.loads(fetch(url + "/stats/requests")[2])
    table = {r["metric"]: r for r in next(t["data"] for t in stats["extended_stats"] if t["key"] == "llm")}
    assert int(table["Requests (finished)"]["run"].replace(",", "")) == len(records)
    seconds = manifest["ended_at"] - manifest["started_at"]
    shown_rps = float(table["Requests/s (ok)"]["run"].replace(",", ""))
    assert shown_rps == pytest.approx((records.status == "ok").sum() / seconds, abs=0.051)

    status, content_type, body = fetch(url + "/loadline/requests.csv")
    assert status == 200 and content_type.startswith("text/csv")
    assert body == (run_dir / "requests.csv").read_bytes()

    # the web UI's report of the stopped run states the same answer as every other surface: STOPPED BY USER
    def built():
        code, _, body = fetch(url + "/loadline/report", timeout_s=30)
        return code == 200 and b"Loadline report:" in body and body

    page = ph.wait_until(built, 120, "the web UI's report of the stopped run", interval_s=1.0)
    assert b"STOPPED BY USER" in page
    answer = assert_surfaces_agree(run_dir, 1)
    assert answer.status.value == "stopped by user"

    sim.stop()  # flushes its truth log (stopping it again at the module's end does nothing)
    assert_every_request_once(records, truth_table(truth))


def _ended_manifest(run_dir: Path) -> dict | None:
    try:
        manifest = json.loads((run_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    return manifest if manifest.get("ended_at") else None
