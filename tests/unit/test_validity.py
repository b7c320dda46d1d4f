"""Is this run valid? Setup failures, the measurement floor and its materiality, with known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd

from loadline.analysis.verdict import floor as floor_mod
from loadline.analysis.verdict import validity
from loadline.analysis.verdict.setup_failure import setup_failure
from loadline.core.redact import MARK, redact, sample
from tests.synthetic import make_requests

PHASES = pd.DataFrame({"label": ["step 1", "step 2"], "start_wall": [1000.0, 1010.0], "end_wall": [1010.0, 1020.0]})


def _failing(n_bad: int, n_ok: int, status: int, content_type: str, detail: str, error_class: str = "http"):
    starts = np.linspace(1000.0, 1019.0, n_bad + n_ok)
    status_col = ["error"] * n_bad + ["ok"] * n_ok
    return make_requests(
        starts,
        [5.0] * len(starts),
        status=status_col,
        http_status=[status] * n_bad + [200] * n_ok,
        error_class=[error_class] * n_bad + [""] * n_ok,
        content_type=[content_type] * n_bad + ["text/event-stream"] * n_ok,
        error_detail=[detail] * n_bad + [""] * n_ok,
        error_message=[f"HTTP {status}: denied"] * n_bad + [""] * n_ok,
    )


def test_most_requests_rejected_401_is_a_setup_failure_with_status_type_and_redacted_body():
    body = '{"error":{"message":"Incorrect API key provided: sk-abcdefghijklmnop1234","code":401}}'
    found = setup_failure(_failing(40, 2, 401, "application/json", body))
    assert found is not None and found["kind"] == "rejected"
    assert found["http_status"] == 401 and found["content_type"] == "application/json"
    assert "HTTP 401" in found["reason"] and "--api-key" in found["reason"]
    assert "sk-abcdefghijklmnop1234" not in found["body_sample"] and MARK in found["body_sample"]
    assert found["statuses"] == {"401": 40}


def test_html_login_page_with_200_is_not_an_event_stream_even_when_classed_reset():
    page = "<!DOCTYPE html><html><head><title>Sign in</title></head><body><form>...</form></body></html>"
    found = setup_failure(_failing(30, 0, 200, "text/html; charset=utf-8", page, error_class="reset"))
    assert found is not None and found["kind"] == "not_event_stream"
    assert found["content_type"] == "text/html; charset=utf-8" and found["body_sample"].startswith("<!DOCTYPE html>")
    assert "not an event stream" in found["reason"]


def test_a_minority_of_404s_or_overload_errors_are_not_a_setup_failure():
    assert setup_failure(_failing(10, 30, 404, "application/json", "not found")) is None
    # 503 under load is the service's answer, a capacity signal, not a misconfiguration
    assert setup_failure(_failing(40, 2, 503, "application/json", "overloaded")) is None


def _truth_run(overhead_ms: tuple[float, float], n: int = 40):
    """Records whose TTFT exceeds the server's own by a known overhead in each of the two phases."""
    starts = np.concatenate([np.linspace(1000.5, 1009.0, n), np.linspace(1010.5, 1019.0, n)])
    server_ttft_s = 0.05
    extra = np.concatenate([np.full(n, overhead_ms[0]), np.full(n, overhead_ms[1])])
    requests = make_requests(starts, 200 + extra, ttft_ms=server_ttft_s * 1000 + extra)
    truth = pd.DataFrame(
        {
            "request_id": requests["request_id"],
            "arrival": starts,
            "first_token": starts + server_ttft_s,
            "last_token": starts + 0.2,
            "status": 200,
            "outcome": "ok",
        }
    )
    return requests, truth


def test_floor_from_truth_is_per_phase_and_in_model_time():
    requests, truth = _truth_run((2.0, 30.0))
    floor = floor_mod.measurement_floor(requests, PHASES, 20.0, truth, None)
    assert floor["method"] == "truth"
    by_phase = {r["phase"]: r for r in floor["phases"]}
    assert abs(by_phase["step 1"]["floor_ms"] - 2.0) < 1e-6
    assert abs(by_phase["step 2"]["floor_model_ms"] - 600.0) < 1e-6
    assert floor["worst_phase"] == "step 2" and abs(floor["floor_model_ms"] - 600.0) < 1e-6


def test_a_failure_within_the_floor_may_be_the_clients_and_is_material():
    requests, truth = _truth_run((2.0, 30.0))
    floor = floor_mod.measurement_floor(requests, PHASES, 20.0, truth, None)
    criteria = [
        {"name": "TTFT P95", "limit": 800.0, "measured": 1100.0, "passed": False, "where": "step 2", "unit": "ms"},
        {"name": "error rate", "limit": 0.0, "measured": 0.0, "passed": True, "where": "", "unit": "fraction"},
    ]
    result = floor_mod.floor_materiality(floor, criteria)
    assert result["material"]
    (check,) = result["criteria"]
    assert check["may_flip"] and abs(check["floor_model_ms"] - 600.0) < 1e-6
    assert any("may be the client's" in r for r in result["reasons"])


def test_a_small_steady_floor_is_not_material():
    requests, truth = _truth_run((0.5, 0.6))
    floor = floor_mod.measurement_floor(requests, PHASES, 1.0, truth, None)
    criteria = [
        {"name": "TTFT P95", "limit": 800.0, "measured": 300.0, "passed": True, "where": "step 2", "unit": "ms"}
    ]
    assert not floor_mod.floor_materiality(floor, criteria)["material"]


