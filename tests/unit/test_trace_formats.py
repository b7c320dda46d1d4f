"""Trace formats as their publishers ship them (tests/data/traces: the real layouts, a few rows each):
BurstGPT's CSV, Azure's 2023 and 2024 CSVs, Qwen Bailian's JSONL, Parquet conversions of the CSV
ones; and a malformed file of each kind refused in one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from loadline.core.errors import UsageError
from loadline.core.trace_files import read_trace, warped

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"


def test_burstgpt_csv_has_seconds_and_its_failures_ask_for_no_output():
    trace = read_trace(str(DATA / "burstgpt.csv"))
    assert trace.format == "burstgpt"
    assert [r.at_s for r in trace.requests] == [0.0, 40.0, 113.0, 113.0, 166.0]
    assert [(r.input_tokens, r.output_tokens) for r in trace.requests][:2] == [(472, 18), (1087, 0)]
    assert all(r.hash_ids == () and r.session == "" for r in trace.requests)


@pytest.mark.parametrize("name", ["burstgpt", "azure_code_1week_2024"])
def test_parquet_reads_as_its_csv(name):
    from_csv = read_trace(str(DATA / f"{name}.csv"))
    from_parquet = read_trace(str(DATA / f"{name}.parquet"))
    assert from_parquet.format == from_csv.format
    assert [r.at_s for r in from_parquet.requests] == pytest.approx([r.at_s for r in from_csv.requests], abs=1e-6)
    assert [(r.input_tokens, r.output_tokens) for r in from_parquet.requests] == [
        (r.input_tokens, r.output_tokens) for r in from_csv.requests
    ]


def test_azure_2023_and_2024_stamps_with_and_without_a_fraction_or_zone():
    old = read_trace(str(DATA / "azure_conv_2023.csv"))
    assert [round(r.at_s, 6) for r in old.requests] == [0.0, 4.314579, 4.5, 10.0]
    new = read_trace(str(DATA / "azure_code_1week_2024.csv"))
    assert [round(r.at_s, 6) for r in new.requests] == [0.0, 0.99007, 1.51317, 2.09614]


def test_bailian_seconds_16_token_blocks_and_conversations_followed_up_their_parents():
    trace = read_trace(str(DATA / "qwen_traceA_blksz_16.jsonl"))
    assert (trace.format, trace.block_tokens) == ("bailian", 16)
    assert [r.at_s for r in trace.requests] == [0.0, 0.412, 61.114, 75.5]
    assert [r.session for r in trace.requests] == ["0", "1", "0", "0"]  # chat 3's parent 2's parent is 0
    assert [r.turn for r in trace.requests] == [1, 1, 2, 3]
    schedule = warped(str(DATA / "qwen_traceA_blksz_16.jsonl"), "auto", 0, 4.0, "", "")
    assert [r.due_s for r in schedule.requests] == pytest.approx([0.0, 0.103, 15.2785, 18.875])


def _broken(tmp_path: Path, name: str, text: str | None = None, cut: int | None = None) -> str:
    path = tmp_path / name
    if cut is not None:
        path.write_bytes((DATA / name).read_bytes()[:cut])
    else:
        path.write_text(text or "")
    return str(path)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("burstgpt.csv", "Timestamp,Model,Request tokens,Response tokens\n5,ChatGPT,many,18\n",
         "line 2: Request tokens must be a whole number of tokens (got 'many')"),
        ("burstgpt.csv", "Timestamp,Model,Request tokens\n5,ChatGPT,472\n", "missing column 'Response tokens'"),
        ("burstgpt.csv", "Timestamp,Model,Request tokens,Response tokens\n5,ChatGPT,472,18\n4,ChatGPT,1,1\n",
         "line 3: timestamp goes backwards"),
        ("azure_code_1week_2024.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 25:00:00+00:00,1,1\n",
         "line 2: TIMESTAMP '2024-05-10 25:00:00+00:00' is not a date-time"),
        ("qwen_traceA_blksz_16.jsonl", '{"chat_id": 0, "parent_chat_id": -1, "timestamp": 0.0, "input_length": 4}\n',
         "line 1: missing field 'output_length'"),
        ("odd.csv", "when,tokens\n1,2\n", "no column says its format"),
    ],
)  # fmt: skip
def test_a_malformed_file_is_one_usage_error(tmp_path, name, text, message):
    with pytest.raises(UsageError) as caught:
        read_trace(_broken(tmp_path, name, text))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_truncated_parquet_file_is_one_usage_error(tmp_path):
    with pytest.raises(UsageError) as caught:
        read_trace(_broken(tmp_path, "burstgpt.parquet", cut=900))
    assert "not a readable Parquet file" in str(caught.value) and "\n" not in str(caught.value)
    renamed = tmp_path / "azure.parquet"
    shutil.copy(DATA / "azure_conv_2023.csv", renamed)  # a CSV named .parquet
    with pytest.raises(UsageError, match="not a readable Parquet file"):
        read_trace(str(renamed))


def test_csv_sessions_and_single_block_ids_are_kept_as_written(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("timestamp,input_tokens,output_tokens,hash_ids,session,turn\n0,700,9,7,007,0\n5,700,9,,7,0\n")
    trace = read_trace(str(path))
    assert [(r.hash_ids, r.session) for r in trace.requests] == [((7,), "007"), ((), "7")]


def test_a_window_keeps_its_requests_with_their_file_positions_and_reads_no_further(tmp_path):
    path = tmp_path / "week.csv"
    rows = [f"2024-05-10 00:{m:02d}:00+00:00,{100 + m},5" for m in range(10)]
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\nnot a row,1,1\n")
    with pytest.raises(UsageError, match="line 12: TIMESTAMP 'not a row' is not a date-time"):
        read_trace(str(path))
    hour = read_trace(str(path), window=(120.0, 300.0))  # minutes 2, 3 and 4; the bad last line is never read
    assert [(r.at_s, r.input_tokens, r.index) for r in hour.requests] == [(120.0, 102, 2), (180.0, 103, 3),
                                                                          (240.0, 104, 4)]  # fmt: skip
    schedule = warped(str(path), "auto", 0, 2.0, "2m..5m", "")
    assert [(r.due_s, r.trace_index) for r in schedule.requests] == [(0.0, 2), (30.0, 3), (60.0, 4)]
    with pytest.raises(UsageError, match="--trace-window 3000s.. holds none of the trace's requests"):
        read_trace(str(DATA / "azure_conv_2023.csv"), window=(3000.0, None))


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("tab.tsv", "timestamp\tinput_tokens\toutput_tokens\n0\t700\t90\n41000\t1400\t60\n"),
        ("excel.csv", "\ufefftimestamp,input_tokens,output_tokens\n0,700,90\n41000,1400,60\n"),
        (
            "bom.jsonl",
            '\ufeff{"timestamp": 0, "input_tokens": 700, "output_tokens": 90}\n'
            '{"timestamp": 41000, "input_tokens": 1400, "output_tokens": 60}\n',
        ),  # fmt: skip
    ],
)
def test_a_tab_separated_file_and_files_with_a_byte_order_mark_read_as_their_columns(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    trace = read_trace(str(path))
    assert trace.format == "loadline"
    assert [(r.at_s, r.input_tokens, r.output_tokens) for r in trace.requests] == [(0.0, 700, 90), (41.0, 1400, 60)]


@pytest.mark.parametrize("speed", [0.0, -2.0, float("nan")])
def test_a_bad_speed_is_refused_before_the_file_is_read(speed):
    with pytest.raises(UsageError, match="--trace-speed must be > 0"):
        warped("nowhere.csv", "auto", 0, speed, "", "")
