"""Prompts built to a length in the target's tokens, histories trimmed by them (loadline/client/sizing.py),
and the counters of the tokenizer chain (loadline/client/tokenizer.py)."""

from __future__ import annotations

import random
import re

import pytest

from loadline.client.sizing import CALIBRATION_MARGIN, TokenSpace, prompt_budget
from loadline.client.tokenizer import (
    Calibrated,
    Overhead,
    TokenizeError,
    count_in_answer,
    fitted_slope,
    word_count,
)
from loadline.simulator.tokenizer import Tokenizer


class Counting:
    """An exact counter (as the server's /tokenize would be) that counts its own calls."""

    source, exact = "server", True

    def __init__(self, count) -> None:
        self._count, self.calls = count, 0

    def count(self, text: str) -> int:
        self.calls += 1
        return self._count(text)


def _words_counter():
    pattern = re.compile(r"\w+|[^\w\s]")
    return Counting(lambda text: len(pattern.findall(text)))


@pytest.mark.parametrize("piece_chars", [0, 2, 4, 7])
def test_prompts_are_built_to_the_exact_token_count(piece_chars):
    tokenizer = Tokenizer(piece_chars)
    counter = Counting(tokenizer.count)
    space, rng = TokenSpace(counter), random.Random(piece_chars)
    targets = [1, 2, 8, 48, 200, 333, 500, 1000, 2000] + [rng.randint(1, 2500) for _ in range(60)]
    for target in targets:
        text, count = space.build(rng, target)
        assert count == target == tokenizer.count(text), (piece_chars, target)
    assert counter.calls / len(targets) < 12  # not a scan
    space._costs, counter.calls = None, 0  # measured whole: a bracket and a binary search
    for target in targets:
        text, count = space.build(rng, target)
        assert count == target == tokenizer.count(text), (piece_chars, target)
    assert counter.calls / len(targets) < 12


def test_where_words_count_apart_prompts_cost_no_count_after_the_vocabulary_is_known():
    from loadline.client.prompts import VOCABULARY
    from loadline.client.sizing import VERIFY_EVERY, VERIFY_FIRST

    tokenizer = Tokenizer()
    counter = Counting(tokenizer.count)
    space, rng = TokenSpace(counter), random.Random(4)
    for target in [rng.randint(1, 2000) for _ in range(200)]:
        text, count = space.build(rng, target)
        assert count == target == tokenizer.count(text)
    # each word twice (after a space, at the start), then only the verifying counts
    assert counter.calls == 2 * len(VOCABULARY) + VERIFY_FIRST + 200 // VERIFY_EVERY


def test_a_tokenizer_that_merges_across_spaces_is_measured_whole_and_never_overshoots():
    merged = Tokenizer()
    counter = Counting(lambda text: merged.count(text.replace(" ", "")))  # pieces run across word boundaries
    space, rng = TokenSpace(counter), random.Random(6)
    results = [space.build(rng, target) + (target,) for target in [rng.randint(5, 1500) for _ in range(40)]]
    assert space._costs is None  # the first verification found the words do not add up
    assert all(counter.count(text) == count <= target for text, count, target in results[1:])
    assert sum(count == target for _, count, target in results) >= 0.8 * len(results)


def test_measured_the_same_length_again_costs_few_counts_and_gives_different_text():
    counter = Counting(Tokenizer().count)
    space, rng = TokenSpace(counter), random.Random(1)
    space._costs = None  # measuring, as for a tokenizer whose words do not count apart
    first = space.build(rng, 700)[0]
    counter.calls = 0
    texts = {space.build(rng, 700)[0] for _ in range(20)}
    assert counter.calls / 20 <= 8  # the word count that made 700 last time is the first guess
    assert len(texts) == 20 and first not in texts  # random words: no accidental shared prefix


def test_a_shared_system_prompt_is_the_same_text_every_time():
    assert TokenSpace(Counting(Tokenizer().count)).fixed_text(300) == TokenSpace(
        Counting(Tokenizer().count)
    ).fixed_text(300)
    assert Tokenizer().count(TokenSpace(Counting(Tokenizer().count)).fixed_text(300)) == 300


