"""The web UI's LLM table says, while the run goes, when a worker is saturated."""

from __future__ import annotations

from types import SimpleNamespace

from loadline.core.saturation import SUSTAIN_SAMPLES
from loadline.runtime.selfcheck import GeneratorWriter
from loadline.runtime.webui import _generator


def test_the_generator_row_says_which_worker_is_saturated_now_and_during_the_run():
    writer = GeneratorWriter(SimpleNamespace())  # no active run: rows are judged, not written
    env = SimpleNamespace(loadline_generator_writer=writer)
    assert _generator(SimpleNamespace()) == {"last": "-", "run": ""}
    assert _generator(env)["last"] == "-"
    writer.write([(1000.0 + i, "w1", 40.0, 1.0, 8, None) for i in range(SUSTAIN_SAMPLES)])
    writer.write([(1000.0 + i, "w2", 97.0, 35.0, 8, None) for i in range(SUSTAIN_SAMPLES)])
    row = _generator(env)
    assert "w1: CPU 40 %, loop lag 1 ms;" in row["last"] and "w1: CPU 40 %, loop lag 1 ms SATURATED" not in row["last"]
    assert "w2: CPU 97 %, loop lag 35 ms SATURATED: numbers not trustworthy" in row["last"]
    assert row["run"] == "saturated: w2"
    # w2 recovers: the row's "now" clears, the run column remembers
    writer.write([(1010.0 + i, "w2", 30.0, 1.0, 8, None) for i in range(SUSTAIN_SAMPLES)])
    row = _generator(env)
    assert "SATURATED" not in row["last"] and row["run"] == "saturated: w2"
    # one hot sample is a blip, not saturation (the median over SUSTAIN_SAMPLES)
    writer.write([(1020.0, "w1", 99.0, 50.0, 8, None)])
    assert "SATURATED" not in _generator(env)["last"]


def test_a_worker_starved_by_a_neighbour_is_saturated_at_its_share_of_the_core():
    writer = GeneratorWriter(SimpleNamespace())
    env = SimpleNamespace(loadline_generator_writer=writer)
    writer.write([(1000.0 + i, "w1", 62.0, 8.0, 8, None, 33.0) for i in range(SUSTAIN_SAMPLES)])
    writer.write([(1000.0 + i, "w2", 62.0, 8.0, 8, None, 12.0) for i in range(SUSTAIN_SAMPLES)])
    row = _generator(env)
    assert "w1: CPU 62 % (+33 % waiting for a core), loop lag 8 ms SATURATED" in row["last"]
    assert (
        row["last"].endswith("w2: CPU 62 % (+12 % waiting for a core), loop lag 8 ms") and row["run"] == "saturated: w1"
    )


def test_the_generator_row_says_while_a_workers_first_bytes_watch_rests():
    """watch_resting (generator_metrics.csv's 8th column): said while the last sample says so, gone after."""
    writer = GeneratorWriter(SimpleNamespace())
    env = SimpleNamespace(loadline_generator_writer=writer)
    writer.write([(1000.0 + i, "w1", 62.0, 8.0, 8, None, 33.0, 1) for i in range(SUSTAIN_SAMPLES)])
    writer.write([(1000.0 + i, "w2", 40.0, 1.0, 8, None, 1.0, 0) for i in range(SUSTAIN_SAMPLES)])
    writer.write([(1000.0 + i, "w3", 40.0, 1.0, 8, None, 1.0, None) for i in range(SUSTAIN_SAMPLES)])
    last = _generator(env)["last"]
    assert "w1: CPU 62 % (+33 % waiting for a core), loop lag 8 ms, first-bytes watch resting" in last
    assert last.count("watch resting") == 1
    writer.write([(1010.0, "w1", 30.0, 1.0, 8, None, 1.0, 0)])
    assert "watch resting" not in _generator(env)["last"]
