"""Locust's stats fed in bulk (loadline/client/locust_stats.py): the ITL entry of a reply's gaps
logged at once equals one log per gap."""

from __future__ import annotations

from collections import defaultdict

import pytest
from locust.stats import RequestStats

from loadline.client.locust_stats import log_many


def test_log_many_equals_one_log_per_gap():
    gaps_ms = [10.0, 10.4, 9.6, 0.02, 99.5, 150.0, 12.0, 10.0, 2500.0]
    one_by_one, bulk = RequestStats().get("/x", "ITL"), RequestStats().get("/x", "ITL")
    for gap in gaps_ms:
        one_by_one.log(gap, 0)
    log_many(bulk, gaps_ms)
    log_many(bulk, [])
    for name in (
        "num_requests",
        "total_response_time",
        "min_response_time",
        "max_response_time",
        "total_content_length",
        "num_none_requests",
    ):
        assert getattr(bulk, name) == pytest.approx(getattr(one_by_one, name)), name
    assert dict(bulk.response_times) == dict(one_by_one.response_times)
    assert sum(bulk.num_reqs_per_sec.values()) == len(gaps_ms)
    assert bulk.get_response_time_percentile(0.5) == one_by_one.get_response_time_percentile(0.5)
    assert isinstance(bulk.response_times, defaultdict)
