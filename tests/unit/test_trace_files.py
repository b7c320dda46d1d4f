"""Trace readers (loadline/core/trace.py, loadline/commands/trace_input.py): the formats, and one line per bad file."""

from __future__ import annotations

import json

import pytest

from loadline.commands.trace_input import read_trace
from loadline.core.errors import UsageError
from loadline.core.trace import block_reuse
from loadline.core.trace_synth import mooncake_rows, write_mooncake


def _jsonl(tmp_path, rows, name="t.jsonl"):
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


MOONCAKE = [
    {"timestamp": 1000, "input_length": 1100, "output_length": 10, "hash_ids": [0, 1, 2]},
    {"timestamp": 1500, "input_length": 600, "output_length": 5, "hash_ids": [0, 3]},
    {"timestamp": 1500, "input_length": 20, "output_length": 0, "hash_ids": [4]},
]


def test_mooncake_is_read_with_times_from_the_first_request(tmp_path):
    trace = read_trace(str(_jsonl(tmp_path, MOONCAKE)))
    assert trace.format == "mooncake" and trace.block_tokens == 512
    assert [r.at_s for r in trace.requests] == [0.0, 0.5, 0.5]
    assert [(r.input_tokens, r.output_tokens, r.hash_ids) for r in trace.requests][1] == (600, 5, (0, 3))
    assert [r.index for r in trace.requests] == [0, 1, 2]


def test_loadline_jsonl_and_csv_carry_sessions_and_turns(tmp_path):
    rows = [
        {"timestamp": 0, "input_tokens": 700, "output_tokens": 9, "hash_ids": [7, 8], "session": "a", "turn": 0},
        {"timestamp": 2500, "input_tokens": 1300, "output_tokens": 4, "hash_ids": [7, 8, 9], "session": "a", "turn": 1},
    ]
    trace = read_trace(str(_jsonl(tmp_path, rows)))
    assert trace.format == "loadline" and [(r.session, r.turn) for r in trace.requests] == [("a", 0), ("a", 1)]
    csv = tmp_path / "t.csv"
    csv.write_text(
        "timestamp,input_tokens,output_tokens,hash_ids,session,turn\n0,700,9,7 8,a,0\n2500,1300,4,7 8 9,a,1\n"
    )
    from_csv = read_trace(str(csv))
    assert from_csv.requests == trace.requests


