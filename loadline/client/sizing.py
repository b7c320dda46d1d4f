"""Prompts built to a length in the target's tokens, and histories trimmed by them.

A `TokenSpace` is one host's way of counting (tokenizer.py's chain) shared by a process's users:
the counter, what the chat template adds (`Overhead`, learned from usage), a cache of counted
texts (a chat resends its history every turn) and, per asked length, how many words made it last
time. Building and counting happen before a request is sent, never per token.

Building a text of N tokens with an exact counter (a Hugging Face tokenizer, the server's
/tokenize): the prompt vocabulary's words are counted once each (with and without a leading space),
and a text is random words whose counts add up to N, the last ones picked among those that still
fit. That holds where the tokenizer splits text at spaces before it merges pieces (GPT-2 and Llama 3
byte-level BPE, the simulator's), and costs no request to the server per prompt; the first builds
and then one in VERIFY_EVERY are counted whole, and the first that does not add up switches to
measuring: random words, a guess of how many (the last build of that length, else the tokens per
word seen so far), the bracket widened until it straddles N, a binary search on the word count for
the longest text of at most N tokens, then short filler words added while one still fits (~6
counts per prompt). With calibration the text is as exact as the ratio.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import gevent.lock

from loadline.client.prompts import VOCABULARY, words
from loadline.client.tokenizer import (
    CALIBRATED,
    CHARS_PER_UNIT,
    Calibrated,
    Counter,
    HFCounter,
    Overhead,
    ServerCounter,
    TokenizeError,
    probe_server,
    template_tokens,
    text_units,
)

log = logging.getLogger("loadline")

FILLERS = (" a", " to", " of", " in", " is", " on", " it", " I", ".")
VERIFY_FIRST, VERIFY_EVERY = 3, 50  # additive builds counted whole: the first ones, then one in 50
MAX_COUNTS = 40  # counts one build may spend (a bracket and binary search over 4,000 words is ~24)
_CACHE_TEXTS = 4096  # counted texts kept (a chat's history turns, system prompts)
_CACHE_HINTS = 4096  # lengths whose word count is remembered
# Share of the context a calibrated prompt may fill: calibration's ratio varies by ~5 % between
# texts of the same vocabulary (the simulator's pieces, BPE merges), so a tenth is kept back.
CALIBRATION_MARGIN = 0.9


@dataclass
class TokenSpace:
    primary: Counter | None = None  # None: calibration only
    calibrated: Calibrated = field(default_factory=Calibrated)
    overhead: Overhead = field(default_factory=Overhead)
    _counts: dict[str, int] = field(default_factory=dict, repr=False)
    _hints: dict[int, int] = field(default_factory=dict, repr=False)
    _built: list[int] = field(default_factory=lambda: [0, 0], repr=False)  # tokens, words of builds
    _fixed: dict[int, str] = field(default_factory=dict, repr=False)
    _warned: bool = False
    # per word of the vocabulary: (tokens after a space, tokens at the start); None = not additive
    _costs: dict[str, tuple[int, int]] | None = field(default_factory=dict, repr=False)
    _additive_builds: int = 0
    _costs_lock: gevent.lock.BoundedSemaphore = field(default_factory=gevent.lock.BoundedSemaphore, repr=False)

    @property
    def source(self) -> str:
        return self.primary.source if self.primary is not None else CALIBRATED

    @property
    def exact(self) -> bool:
        return self.primary is not None

    # -- counting ----------------------------------------------------------------------------
    def count(self, text: str) -> int:
        if not text:
            return 0
        if self.primary is None:
            return self.calibrated.count(text)  # the ratio moves: not cached
        if (known := self._counts.get(text)) is not None:
            return known
        try:
            n = self.primary.count(text)
        except TokenizeError as exc:
            if not self._warned:
                self._warned = True
                log.warning("loadline: counting tokens by calibration: %s", exc)
            return self.calibrated.count(text)
        self._remember_count(text, n)
        return n

    def _remember_count(self, text: str, n: int) -> None:
        if len(self._counts) >= _CACHE_TEXTS:
            self._counts.pop(next(iter(self._counts)))
        self._counts[text] = n

    def content_tokens(self, messages: list[dict]) -> int:
        return sum(self.count(m["content"]) for m in messages)

    def prompt_tokens(self, kind: str, messages: list[dict]) -> int:
        """The whole prompt as the server will count it: texts plus the template's tokens."""
        return self.content_tokens(messages) + self.overhead.of(kind, len(messages))

    def observe(self, kind: str, messages: list[dict], prompt_tokens: int) -> None:
        """A reply's usage.prompt_tokens for what we sent: refines the ratio and the overhead."""
        if self.primary is None:
            self.calibrated.observe(sum(text_units(m["content"]) for m in messages), prompt_tokens)
        self.overhead.observe(kind, len(messages), self.content_tokens(messages), prompt_tokens)

    @property
    def tokens_per_word(self) -> float:
        """For a first guess of a build's word count: what builds so far made, else calibration's ratio
        over a word of the prompt vocabulary (~6 characters with its space)."""
        tokens, n_words = self._built
        return tokens / n_words if n_words >= 50 else self.calibrated.ratio * (1 + 6 / CHARS_PER_UNIT)

    # -- building ----------------------------------------------------------------------------
    def build(self, rng: random.Random, target: int) -> tuple[str, int]:
        """A text of `target` tokens (see the module docstring) and its count."""
        if target <= 0:
            return "", 0
        if self.primary is not None and self._costs is not None:
            built = self._build_additive(rng, target)
            if built is not None:
                return built
        return self._build_measured(rng, target)

    def word_costs(self) -> dict[str, tuple[int, int]] | None:
        """Per word of the prompt vocabulary: (tokens after a space, tokens at the start); None when
        this tokenizer does not count words apart (or there is no exact counter)."""
        return self._word_costs() if self.primary is not None and self._costs is not None else None

    def _word_costs(self) -> dict[str, tuple[int, int]] | None:
        # one greenlet counts the vocabulary while the others wait: users spawning together would
        # otherwise each send the same couple of hundred counts
        with self._costs_lock:
            if self._costs == {}:
                primary = self.primary
                assert primary is not None  # only _build_additive asks, which build calls with a primary counter
                try:
                    self._costs = {w: (primary.count(" " + w), primary.count(w)) for w in VOCABULARY}
                except TokenizeError:
                    self._costs = None
        return self._costs

    def _build_additive(self, rng: random.Random, target: int) -> tuple[str, int] | None:
        costs = self._word_costs()
        if not costs:
            return None
        first = rng.choice(VOCABULARY)
        chosen, total = [first], costs[first][1]
        fitting: Sequence[str] = VOCABULARY  # then a list of the words that still fit
        while total < target:
            word = rng.choice(fitting)
            if costs[word][0] > target - total:
                fitting = [w for w in fitting if costs[w][0] <= target - total]
                if not fitting:
                    break
                continue
            chosen.append(word)
            total += costs[word][0]
        if total > target:  # the first word alone is longer than asked
            return None
        text = " ".join(chosen)
        self._additive_builds += 1
        n = self._additive_builds
        if n <= VERIFY_FIRST or n % VERIFY_EVERY == 0:
            primary = self.primary
            assert primary is not None  # build calls this only with a primary counter
            try:
                counted = primary.count(text)
            except TokenizeError:
                return None
            if counted != total:
                log.info(
                    "loadline: this tokenizer does not count words apart (%d tokens, %d by words): "
                    "prompts are measured whole",
                    counted,
                    total,
                )
                self._costs = None
                return None
        self._remember_count(text, total)
        return text, total

    def _build_measured(self, rng: random.Random, target: int) -> tuple[str, int]:
        pool = words(rng, max(8, round(target / self.tokens_per_word * 1.5) + 8)).split()
        budget = [MAX_COUNTS]

        def measure(k: int) -> int:
            while k > len(pool):
                pool.extend(words(rng, len(pool)).split())
            budget[0] -= 1
            return self.count(" ".join(pool[:k]))

        k = max(1, self._hints.get(target) or round(target / self.tokens_per_word))
        lo, lo_count, hi = self._bracket(measure, k, target, budget)
        while hi - lo > 1 and budget[0] > 0:
            mid = (lo + hi) // 2
            if (c := measure(mid)) <= target:
                lo, lo_count = mid, c
            else:
                hi = mid
        text, count = " ".join(pool[:lo]), lo_count
        for filler in FILLERS * 2:
            if count >= target or budget[0] <= 0:
                break
            budget[0] -= 1
            if (c := self.count(text + filler if text else filler.strip())) <= target:
                text, count = text + filler if text else filler.strip(), c
        self._remember(target, lo, count)
        return text, count

    @staticmethod
    def _bracket(measure, k: int, target: int, budget: list[int]) -> tuple[int, int, int]:
        """(lo, its count, hi): count(lo) <= target < count(hi), found from the guess k by doubling steps."""
        c = measure(k)
        step = 1
        if c <= target:
            lo, lo_count = k, c
            while budget[0] > 0:
                if (c := measure(lo + step)) > target:
                    return lo, lo_count, lo + step
                lo, lo_count, step = lo + step, c, step * 2
            return lo, lo_count, lo + 1
        hi = k
        while budget[0] > 0:
            low = max(0, hi - step)
            if (c := measure(low) if low else 0) <= target:
                return low, c, hi
            hi, step = low, step * 2
        return 0, 0, hi

    def _remember(self, target: int, n_words: int, count: int) -> None:
        if len(self._hints) >= _CACHE_HINTS:
            self._hints.pop(next(iter(self._hints)))
        self._hints[target] = max(1, n_words)
        self._built[0] += count
        self._built[1] += n_words

    def fixed_text(self, target: int) -> str:
        """The same text of `target` tokens in every process and run (a shared system prompt: servers
        can cache the prefix)."""
        key = -target  # negative keys: fixed texts, apart from the build hints' lengths
        if key not in self._fixed:
            self._fixed[key] = self.build(random.Random(1234), target)[0]
        return self._fixed[key]

    # -- fitting -----------------------------------------------------------------------------
    def fit(self, kind: str, messages: list[dict], budget: int) -> list[dict]:
        """Drop the oldest turns (never the system prompt nor the newest message) until the prompt's
        tokens fit `budget` (0 = no limit); a newest message too long on its own is cut to what is left.

        Chat front ends keep a sliding window of the conversation; without it a long session would
        end every request in a context-length 400 and measure the client's mistake, not the server."""
        if budget <= 0 or self.prompt_tokens(kind, messages) <= budget:
            return messages
        head = [m for m in messages[:1] if m["role"] == "system"]
        turns = messages[len(head) :]
        while len(turns) > 1 and self.prompt_tokens(kind, head + turns) > budget:
            turns = turns[2:] if len(turns) > 2 else turns[1:]
        over = self.prompt_tokens(kind, head + turns) - budget
        if over > 0 and turns:
            newest = turns[-1]
            keep = self.count(newest["content"]) - over
            turns = turns[:-1] + [{**newest, "content": self.cut(newest["content"], max(1, keep))}]
        return head + turns

    def cut(self, text: str, target: int) -> str:
        """The longest whole-word beginning of `text` of at most `target` tokens (binary search)."""
        pieces = text.split(" ")
        lo, hi = 0, len(pieces)
        for _ in range(MAX_COUNTS):
            if hi - lo <= 1:
                break
            mid = (lo + hi) // 2
            if self.count(" ".join(pieces[:mid])) <= target:
                lo = mid
            else:
                hi = mid
        return " ".join(pieces[: max(lo, 1)])