def test_calibration_learns_tokens_per_word_and_the_templates_fixed_tokens():
    calibrated = Calibrated()
    for words in (10, 50, 200, 800):
        calibrated.observe(words, round(1.7 * words) + 7)  # 7: a chat template's tokens
    assert calibrated.ratio == pytest.approx(1.7, abs=0.01)
    one_length = Calibrated()
    one_length.observe(100, 250)
    assert one_length.ratio == pytest.approx(2.5)


def test_calibration_fits_a_slope_only_once_the_replies_pin_it_down():
    alike = Calibrated()
    for units, tokens in ((9.5, 25), (9.75, 24), (10.0, 25)):  # three short prompts a few characters apart
        alike.observe(units, tokens)
    assert alike.ratio == pytest.approx(74 / 29.25)  # tokens over units: errs high, prompts err short
    assert fitted_slope(3, 29.25, 74, 285.3125, 721.5, 1826) is None
    scattered = Calibrated()
    for units, tokens in ((100, 150), (200, 200), (300, 600)):  # a slope of 2.25 +- 1.3
        scattered.observe(units, tokens)
    assert scattered.ratio == pytest.approx(950 / 600)


@pytest.mark.parametrize("piece_chars", [0, 2, 4, 7])
def test_the_first_calibrated_prompts_stay_inside_the_margin_kept_for_the_ratio(piece_chars):
    # requests of 20 to 2,400 tokens in any order: from the first reply on, a long prompt is never
    # counted by the server above its asked length by more than the tenth sizing keeps back
    server, worst = Tokenizer(piece_chars), 0.0
    for seed in range(60):
        space, rng = TokenSpace(), random.Random(seed)
        for _ in range(8):
            target = rng.randint(20, 2400)
            text, _ = space.build(rng, target)
            messages = [{"role": "user", "content": text}]
            sent = len(server.chat_prompt_tokens(messages))
            if target >= 200:
                worst = max(worst, sent / target)
            space.observe("single", messages, sent)
    assert worst <= 1 / CALIBRATION_MARGIN, worst


def test_without_an_exact_counter_prompts_follow_the_learned_ratio():
    space = TokenSpace()  # calibration only
    server = Tokenizer()
    rng = random.Random(5)
    for _ in range(30):  # replies teach it the server's count
        text, _ = space.build(rng, rng.randint(20, 800))
        messages = [{"role": "user", "content": text}]
        space.observe("single", messages, len(server.chat_prompt_tokens(messages)))
    errors = []
    for target in (50, 300, 1000):
        text, _ = space.build(rng, target)
        errors.append(abs(server.count(text) - target) / target)
    assert max(errors) < 0.08, errors
    assert space.source == "calibrated" and not space.exact


def test_the_template_overhead_is_learned_per_message_count_and_scaled_when_unseen():
    overhead = Overhead()
    assert overhead.of("chat", 2) == 15  # nothing known yet: a prior that covers common chat templates
    overhead.observe("chat", 1, counted=20, prompt_tokens=27)
    assert overhead.of("chat", 1) == 7 and overhead.of("chat", 3) == 21 and overhead.of("completion", 1) == 1
    overhead.observe("chat", 3, counted=40, prompt_tokens=55)
    assert overhead.of("chat", 3) == 15
    # two message counts known: a fixed part (3) and a part per message (4), as templates add them
    assert (overhead.of("chat", 2), overhead.of("chat", 5), overhead.of("chat", 9)) == (11, 23, 39)


def test_a_counter_that_fails_falls_back_to_calibration_for_that_count():
    def broken(text):
        raise TokenizeError("POST /tokenize: HTTP 503")

    space = TokenSpace(Counting(broken))
    assert space.count("one two three") == round(Calibrated().ratio * (3 + 13 / 4))  # 3 words, 13 characters


@pytest.mark.parametrize("piece_chars", [0, 2, 4])
def test_the_prior_sizes_a_first_prompt_short_of_what_even_a_small_vocabulary_counts(piece_chars):
    text, asked = TokenSpace().build(random.Random(piece_chars), 1000)
    assert Tokenizer(piece_chars).count(text) <= asked  # before any reply: never over


def _space_words(per_message: int = 4) -> TokenSpace:
    space = TokenSpace(_words_counter())
    space.overhead.observe("chat", 1, counted=0, prompt_tokens=per_message)  # 4 per message, scaled
    return space


