"""tests/run_shards.py deals test files to parallel pytest processes: each file exactly once, the
longest first onto the least loaded process, and the exclusive tests found by their marker."""

from __future__ import annotations

import pytest

from tests.run_shards import DEFAULT_S, _file_of, deal, exclusive_files, suite_files


@pytest.mark.parametrize("shards", [1, 2, 3, 5])
def test_every_file_lands_in_exactly_one_shard(shards):
    files = [f"tests/t{i}.py" for i in range(11)]
    dealt = deal(files, {f: float(i) for i, f in enumerate(files)}, shards)
    flat = [f for shard in dealt for f in shard]
    assert sorted(flat) == sorted(files) and len(dealt) == min(shards, len(files))


def test_the_longest_files_are_spread_and_the_loads_balance():
    durations = {"tests/a.py": 300.0, "tests/b.py": 250.0, "tests/c.py": 200.0, "tests/d.py": 100.0,
                 "tests/e.py": 50.0, "tests/f.py": 50.0}
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