def prompt_budget(context: int, max_tokens: int, max_input: int = 0, exact: bool = True) -> int:
    """The most tokens (the target's) a prompt may have; 0 = no limit known.

    `context` is the server's limit on prompt + output (discovery.py), `max_input` a separate prompt
    limit (TGI: `inputs` must have less than max_input_tokens). The reply's room comes first: vLLM
    0.10.2 refuses prompt + max_tokens above the context, llama.cpp a prompt of n_ctx tokens or more
    (REFERENCE-workloads.md section 2), so the prompt gets context - max(max_tokens, 1). Counted by
    calibration (not exact), a tenth is kept back for the ratio's error."""
    if context <= 0:
        return 0
    room = context - max(max_tokens, 1)
    if max_input > 0:
        room = min(room, max_input - 1)
    if not exact:
        room = int(room * CALIBRATION_MARGIN)
    return max(1, room)


def open_space(session_factory, host: str, tokenizer: str, timeout: float) -> TokenSpace:
    """The host's TokenSpace, made once per process: (a) --tokenizer, (b) the server's /tokenize,
    (c) calibration. A --tokenizer that cannot load is a UsageError at the first user (not a fallback:
    the user asked for it by name)."""
    key = (host, tokenizer)
    with _lock:
        if key not in _spaces:
            space = TokenSpace(_counter(session_factory, host, tokenizer, timeout))
            server = (
                space.primary
                if isinstance(space.primary, ServerCounter)
                else probe_server(session_factory(), host, timeout)
                if tokenizer
                else None
            )
            if server is not None:
                learn_template(space, server)
            _spaces[key] = space
            log.info("loadline: prompt tokens counted by %s", space.source)
        return _spaces[key]


def learn_template(space: TokenSpace, server: ServerCounter) -> None:
    """The chat template's tokens for one and two messages, when the server's /tokenize applies it,
    so that even the first prompts have their length (else usage teaches it after the first reply)."""
    for messages in (
        [{"role": "user", "content": "Hello world"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello world"}],
    ):
        added = template_tokens(server, messages)
        if added is None or added < 0:
            return
        space.overhead.set("chat", len(messages), added)


def _counter(session_factory, host: str, tokenizer: str, timeout: float) -> Counter | None:
    if tokenizer:
        from loadline.core.errors import UsageError

        try:
            return HFCounter(tokenizer)
        except TokenizeError as exc:
            raise UsageError(str(exc)) from None
    return probe_server(session_factory(), host, timeout)


_spaces: dict[tuple[str, str], TokenSpace] = {}
_lock = gevent.lock.BoundedSemaphore()
