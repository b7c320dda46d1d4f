"""Pure parts of the users: timing arithmetic, think time, session length, prompts, datasets."""

from __future__ import annotations

import json
import random

import pytest

from loadline.client.measure import fill_timings, nearest_rank
from loadline.client.prompts import LENGTH_CLASSES, PromptSource, load_dataset, parse_lengths, parse_mix
from loadline.client.streaming import StreamResult
from loadline.client.workload import LogNormal, SessionLength, ThinkTime
from loadline.core.errors import UsageError
from loadline.core.records import RequestRecord


def record() -> RequestRecord:
    return RequestRecord("r", "w", "u", "C", "s", 0, "/v1/chat/completions", "m", 0.0)


def test_fill_timings_from_arrivals():
    result = StreamResult(arrivals=[10.100, 10.120, 10.150, 10.160], usage={"completion_tokens": 4, "prompt_tokens": 9})
    rec = record()
    fill_timings(rec, result, t0=10.0, end=10.170)
    assert rec.ttft_ms == pytest.approx(100.0)
    assert rec.e2e_ms == pytest.approx(170.0)
    assert rec.tpot_ms == pytest.approx((170.0 - 100.0) / 3)
    assert rec.itl_us == "20000 30000 10000"
    assert rec.itl_max_ms == pytest.approx(30.0) and rec.itl_p50_ms == pytest.approx(20.0)
    assert (rec.output_tokens, rec.prompt_tokens, rec.tokens_source) == (4, 9, "usage")


def test_fill_timings_counts_chunks_without_usage_and_survives_no_tokens():
    rec = record()
    fill_timings(rec, StreamResult(arrivals=[1.5]), t0=1.0, end=2.0)
    assert (rec.output_tokens, rec.tokens_source, rec.tpot_ms, rec.itl_us) == (1, "chunks", None, "")
    empty = record()
    fill_timings(empty, StreamResult(), t0=1.0, end=1.25)
    assert empty.ttft_ms is None and empty.e2e_ms == pytest.approx(250.0) and empty.output_tokens == 0


def test_nearest_rank():
    values = list(range(1, 101))
    assert nearest_rank(values, 0.5) == 50 and nearest_rank(values, 0.99) == 99 and nearest_rank([7], 0.99) == 7


def test_lognormal_matches_its_mean_and_p90():
    dist = LogNormal(mean=8.0, p90=15.0)
    rng = random.Random(1)
    samples = sorted(dist.sample(rng) for _ in range(40000))
    assert sum(samples) / len(samples) == pytest.approx(8.0, rel=0.03)
    assert samples[int(0.9 * len(samples))] == pytest.approx(15.0, rel=0.04)


def test_lognormal_rejects_impossible_shape():
    with pytest.raises(UsageError, match="too far above"):
        LogNormal(mean=1.0, p90=10.0)


def test_think_time_scales_and_adds_reading_time():
    think = ThinkTime(LogNormal(0.0, 0.0), reading_tokens_per_s=10.0, time_scale=2.0)
    assert think.sample(random.Random(1), reply_tokens=40) == pytest.approx(2.0)


def test_session_length_is_bounded_with_the_right_mean():
    length = SessionLength(mean_turns=4.0, max_turns=50)
    rng = random.Random(3)
    samples = [length.sample(rng) for _ in range(20000)]
    assert min(samples) >= 1 and max(samples) <= 50
    assert sum(samples) / len(samples) == pytest.approx(4.0, rel=0.05)


def test_the_prompt_mix_draws_lengths_in_tokens_within_its_classes():
    source = PromptSource(parse_mix("short=1"))
    rng = random.Random(5)
    low, high = LENGTH_CLASSES["short"]
    assert all(low <= source.draw_tokens(rng) <= high for _ in range(200))
    mixed = PromptSource(parse_mix("short=0.5,long=0.5"))
    draws = [mixed.draw_tokens(rng) for _ in range(2000)]
    assert 0.4 < sum(d >= LENGTH_CLASSES["long"][0] for d in draws) / len(draws) < 0.6
    fixed = PromptSource(parse_mix("short=1"), lengths=parse_lengths("300"))  # --prompt-tokens wins over the mix
    assert {fixed.draw_tokens(rng) for _ in range(20)} == {300}


@pytest.mark.parametrize("spec", ["", "tiny=1", "short=x", "short=0", "short=-1"])
def test_bad_prompt_mix_is_a_usage_error(spec):
    with pytest.raises(UsageError):
        parse_mix(spec)


def test_dataset_formats(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps(
                    {
                        "conversations": [
                            {"from": "human", "value": "hi"},
                            {"from": "gpt", "value": "yo"},
                            {"from": "human", "value": "more"},
                        ]
                    }
                ),
                json.dumps({"messages": [{"role": "user", "content": "q"}]}),
                "",
            ]
        )
    )
    assert load_dataset(path) == (("hi", "more"), ("q",))


