"""tests/run_shards.py deals test files to parallel pytest processes: each file exactly once, the
longest first onto the least loaded process, and the exclusive tests found by their marker."""

from __future__ import annotations

import json

import pytest

import tests.run_shards as run_shards
from tests.run_shards import DEFAULT_S, _file_of, _record, deal, exclusive_files, suite_files


@pytest.mark.parametrize("shards", [1, 2, 3, 5])
def test_every_file_lands_in_exactly_one_shard(shards):
    files = [f"tests/t{i}.py" for i in range(11)]
    dealt = deal(files, {f: float(i) for i, f in enumerate(files)}, shards)
    flat = [f for shard in dealt for f in shard]
    assert sorted(flat) == sorted(files) and len(dealt) == min(shards, len(files))


def test_the_longest_files_are_spread_and_the_loads_balance():
    durations = {
        "tests/a.py": 300.0,
        "tests/b.py": 250.0,
        "tests/c.py": 200.0,
        "tests/d.py": 100.0,
        "tests/e.py": 50.0,
        "tests/f.py": 50.0,
    }
    dealt = deal(list(durations), durations, 3)
    loads = sorted(sum(durations[f] for f in shard) for shard in dealt)
    assert loads == [300.0, 300.0, 350.0]  # LPT: a | b + e | c + d + f
    assert all(len({"tests/a.py", "tests/b.py", "tests/c.py"} & set(shard)) == 1 for shard in dealt)


def test_a_file_without_a_recorded_duration_counts_the_default():
    dealt = deal(["tests/new.py", "tests/old.py"], {"tests/old.py": DEFAULT_S * 3}, 2)
    assert sorted(map(tuple, dealt)) == [("tests/new.py",), ("tests/old.py",)]


def test_exclusive_files_are_those_with_the_marker_and_junit_names_map_to_files():
    found = exclusive_files()
    assert "tests/e2e/test_kernel_clock_e2e.py" in found and set(found) <= set(suite_files())
    assert "tests/unit/test_run_shards.py" not in found
    assert _file_of("tests.e2e.test_run_spine") == "tests/e2e/test_run_spine.py"
    assert _file_of("tests.unit.test_run_shards.SomeClass") == "tests/unit/test_run_shards.py"
    assert _file_of("nowhere.module") is None


@pytest.mark.parametrize("old_exclusive_s", [116.9, 0.0])
def test_recording_counts_a_file_with_only_exclusive_tests_as_zero(tmp_path, monkeypatch, old_exclusive_s):
    """A file whose tests all run apart takes no time in the parallel phase; a time kept from an older
    record once dealt it 117 s of a shard it never used (that shard ended 110 s before the others)."""
    durations = tmp_path / "durations.json"
    durations.write_text(
        json.dumps(
            {
                "tests/e2e/test_run_spine.py": 50.0,
                "tests/e2e/test_analysis_sim_e2e.py": old_exclusive_s,
                "tests/unit/test_gone.py": 3.0,
            }
        )
    )
    monkeypatch.setattr(run_shards, "DURATIONS", durations)
    junit = tmp_path / "shard-0.xml"
    junit.write_text(
        '<testsuites><testsuite><testcase classname="tests.e2e.test_run_spine" time="7.5"/>'
        '<testcase classname="tests.e2e.test_run_spine" time="2.5"/></testsuite></testsuites>'
    )
    _record([junit, tmp_path / "absent.xml"], ["tests/e2e/test_run_spine.py", "tests/e2e/test_analysis_sim_e2e.py"])
    assert json.loads(durations.read_text()) == {
        "tests/e2e/test_analysis_sim_e2e.py": 0.0,
        "tests/e2e/test_run_spine.py": 10.0,
        "tests/unit/test_gone.py": 3.0,
    }