def test_fit_drops_oldest_turns_but_keeps_system_and_newest():
    space = _space_words()
    system = {"role": "system", "content": "be brief"}
    turns = []
    for i in range(6):
        turns += [
            {"role": "user", "content": f"question {i} " + "w " * 50},
            {"role": "assistant", "content": f"answer {i} " + "w " * 50},
        ]
    turns.append({"role": "user", "content": "newest " + "w " * 50})
    messages = [system] + turns
    fitted = space.fit("chat", messages, 300)
    assert fitted[0] == system and fitted[-1] == turns[-1]
    assert space.prompt_tokens("chat", fitted) <= 300 and len(fitted) < len(messages)
    assert fitted[1]["role"] == "user"  # whole turns are dropped, the window starts on a question
    assert space.fit("chat", messages, 0) == messages and space.fit("chat", messages, 10**6) == messages


@pytest.mark.parametrize("content", ["a,b;c", "x" * 40, "word " * 30, "é!é!é!", ",,,,,,,,,,"])
def test_fit_leaves_a_prompt_alone_exactly_when_it_fits(content):
    space = _space_words()
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": content}]
    need = space.prompt_tokens("chat", messages)
    for budget in (need - 1, need, need + 1, 10 * need):
        assert (space.fit("chat", messages, budget) is messages) == (budget >= need), (content, budget)


def test_a_newest_message_too_long_on_its_own_is_cut_to_fit():
    space = _space_words()
    system = {"role": "system", "content": "be brief"}
    long = {"role": "user", "content": " ".join(f"w{i}" for i in range(3000))}
    fitted = space.fit(
        "chat", [system, {"role": "user", "content": "old"}, {"role": "assistant", "content": "x"}, long], 500
    )
    assert fitted[0] == system and len(fitted) == 2 and space.prompt_tokens("chat", fitted) == 500
    # 500 = system (2 words + 4) + the cut message (4 + 490 words): the start is kept, in whole words
    assert fitted[1]["content"] == " ".join(f"w{i}" for i in range(490))
    assert long["content"].endswith("w2999")  # the caller's history is not modified


def test_prompt_budget_leaves_room_for_the_reply_in_the_targets_tokens():
    assert prompt_budget(0, 256) == 0  # no known limit: no trimming
    assert prompt_budget(2048, 256) == 2048 - 256  # vLLM: prompt + max_tokens <= context
    assert prompt_budget(2048, 0) == 2047  # llama.cpp: a prompt of n_ctx tokens is refused
    assert prompt_budget(8192, 256, max_input=1024) == 1023  # TGI: inputs must have less than max_input_tokens
    assert prompt_budget(2048, 256, exact=False) == int((2048 - 256) * CALIBRATION_MARGIN)
    assert prompt_budget(100, 256) == 1


@pytest.mark.parametrize(
    "answer, count",
    [
        ({"tokens": [1, 2, 3]}, 3),  # llama.cpp
        ({"count": 4, "max_model_len": 8192, "tokens": [1, 2, 3, 4], "token_strs": None}, 4),  # vLLM, SGLang
        ([{"id": 1, "text": "a", "start": 0, "stop": 1}], 1),  # TGI
    ],
)
def test_every_engines_tokenize_answer_is_counted(answer, count):
    assert count_in_answer(answer) == count


def test_an_answer_that_is_not_a_tokenize_answer_is_refused():
    with pytest.raises(ValueError):
        count_in_answer({"detail": "Not Found"})


def test_word_count_counts_words_and_punctuation():
    assert word_count("Hello, world!") == 4
    from loadline.client.tokenizer import text_units

    assert text_units("Hello, world!") == 4 + 13 / 4


