"""A trace replay started from the Locust web UI's form in a real headless Chromium: the trace shape
picked, a raw trace file with a speed and a surge typed into the trace group's fields. The run folder
then holds the warped schedule, the surge's phase and every request sent at its warped due time; a
bad surge typed next refuses the start in one line, shown in the LLM tab's status."""

from __future__ import annotations

import json
import sys
from collections import Counter

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
from selenium.webdriver.support.ui import Select
from spine_helpers import REPO
from test_trace_locust import burstgpt

from loadline.core.trace_warp import read

pytestmark = [needs_browser, pytest.mark.e2e]

SPEED = 2.0


def test_a_trace_started_from_the_form_is_warped_surged_and_sent_at_its_due_times(sim_server, tmp_path):
    sim = sim_server("tiny")
    trace = burstgpt(tmp_path / "burstgpt.csv")
    port, out, log = ph.free_port(), tmp_path / "runs", tmp_path / "locust.log"
    proc = ph.start(
        [sys.executable, "-m", "locust", "-f", "locustfiles/trace.py,locustfiles/shape.py", "--class-picker",
         "--web-host", "127.0.0.1", "--web-port", str(port), "--host", sim.url, "--out", str(out)],
        REPO,
        log,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        ph.wait_for_http(url + "/", proc, log)
        with chromium(tmp_path / "chromium-profile") as browser, screenshot_on_failure(browser, tmp_path / "form.png"):
            browser.get(url + "/")
            wait_for(browser, lambda d: button(d, "START"), PAGE_TIMEOUT_S, "the start form")
            Select(browser.find_element(By.NAME, "shapeClass")).select_by_value("TraceShape")
            open_custom_parameters(browser, "traceFile")
            type_into(browser, "traceFile", str(trace))
            type_into(browser, "traceSpeed", f"{SPEED:g}")
            type_into(browser, "traceSurge", "3x@2s+2s")
            type_into(browser, "traceDrain", "2")
            button(browser, "START").click()
            manifest_path = ph.wait_until(lambda: next(out.glob("*/manifest.json"), None), 30, "the run folder")
            ph.wait_until(lambda: json.loads(manifest_path.read_text()).get("ended_at"), 60, "the replay's end")

            # a bad surge from the same form: the start is refused in one line, the LLM tab's status says why
            browser.get(url + "/")
            wait_for(browser, lambda d: button(d, "NEW"), PAGE_TIMEOUT_S, "the NEW button of a finished run").click()
            picker = wait_for(browser, lambda d: d.find_element(By.NAME, "shapeClass"), 10, "the form again")
            Select(picker).select_by_value("TraceShape")
            open_custom_parameters(browser, "traceSurge")
            type_into(browser, "traceSurge", "lots")
            wait_for(browser, lambda d: button(d, "START"), 10, "the START button").click()

            def refused():
                status = json.loads(fetch(url + "/loadline/status")[2])
                return status.get("start_refused")

            reason = ph.wait_until(refused, 30, "the refused start's reason")
            assert "--trace-surge" in reason and "\n" not in reason, reason
    finally:
        ph.stop(proc)
    assert "Traceback" not in log.read_text(), ph.tail(log)

    run_dir = manifest_path.parent
    options = json.loads(manifest_path.read_text())["options"]
    assert (options["trace_file"], options["trace_speed"], options["trace_surge"]) == (str(trace), SPEED, "3x@2s+2s")
    header, scheduled = read(run_dir / "trace-schedule.jsonl")
    assert header["speed"] == SPEED and header["trace_requests"] == 24 and len(scheduled) > 24
    phases = pd.read_csv(run_dir / "phases.csv").set_index("label")
    start = float(phases.loc["start", "end_wall"])
    assert phases.loc["surge-1 (x3)", "kind"] == "burst"
    assert phases.loc["surge-1 (x3)", "start_wall"] - start == pytest.approx(2.0 / SPEED, abs=0.01)
    records = pd.read_csv(run_dir / "requests.csv")
    first = records[records["attempt"] == 0]
    assert Counter(first["trace_index"].astype(int)) == Counter(r.trace_index for r in scheduled)
    assert sorted(first["due_wall"] - start) == pytest.approx(sorted(r.due_s for r in scheduled), abs=0.005)
    assert (first["start_wall"] - first["due_wall"]).median() < 0.02
