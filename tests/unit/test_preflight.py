"""The pre-load time-scale check: delay x scale against a tenth of the smallest per-request SLO limit."""

from __future__ import annotations

from loadline.core.slo import SLO
from loadline.runtime.preflight import WakeDelay, smallest_limit, timescale_warning, wake_delay


def test_a_busy_machine_at_20x_is_warned_with_a_scale_that_would_do():
    warning = timescale_warning(WakeDelay(0.1, 5.0, 150), 20.0, SLO())
    assert warning is not None
    assert "100 ms of model time" in warning and "TTFT P95 800 ms" in warning and "--time-scale 16 or lower" in warning


def test_a_quiet_machine_or_real_time_is_not_warned():
    assert timescale_warning(WakeDelay(0.05, 0.2, 150), 20.0, SLO()) is None
    assert timescale_warning(WakeDelay(0.1, 5.0, 150), 1.0, SLO()) is None


def test_the_smallest_per_request_limit_decides_and_none_means_no_warning():
    assert smallest_limit(SLO(ttft_p95_ms=None, e2e_p95_ms=400.0)) == ("e2e_p95_ms", 400.0)
    none = SLO(ttft_p95_ms=None, e2e_p95_ms=None, e2e_p99_ms=None)
    assert timescale_warning(WakeDelay(1.0, 50.0, 150), 20.0, none) is None


def test_wake_delay_measures_something_bounded():
    delay = wake_delay(samples=5)
    assert delay.samples == 5 and 0.0 <= delay.p50_ms <= delay.p95_ms