def test_without_truth_the_floor_is_the_generators_loop_lag():
    generator = pd.DataFrame(
        {
            "ts": [1001.0, 1002.0, 1011.0, 1012.0],
            "worker_id": "w0",
            "cpu_percent": 20.0,
            "loop_lag_ms": [1.0, 1.0, 8.0, 8.0],
            "users": 1,
            "inflight": 1,
        }
    )
    requests = make_requests([1001.0, 1011.0], [100.0, 100.0], ttfb_ms=[3.0, 4.0])
    floor = floor_mod.measurement_floor(requests, PHASES, 10.0, None, generator)
    assert floor["method"] == "loop-lag"
    assert abs(floor["floor_model_ms"] - 80.0) < 1e-6 and abs(floor["ttfb_min_model_ms"] - 30.0) < 1e-6


def test_assess_marks_unusable_and_qualify_lowers_confidence_for_a_material_floor():
    bad = validity.assess(_failing(40, 0, 404, "text/plain", "404 page not found"), PHASES, None, [], 1.0)
    assert bad["usable"] is False and "HTTP 404" in bad["reason"]
    requests, truth = _truth_run((2.0, 30.0))
    criteria = [
        {"name": "TTFT P95", "limit": 800.0, "measured": 1100.0, "passed": False, "where": "step 2", "unit": "ms"}
    ]
    shaky = validity.assess(requests, PHASES, None, criteria, 20.0, truth)
    assert shaky["usable"] and not shaky["trustworthy"] and shaky["confidence_steps"] == 1
    verdict = validity.qualify({"layer": "scheduler", "confidence": "high", "evidence": ["queue"]}, shaky)
    assert verdict["confidence"] == "medium" and any("confidence lowered" in e for e in verdict["evidence"])
    assert (
        validity.qualify({"layer": "scheduler", "confidence": "high", "validity_considered": True}, shaky)["confidence"]
        == "high"
    )


def test_redact_removes_keys_tokens_and_url_credentials():
    text = (
        "Authorization: Bearer abc.def.ghi123 from https://alice:s3cret@proxy.local/v1 "
        "api_key=XYZ12345 sk-proj-ABCDEFGHIJKL my-own-key-42"
    )
    out = redact(text, secrets=("my-own-key-42",))
    for secret in ("abc.def.ghi123", "s3cret", "XYZ12345", "sk-proj-ABCDEFGHIJKL", "my-own-key-42"):
        assert secret not in out
    assert "proxy.local" in out
    long = sample("<html>\n" + "x" * 1000, limit=50)
    assert len(long) == 50 and "\n" not in long


def test_the_loop_lag_floor_is_called_an_upper_bound_when_the_kernel_stamped_arrivals():
    generator = pd.DataFrame(
        {
            "ts": [1001.0, 1011.0],
            "worker_id": "w0",
            "cpu_percent": 20.0,
            "loop_lag_ms": [5.0, 5.0],
            "users": 1,
            "inflight": 1,
        }
    )
    requests = make_requests([1001.0, 1011.0], [100.0, 100.0], clock="kernel")
    floor = floor_mod.measurement_floor(requests, PHASES, 1.0, None, generator)
    assert "upper bound" in floor["why"]


LLAMA_OVERFLOW = "HTTP 400: request (2270 tokens) exceeds the available context size (2048 tokens), try increasing it"


def test_invalid_requests_over_one_percent_make_the_run_unusable_with_the_servers_words():
    requests = _failing(3, 97, 400, "application/json", "{}", error_class="invalid_request")
    requests.loc[:2, "error_message"] = LLAMA_OVERFLOW
    out = validity.assess(requests, PHASES, None, [], 1.0)
    assert out["usable"] is False and out["invalid_requests"]["count"] == 3
    assert "3 of 100 requests (3.0%)" in out["reason"] and "exceeds the available context size" in out["reason"]
    assert "--tokenizer" in out["reason"]  # what to change
    finding = next(x for x in out["findings"] if x["kind"] == "invalid-requests")
    assert finding["severity"] == "unusable"


def test_one_percent_or_less_of_invalid_requests_is_a_note_and_the_run_stands():
    requests = _failing(1, 199, 400, "application/json", "{}", error_class="invalid_request")
    requests.loc[:0, "error_message"] = "HTTP 400: 'min_tokens' must be an integer >= 0"
    out = validity.assess(requests, PHASES, None, [], 1.0)
    assert out["usable"] is True and out["reason"] is None
    finding = next(x for x in out["findings"] if x["kind"] == "invalid-requests")
    assert finding["severity"] == "note" and "request option" in finding["message"]


def test_a_run_without_invalid_requests_has_no_such_finding():
    out = validity.assess(_failing(0, 50, 200, "text/event-stream", ""), PHASES, None, [], 1.0)
    assert out["invalid_requests"] is None and not any(x["kind"] == "invalid-requests" for x in out["findings"])


def test_mostly_invalid_requests_are_named_as_such_not_as_a_setup_failure():
    requests = _failing(80, 20, 400, "application/json", "{}", error_class="invalid_request")
    requests.loc[:79, "error_message"] = LLAMA_OVERFLOW
    out = validity.assess(requests, PHASES, None, [], 1.0)
    assert out["setup_failure"] is None and out["usable"] is False
    assert out["reason"].startswith("80 of 100 requests (80.0%) were refused by the server as invalid")
