"""Trace warping, shares and prompts (loadline/core/trace_warp.py, loadline/client/trace_prompts.py)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from loadline.client.sizing import TokenSpace
from loadline.client.trace_prompts import BlockTexts
from loadline.core.errors import UsageError
from loadline.core.trace import Trace, TraceRequest
from loadline.core.trace_warp import parse_span, parse_surges, parse_window, read, share, warp, write
from loadline.simulator.kvcache import prefix_hashes
from loadline.simulator.tokenizer import Tokenizer


def _trace(n=600, gap=0.5, sessions=False) -> Trace:
    requests = tuple(
        TraceRequest(i * gap, 100 + i, 10, (i % 7, 100 + i), f"s{i % 13}" if sessions else "", i // 13, i)
        for i in range(n)
    )
    return Trace("mem", "mooncake", 512, requests)


def test_spans_windows_and_surges_parse():
    assert parse_span("90", "x") == 90 and parse_span("1h30m", "x") == 5400 and parse_span("2.5m", "x") == 150
    assert parse_window("2h..3h") == (7200, 10800) and parse_window("..30m") == (0, 1800)
    assert parse_window("600..") == (600, None) and parse_window("") == (0, None)
    (surge,) = parse_surges("3x@10m+2m")
    assert (surge.factor, surge.at_s, surge.for_s) == (3, 600, 120)
    for bad in ("3x10m", "1x@1m+1m", "3x@1m+0", "x@1m+1m"):
        with pytest.raises(UsageError):
            parse_surges(bad)
    for bad in ("2h", "3h..2h", "a..b"):
        with pytest.raises(UsageError):
            parse_window(bad)
    with pytest.raises(UsageError, match="overlap"):
        parse_surges("2x@10s+20s,3x@20s+5s")


def test_speed_and_window_warp_the_times():
    trace = _trace()
    schedule = warp(trace, (60.0, 120.0), 4.0, [])
    assert len(schedule.requests) == 120  # 60 s at one request every 0.5 s
    assert schedule.requests[0].due_s == 0 and schedule.requests[1].due_s == pytest.approx(0.125)
    assert schedule.duration_s == pytest.approx(15.0)
    assert [p.label for p in schedule.phases] == ["replay"] and schedule.phases[0].requests == 120
    assert {r.trace_index for r in schedule.requests} == set(range(120, 240))
    with pytest.raises(UsageError, match="holds none"):
        warp(trace, (1000.0, None), 1.0, [])
    with pytest.raises(UsageError, match="--trace-speed"):
        warp(trace, (0.0, None), 0.0, [])


def test_a_surge_multiplies_the_rate_over_its_stretch_only():
    trace = _trace()
    schedule = warp(trace, (0.0, None), 2.0, parse_surges("3x@100s+50s"))
    before, surge, after = schedule.phases
    assert (before.kind, surge.kind, after.kind) == ("baseline", "burst", "recover")
    assert (surge.start_s, surge.end_s) == (50.0, 75.0)
    assert surge.requests == 300 and before.requests == 200  # 100 trace requests x 3; 200 untouched
    assert surge.rate == pytest.approx(3 * before.rate)
    per_second = Counter(int(r.due_s) for r in schedule.requests)
    assert all(per_second[s] == 12 for s in range(50, 75)) and all(per_second[s] == 4 for s in range(0, 50))
    copies = [r for r in schedule.requests if 50 <= r.due_s < 75]
    hashes = Counter(r.hash_ids[1] for r in copies)
    assert max(hashes.values()) == 1  # each copy has its own blocks: not the original prompt resent


def test_a_fractional_surge_and_a_dip_are_seeded():
    trace = _trace()
    one = warp(trace, (0.0, None), 1.0, parse_surges("1.5x@0+100s"))
    two = warp(trace, (0.0, None), 1.0, parse_surges("1.5x@0+100s"))
    assert one.requests == two.requests
    assert 270 <= one.phases[0].requests <= 330  # 200 x 1.5
    dip = warp(trace, (0.0, None), 1.0, parse_surges("0.5x@0+100s"))
    assert 70 <= dip.phases[0].requests <= 130


def test_shares_partition_the_schedule_and_keep_sessions_whole():
    for sessions in (False, True):
        requests = warp(_trace(sessions=sessions), (0.0, None), 1.0, []).requests
        shares = [share(requests, k, 3) for k in range(3)]
        assert sorted(r.trace_index for s in shares for r in s) == list(range(600))
        assert all(len(s) > 100 for s in shares)
        if sessions:
            owners = {r.session: k for k, s in enumerate(shares) for r in s}
            assert all(owners[r.session] == k for k, s in enumerate(shares) for r in s)


def test_the_schedule_file_round_trips(tmp_path):
    schedule = warp(_trace(sessions=True), (0.0, 30.0), 2.0, parse_surges("2x@10s+5s"))
    write(schedule, tmp_path / "s.jsonl")
    header, requests = read(tmp_path / "s.jsonl")
    assert requests == [type(r).of_row(r.row()) for r in schedule.requests]
    assert header["requests"] == len(requests) and header["speed"] == 2.0
    assert [p["label"] for p in header["phases"]] == ["replay", "surge-1 (x2)", "after-surge-1"]


def test_prompts_share_exactly_their_blocks_and_have_the_traces_length():
    tokenizer = Tokenizer()
    space = TokenSpace(_Exact(tokenizer.count))
    texts = BlockTexts(space, 64, seed=1)
    rng = random.Random(2)
    for _ in range(40):
        length = rng.randint(1, 300)
        messages, counted = texts.messages(tuple(range(rng.randint(0, 5))), length)
        assert counted == max(length, space.overhead.of("chat", 1) + 1)
        assert tokenizer.count(messages[0]["content"]) + space.overhead.of("chat", 1) == counted
    a = tokenizer.chat_prompt_tokens(texts.messages((1, 2, 3), 64 * 3)[0])
    b = tokenizer.chat_prompt_tokens(texts.messages((1, 2, 9), 64 * 3)[0])
    c = tokenizer.chat_prompt_tokens(texts.messages((5, 2, 3), 64 * 3)[0])
    shared = [x == y for x, y in zip(prefix_hashes(a, 16), prefix_hashes(b, 16))]
    assert sum(shared) == (3 + 2 * 64) // 16 and all(shared[: sum(shared)])  # the template and two blocks
    assert prefix_hashes(a, 16)[0] != prefix_hashes(c, 16)[0]
    # a partial last block is the first tokens of its block, so it shares what it has
    part = tokenizer.chat_prompt_tokens(texts.messages((1, 2, 3), 64 * 2 + 40)[0])
    assert part[: len(part) - 4] == a[: len(part) - 4]  # less <|end|> and the assistant primer


class _Exact:
    source, exact = "server", True

    def __init__(self, count) -> None:
        self.count = count


def test_a_jsonl_trace_loads_as_its_own_schedule(tmp_path):
    from loadline.core.trace_warp import load

    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"timestamp": 0, "input_length": 9, "output_length": 1}\n{"timestamp": 1500, "input_length": 7, "output_length": 2}\n'
    )
    header, requests = load(path)
    assert [(r.due_s, r.input_tokens) for r in requests] == [(0.0, 9), (1.5, 7)]
    assert header["format"] == "mooncake" and [p["label"] for p in header["phases"]] == ["replay"]
    schedule = warp(_trace(n=20), (0.0, None), 2.0, [])
    write(schedule, tmp_path / "s.jsonl")
    assert load(tmp_path / "s.jsonl")[1] == schedule.requests