def test_azure_csv_reads_its_date_times(tmp_path):
    path = tmp_path / "azure.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:47.1805900,396,109\n"
        "2023-11-16 18:16:46.6805900,879,12\n"
    )
    trace = read_trace(str(path))
    assert trace.format == "azure"
    assert [round(r.at_s, 3) for r in trace.requests] == [0.0, 0.5, 60.0]
    assert [r.input_tokens for r in trace.requests] == [374, 396, 879]
    assert all(r.hash_ids == () for r in trace.requests)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([MOONCAKE[0], '{"timestamp": 2000, "input_length": 5', MOONCAKE[1]], "line 2: not JSON"),
        ([MOONCAKE[0], {"timestamp": 2000, "output_length": 5}], "line 2: missing field 'input_length'"),
        ([MOONCAKE[1], MOONCAKE[0]], "line 2: timestamp goes backwards"),
        ([{**MOONCAKE[0], "output_length": -3}], "line 1: output_length must be >= 0"),
        ([{**MOONCAKE[0], "input_length": 0, "hash_ids": []}], "line 1: input_length must be >= 1"),
        ([{**MOONCAKE[0], "input_length": 2.5}], "line 1: input_length must be a whole number"),
        ([{**MOONCAKE[0], "hash_ids": [0, 1, 2, 3]}], "line 1: 4 hash_ids for 1100 tokens"),
        ([{**MOONCAKE[0], "hash_ids": "x"}], "line 1: hash_ids must be"),
        ([{**MOONCAKE[0], "timestamp": "soon"}], "line 1: timestamp must be a number"),
    ],
)
def test_a_bad_line_is_one_usage_error_naming_it(tmp_path, rows, message):
    with pytest.raises(UsageError) as caught:
        read_trace(str(_jsonl(tmp_path, rows)), "mooncake")
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_empty_missing_and_unknown_files_are_refused(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(UsageError, match="is empty"):
        read_trace(str(empty))
    with pytest.raises(UsageError, match="not found"):
        read_trace(str(tmp_path / "nope.jsonl"))
    blank = _jsonl(tmp_path, ["", "  "], "blank.jsonl")
    with pytest.raises(UsageError, match="no requests"):
        read_trace(str(blank), "mooncake")
    with pytest.raises(UsageError, match="give --trace-format"):
        read_trace(str(_jsonl(tmp_path, [{"t": 1}], "odd.jsonl")))
    bad_csv = tmp_path / "bad.csv"
    bad_csv.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,374,44\nyesterday,1,1\n")
    with pytest.raises(UsageError, match="line 3: TIMESTAMP 'yesterday' is not a date-time"):
        read_trace(str(bad_csv))
    short_csv = tmp_path / "short.csv"
    short_csv.write_text("TIMESTAMP,ContextTokens\n2023-11-16 18:15:46,374\n")
    with pytest.raises(UsageError, match="missing column 'GeneratedTokens'"):
        read_trace(str(short_csv), "azure")


def test_block_size_is_an_option(tmp_path):
    rows = [{"timestamp": 0, "input_length": 40, "output_length": 1, "hash_ids": [0, 1, 2]}]
    with pytest.raises(UsageError, match="3 hash_ids for 40 tokens"):
        read_trace(str(_jsonl(tmp_path, rows)))
    assert read_trace(str(_jsonl(tmp_path, rows)), block_tokens=16).block_tokens == 16


def test_block_reuse_counts_blocks_seen_before(tmp_path):
    trace = read_trace(str(_jsonl(tmp_path, MOONCAKE)))
    blocks, tokens = block_reuse(trace.requests, 512)
    # blocks 0,1,2 | 0 (seen),3 | 4: one reused of six; its 512 tokens of 1100 + 600 + 20
    assert blocks == pytest.approx(1 / 6)
    assert tokens == pytest.approx(512 / 1720)


def test_synthetic_traces_read_back_with_their_reuse(tmp_path):
    rows = mooncake_rows(400, 10.0, seed=5)
    trace = read_trace(str(write_mooncake(tmp_path / "s.jsonl", rows)))
    assert len(trace.requests) == 400
    blocks, tokens = block_reuse(trace.requests, 512)
    assert 0.3 < blocks < 0.8 and tokens > blocks  # shared system prompts and histories; unique last blocks


def test_the_embedded_simulator_is_sized_for_the_trace_unless_told(tmp_path):
    from loadline.commands.trace_input import sim_overrides
    from loadline.core.trace_warp import warp

    rows = [{"timestamp": i, "input_length": 20_000, "output_length": 100, "hash_ids": list(range(i * 40, i * 40 + 39))}
            for i in range(400)]  # fmt: skip
    schedule = warp(read_trace(str(_jsonl(tmp_path, rows))), (0.0, None), 1.0, [])
    sized = sim_overrides(schedule, "", [])
    assert "max_model_len=20480" in sized
    blocks = int(next(a for a in sized if a.startswith("num_gpu_blocks=")).split("=")[1])
    assert blocks >= 400 * 39 * 512 // 16  # every distinct block, on top of the profile's room
    assert sim_overrides(schedule, "", ["max_model_len=32768", "num_gpu_blocks=999999"]) == []
    small = warp(read_trace(str(_jsonl(tmp_path, MOONCAKE, "small.jsonl"))), (0.0, None), 1.0, [])
    assert sim_overrides(small, "", []) == []  # it fits the profile as it is
