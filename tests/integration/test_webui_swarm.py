"""The start form as a browser posts it reaches the users, a start that cannot run says why in the LLM
tab, and STOP leaves the run as stopped by the user.

One Locust web UI (a real process, `locust -f chat.py,shape.py --class-picker`) and plain HTTP: the
/swarm post carries every custom option of the page under the name Locust's page posts it with
(its camelCase -> snake_case regex, copied below from locust/webui/dist/assets/src-*.js), which is
not always the option's own name (thinkP90 is posted as think_p9_0).
"""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from pathlib import Path

import process_helpers as ph
import pytest
from spine_helpers import REPO

HTTP_TIMEOUT_S = 10


def browser_field(option: str) -> str:
    """What Locust's page posts for `option`: snake -> camel for the field, camel -> snake on submit."""
    camel = re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), option)
    return camel if camel[0].isupper() else re.sub(r"([a-z0-9])([A-Z0-9])", r"\1_\2", camel).lower()


# Options left at their default: a secret (its own test: tests/e2e/test_webui.py), and strings whose
# empty default means "off" (a dataset, a scrape target, a stages file, a trace need files or servers of their own).
LEFT_EMPTY = {
    "api_key",
    "model",
    "dataset",
    "scrape_url",
    "sim_admin_url",
    "stages_file",
    "tokenizer",
    "trace_file",
    "trace_schedule",
    "trace_surge",
    "trace_window",
}


def form_value(name: str, default, out: Path):
    """A valid value other than the default, typed as the users should see it."""
    special = {
        "think_mean": 0.3,
        "think_p90": 0.4,
        "max_context_tokens": 4096,
        "time_scale": 2.0,
        "prompt_mix": "short=1",
        "request_id_header": "X-Form-Test",
        "arrival": "constant",
        "out": str(out),
        "slo_file": str(REPO / "configs" / "slo" / "default.toml"),
        "clock_offset_warn": 0.2,
        "step_max_error_rate": 0.1,
        "sweep_precision": 0.1,
        "prompt_tokens": "uniform:20-40",
        "output_tokens": "uniform:8-16",
        "trace_format": "azure",
    }
    if name in special:
        return special[name]
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default + 1
    if isinstance(default, float):
        return default + 0.5
    raise AssertionError(f"no test value for {name} (default {default!r})")


def as_posted(value) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as response:
        return response.read()


def post(url: str, fields: dict[str, str]) -> dict:
    body = urllib.parse.urlencode(fields).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=HTTP_TIMEOUT_S) as response:
        return json.loads(response.read() or b"{}")


def template_args(base: str) -> dict:
    page = get(base + "/").decode()
    found = re.search(r"window\.templateArgs = (\{.*?\})\s*\n", page)
    assert found, page[:500]
    return json.loads(found.group(1))


@pytest.fixture
def web_ui(sim_server, tmp_path):
    sim = sim_server("tiny")
    port = ph.free_port()
    log = tmp_path / "locust.log"
    cmd = ph.web_ui_command(port, sim.url, tmp_path / "runs")
    proc = ph.start(cmd, REPO, log)
    base = f"http://127.0.0.1:{port}"
    try:
        ph.wait_for_http(base + "/", proc, log)
        yield base, sim
    finally:
        ph.stop(proc)
    assert "Traceback" not in ph.tail(log, 100_000), ph.tail(log)


def test_every_form_field_reaches_the_users_and_stop_is_stopped_by_the_user(web_ui, tmp_path):
    base, sim = web_ui
    options = template_args(base)["extra_options"]
    assert "think_p90" in options and browser_field("think_p90") == "think_p9_0"
    out = tmp_path / "form-runs"
    expected = {
        name: form_value(name, option["default_value"], out)
        for name, option in options.items()
        if name not in LEFT_EMPTY
    }
    assert all(expected[name] != options[name]["default_value"] for name in expected)
    form = {
        "user_count": "1",
        "spawn_rate": "1",
        "host": sim.url,
        "shape_class": "Default",
        **{browser_field(name): as_posted(value) for name, value in expected.items()},
    }
    assert post(base + "/swarm", form).get("success") is True

    manifests = ph.wait_until(lambda: list(out.glob("*/manifest.json")), 30, "the run folder of the form's start")
    seen = json.loads(manifests[0].read_text())["options"]
    assert {name: seen.get(name) for name in expected} == expected
    post(base + "/stop", {})

    def ended() -> dict | None:
        manifest = json.loads(manifests[0].read_text())
        return manifest if manifest.get("ended_at") else None

    manifest = ph.wait_until(ended, 30, "the stopped run's manifest")
    assert (manifest["status"], manifest["ended_by"]) == ("stopped", "user")
    status = json.loads(get(base + "/loadline/status"))
    assert status["ended_by"] == "user" and status["start_refused"] is None


def test_a_start_that_cannot_run_says_why_in_the_llm_tab(web_ui):
    base, sim = web_ui
    form = {
        "user_count": "1",
        "spawn_rate": "1",
        "host": sim.url,
        "shape_class": "Default",
        "think_mean": "0.2",
        browser_field("think_p90"): "1",
    }
    post(base + "/swarm", form)

    def refused() -> str | None:
        return json.loads(get(base + "/loadline/status")).get("start_refused")

    reason = ph.wait_until(refused, 30, "the reason the start was refused")
    assert "think" in reason and "\n" not in reason, reason
    rows = {
        row["metric"]: row["last"] for row in json.loads(get(base + "/stats/requests"))["extended_stats"][0]["data"]
    }
    assert rows["Could not start"] == reason
    # a good start clears it
    post(base + "/swarm", {**form, browser_field("think_p90"): "0.4"})
    ph.wait_until(lambda: refused() is None, 30, "the refusal cleared by a good start")
    post(base + "/stop", {})
