"""The trace shape's schedule from Locust's options (shapes/trace_source.py): a raw --trace-file warped
on the master, or a --trace-schedule read as written; a mix of the two refused in one line."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

import pytest

from loadline.core.errors import UsageError
from loadline.core.trace_files import warped
from loadline.core.trace_warp import write
from loadline.shapes.trace_source import source_of

BURSTGPT = Path(__file__).resolve().parents[1] / "data" / "traces" / "burstgpt.csv"


def options(**given) -> Namespace:
    defaults = {"trace_file": "", "trace_schedule": "", "trace_format": "auto", "trace_speed": 1.0,
                "trace_window": "", "trace_surge": "", "trace_block_tokens": 0}  # fmt: skip
    return Namespace(**{**defaults, **given})


def test_a_trace_file_is_warped_by_the_options_and_handed_out_by_the_master():
    source = source_of(options(trace_file=str(BURSTGPT), trace_speed=4.0, trace_window="40s..", trace_surge="2x@0+1m"))
    assert source.shipped
    assert source.header["speed"] == 4.0 and source.header["trace_requests"] == 4  # the first row is before 40 s
    # the window's first request, then its copy spread into the surge's minute (30 s), at speed 4
    assert [r.due_s for r in source.requests][:2] == [0.0, 7.5]
    assert source.header["phases"][0]["kind"] == "burst"


def test_a_schedule_is_read_as_written_and_each_process_reads_it(tmp_path):
    path = tmp_path / "trace-schedule.jsonl"
    write(warped(str(BURSTGPT), "auto", 0, 2.0, "", ""), path)
    source = source_of(options(trace_schedule=str(path)))
    assert not source.shipped and source.header["speed"] == 2.0 and len(source.requests) == 5


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({}, "--trace-file FILE"),
        ({"trace_file": "a.csv", "trace_schedule": "b.jsonl"}, "give one trace"),
        ({"trace_schedule": "b.jsonl", "trace_speed": 3.0}, "apply to --trace-file"),
        ({"trace_schedule": "b.jsonl", "trace_surge": "2x@1m+1m"}, "apply to --trace-file"),
        ({"trace_file": str(BURSTGPT), "trace_speed": 0.0}, "--trace-speed must be > 0"),
        ({"trace_file": str(BURSTGPT), "trace_surge": "2x@1h+1m"}, "starts after the replay"),
        ({"trace_file": "nowhere.csv"}, "trace not found: nowhere.csv"),
    ],
)
def test_bad_options_are_one_line(given, message):
    with pytest.raises(UsageError) as caught:
        source_of(options(**given))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_master_with_no_worker_connected_refuses_the_replay_before_reading_the_trace():
    from locust.runners import MasterRunner

    from loadline.shapes.trace import TraceShape

    class NoWorkers(MasterRunner):
        worker_count = 0  # type: ignore[assignment]  # Locust's property: the workers ready or running

        def __init__(self) -> None:  # no sockets: only the worker count is read
            pass

        def __del__(self) -> None:  # nothing was started
            pass

    shape = TraceShape()
    shape.runner = NoWorkers()
    with pytest.raises(UsageError, match="no worker is connected"):
        shape.plan(options(trace_file="nowhere.csv"))  # refused before the file is looked for


def test_a_worker_joining_during_a_replay_is_warned_about_and_not_before_or_after(caplog):
    from locust.env import Environment

    from loadline.runtime import trace

    env = Environment(events=None)
    trace.install_master(env)
    with caplog.at_level("WARNING", logger="loadline"):
        env.events.worker_connect.fire(client_id="w-before")
        trace._replay["start"] = 1000.0  # what publish() sets on the master
        env.events.worker_connect.fire(client_id="w-during")
        trace.stop()
        env.events.worker_connect.fire(client_id="w-after")
    warned = [r.getMessage() for r in caplog.records if "joined during the trace replay" in r.getMessage()]
    assert len(warned) == 1 and "w-during" in warned[0]
