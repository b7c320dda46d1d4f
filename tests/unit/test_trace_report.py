"""The trace-replay report's numbers (analysis/stats/trace_replay.py) and a trace surge as a recovery event."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loadline.analysis.stats.recovery import find_events
from loadline.analysis.stats.trace_replay import engine_hit_rate, offered_vs_achieved


def test_offered_and_sent_are_compared_per_bin_and_per_second():
    due = np.array([0.1, 0.5, 1.2, 1.9, 2.5, 30.0])
    sent = due + 0.002
    sent[3] = 2.01  # late across a second's edge
    table = offered_vs_achieved(due, due[:4], sent, 40.0)
    assert table["bin_s"] == 2.0
    first = table["bins"][0]
    assert (first["trace_per_min"], first["scheduled_per_min"], first["sent_per_min"]) == (120.0, 120.0, 90.0)
    assert table["seconds"] == 40 and table["seconds_matching"] == 38 and table["max_second_diff"] == 1


def _metrics(rows):
    return pd.DataFrame(rows, columns=["ts", "source", "metric", "labels", "value"])


def test_the_engine_hit_rate_comes_from_counter_increases_over_every_engine():
    rows = []
    for engine, (hits, queries) in {"0": ((10, 60, 110), (100, 200, 300)), "1": ((0, 30, 5), (0, 100, 20))}.items():
        for ts, h, q in zip((1, 2, 3), hits, queries):
            rows += [(ts, "target", "vllm:prefix_cache_hits_total", engine, h)]
            rows += [(ts, "target", "vllm:prefix_cache_queries_total", engine, q)]
    rate = engine_hit_rate(_metrics(rows))
    # engine 0: 100 of 200; engine 1 restarted (a counter reset): 30 + 5 of 100 + 20
    assert rate["hit_rate"] == pytest.approx(135 / 320)
    gauge = _metrics(
        [
            (1, "target", "vllm:gpu_prefix_cache_hit_rate", "", 0.4),
            (2, "target", "vllm:gpu_prefix_cache_hit_rate", "", 0.6),
        ]
    )
    assert engine_hit_rate(gauge)["hit_rate"] == pytest.approx(0.5)
    assert engine_hit_rate(_metrics([]))["hit_rate"] is None


def test_a_burst_offering_a_higher_rate_is_a_surge_event():
    phases = pd.DataFrame(
        [
            ("start", "hold", 0.0, 2.0, 1, None),
            ("replay", "baseline", 2.0, 12.0, 1, 4.0),
            ("surge-1 (x3)", "burst", 12.0, 17.0, 1, 12.0),
            ("after-surge-1", "recover", 17.0, 40.0, 1, 4.0),
        ],
        columns=["label", "kind", "start_wall", "end_wall", "target_users", "target_rate"],
    )
    (event,) = find_events(phases)
    assert event.position == 2 and event.surge_factor == pytest.approx(3.0)