def test_a_hugging_face_tokenizer_counts_when_the_package_is_installed(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers, trainers

    from loadline.client.tokenizer import HFCounter

    tokenizer = tokenizers.Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(
        ["load capacity token latency model server"] * 20, trainers.BpeTrainer(vocab_size=60, special_tokens=["[UNK]"])
    )
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    counter = HFCounter(str(path))
    space, rng = TokenSpace(counter), random.Random(2)
    for target in (10, 100, 400):
        text, count = space.build(rng, target)
        assert count == target == len(tokenizer.encode(text).ids)
    with pytest.raises(TokenizeError, match="could not be loaded"):
        HFCounter(str(tmp_path / "missing.json"))


@pytest.mark.parametrize(
    "answer, field",
    [
        ({"tokens": [1, 2]}, "content"),
        ({"count": 2, "tokens": [1, 2], "max_model_len": 10}, "prompt"),
        ([{"id": 1, "text": "a", "start": 0, "stop": 1}], "inputs"),
    ],
)
def test_after_the_probe_only_the_field_that_engine_reads_is_sent(answer, field):
    from loadline.client.tokenizer import ServerCounter

    sent = []

    class Session:
        def post(self, url, json, timeout):
            sent.append(json)
            return type("R", (), {"status_code": 200, "json": lambda self: answer})()

    counter = ServerCounter(Session(), "http://h/tokenize", 1.0)
    counter.count("hello")
    counter.count("hello again")
    assert set(sent[0]) >= {"content", "prompt", "inputs"}  # the probe speaks every dialect
    assert set(sent[1]) - {"add_special_tokens"} == {field} and sent[1][field] == "hello again"


def test_llama_cpp_pythons_count_route_is_found_when_there_is_no_tokenize():
    from loadline.client.tokenizer import probe_server

    asked = []

    class Session:
        def post(self, url, json, timeout):
            asked.append((url, json))
            found = url.endswith("/extras/tokenize/count")
            answer = {"count": len(json.get("input", "").split())} if found else {"detail": "Not Found"}
            return type("R", (), {"status_code": 200 if found else 404, "json": lambda self: answer})()

    counter = probe_server(Session(), "http://h", 1.0)
    assert counter is not None and counter.url == "http://h/extras/tokenize/count"
    assert counter.count("one two three") == 3 and asked[-1][1] == {"input": "one two three"}


def test_a_tokenizer_option_is_checked_at_test_start(tmp_path, monkeypatch):
    from loadline.client import options
    from loadline.core.errors import UsageError

    assert options.tokenizer_name("  ") == ""
    with pytest.raises(UsageError, match="no such file"):
        options.tokenizer_name(str(tmp_path / "missing" / "tokenizer.json"))
    monkeypatch.setattr(options.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UsageError, match="pip install 'loadline\\[tokenizer\\]'"):
        options.tokenizer_name("meta-llama/Llama-3.1-8B")


def test_users_starting_together_count_the_vocabulary_once():
    import gevent

    from loadline.client.prompts import VOCABULARY

    tokenizer = Tokenizer()

    def slow(text):
        gevent.sleep(0)  # a round trip to the server: other greenlets run meanwhile
        return tokenizer.count(text)

    counter = Counting(slow)
    space = TokenSpace(counter)
    builds = [gevent.spawn(space.build, random.Random(i), 100) for i in range(20)]
    gevent.joinall(builds, timeout=10)
    assert all(b.value[1] == 100 for b in builds)
    assert counter.calls <= 2 * len(VOCABULARY) + 20  # the vocabulary once, then the first builds' checks


@pytest.mark.parametrize("last_error", [0.03, -0.05, 0.08])
def test_one_long_prompt_counted_by_calibration_does_not_move_the_overhead(last_error):
    # calibration counts a 2,000-token prompt a few % off: that reply's difference is tens of tokens
    # beside a template's 10, and a short prompt sized by it alone would miss by as much
    overhead = Overhead()
    rng = random.Random(7)
    for _ in range(12):
        content = rng.randint(200, 1800)
        overhead.observe(
            "single", 1, counted=round(content * (1 + rng.uniform(-0.01, 0.01))), prompt_tokens=content + 10
        )
    overhead.observe("single", 1, counted=round(2000 * (1 + last_error)), prompt_tokens=2000 + 10)
    assert abs(overhead.of("single", 1) - 10) <= 3


def test_an_exact_overhead_stays_exact_and_a_changed_template_is_followed():
    overhead = Overhead()
    overhead.set("chat", 1, 9)
    assert overhead.of("chat", 1) == 9
    for _ in range(30):  # the server's template adds 12 now: the median follows within the window
        overhead.observe("chat", 1, counted=100, prompt_tokens=112)
    assert overhead.of("chat", 1) == 12 and overhead.seen == {("chat", 1): 12}