def test_bad_dataset_is_one_line(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("{oops\n")
    with pytest.raises(UsageError, match="line 1"):
        load_dataset(path)
    with pytest.raises(UsageError, match="not found"):
        load_dataset(tmp_path / "missing.jsonl")


def test_shipped_dataset_loads():
    from pathlib import Path

    conversations = load_dataset(Path(__file__).resolve().parents[2] / "configs" / "prompts" / "synthetic_chat.jsonl")
    assert len(conversations) >= 20 and all(conversations)


def test_single_requests_draw_from_the_dataset(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(
        json.dumps(
            {
                "conversations": [
                    {"from": "human", "value": "first of A"},
                    {"from": "gpt", "value": "x"},
                    {"from": "human", "value": "second of A"},
                ]
            }
        )
        + "\n"
        + json.dumps({"messages": [{"role": "user", "content": "first of B"}]})
        + "\n"
    )
    source = PromptSource({"long": 1.0}, dataset=load_dataset(path))
    rng = random.Random(3)
    drawn = {source.dataset_message(rng) for _ in range(50)}
    assert drawn == {"first of A", "first of B"}
    assert source.dataset_conversation(random.Random(1)) in (["first of A", "second of A"], ["first of B"])
    assert PromptSource({"long": 1.0}).dataset_message(rng) is None  # synthetic: built to a drawn length


def test_api_key_is_stripped_and_control_characters_are_refused_without_echo(monkeypatch):
    from types import SimpleNamespace

    from loadline.client.options import UserSettings

    def options(key):
        return SimpleNamespace(
            api_key=key,
            model="",
            max_tokens=16,
            max_context_tokens=-1,
            ignore_eos=False,
            prompt_mix="short=1",
            system_prompt_tokens=0,
            dataset="",
            turns_mean=2.0,
            turns_max=3,
            think_mean=1.0,
            think_p90=2.0,
            reading_speed=0.0,
            event_interval=1.0,
            connect_timeout=1.0,
            first_token_timeout=1.0,
            request_timeout=1.0,
            max_retries=0,
            retry_cap=1.0,
            non_streaming=False,
            time_scale=1.0,
            seed=0,
        )

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert UserSettings.from_options(options("sk-abc\n")).api_key == "sk-abc"
    with pytest.raises(UsageError) as info:
        UserSettings.from_options(options("sk-a\x00bc"))
    assert "sk-a" not in str(info.value)


def test_shipped_prompt_set_is_found_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no configs/ here: the package's copy is used
    assert len(load_dataset("configs/prompts/synthetic_chat.jsonl")) > 10
    with pytest.raises(UsageError, match="dataset not found"):
        load_dataset("configs/prompts/no-such-set.jsonl")


def _seeded_user(seed: int, piece_chars: int):
    """An LLMUser's drawing state alone (no Locust environment): settings, a token space counting as a
    server with pieces of `piece_chars` characters would, and the seeded streams."""
    from types import SimpleNamespace

    from loadline.client.options import UserSettings
    from loadline.client.sizing import TokenSpace
    from loadline.client.users.base import LLMUser, user_streams
    from loadline.simulator.tokenizer import Tokenizer

    options = SimpleNamespace(
        api_key="",
        model="",
        max_tokens=64,
        max_context_tokens=4096,
        ignore_eos=False,
        prompt_mix="short=0.5,medium=0.3,long=0.2",
        system_prompt_tokens=0,
        dataset="",
        turns_mean=2.0,
        turns_max=3,
        think_mean=1.0,
        think_p90=2.0,
        reading_speed=0.0,
        event_interval=0.1,
        connect_timeout=1.0,
        first_token_timeout=1.0,
        request_timeout=1.0,
        max_retries=0,
        retry_cap=1.0,
        non_streaming=False,
        time_scale=1.0,
        seed=seed,
    )
    tokenizer = Tokenizer(piece_chars)

    class Exact:
        source, exact = "server", True
        count = staticmethod(tokenizer.count)

    user = object.__new__(LLMUser)
    user.settings = UserSettings.from_options(options)
    user.tokens = TokenSpace(Exact())
    user.rng, user.text_rng = user_streams(seed, 0, "3")
    return user


@pytest.mark.parametrize("seed", [7, 2024])
def test_a_seed_draws_the_same_load_whatever_the_servers_tokenizer(seed):
    # a twin replays its run's seed on the simulator, whose tokenizer is not the real server's: the
    # lengths and think times drawn must not depend on how many words each text took to build
    def load(piece_chars: int) -> list[tuple[int, float]]:
        user = _seeded_user(seed, piece_chars)
        draws = []
        for _ in range(25):
            plan = user.plan([], whole=True)
            draws.append((plan.tokens, round(user.rng.expovariate(10.0), 12)))  # a think time after it
        return draws

    word_level, pieces_of_two, pieces_of_four = load(0), load(2), load(4)
    assert word_level == pieces_of_two == pieces_of_four
    assert len({tokens for tokens, _ in word_level}) > 10  # lengths were drawn, not one fixed value
    other = _seeded_user(seed + 1, 0)
    assert [other.plan([], whole=True).tokens for _ in range(25)] != [t for t, _ in word_level]
