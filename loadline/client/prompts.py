"""What users say: prompts by length class, a shared-prefix agent template, and JSONL datasets.

Length classes follow DOMAIN.md: short (< 50 tokens), medium (200-500), long (> 1,000), mixed by
weights. Generated text is plain words separated by spaces, so a word-level tokenizer (like the
simulator's) counts exactly one token per word; real tokenizers count 1.3 to 1.8 per word.
Datasets are ShareGPT-style JSONL: {"conversations": [{"from": "human"|"gpt", "value": "..."}, ...]}
(or {"messages": [{"role": ..., "content": ...}]}); the human turns are replayed in order.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate
from pathlib import Path

from loadline.core import resources
from loadline.core.errors import UsageError

LENGTH_CLASSES: dict[str, tuple[int, int]] = {"short": (8, 48), "medium": (200, 500), "long": (1000, 2000)}

_WORDS = (
    "load capacity token latency model server request stream batch cache queue replica gateway "
    "throughput percentile window budget signal service cluster memory compute decode prefill "
    "answer question explain summary detail example please could would should about which where "
    "when what how why the a of to in for on with and or but not this that these those"
).split()


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(_WORDS, k=n))


def parse_mix(spec: str) -> dict[str, float]:
    """'short=0.5,medium=0.4,long=0.1' -> weights; unknown classes or bad numbers are UsageErrors."""
    mix: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, weight = part.partition("=")
        name = name.strip()
        if name not in LENGTH_CLASSES:
            raise UsageError(f"prompt mix: unknown length class {name!r} (use {', '.join(LENGTH_CLASSES)})")
        try:
            mix[name] = float(weight)
        except ValueError:
            raise UsageError(f"prompt mix: weight of {name!r} is not a number: {weight!r}") from None
        if mix[name] < 0:
            raise UsageError(f"prompt mix: weight of {name!r} is negative")
    if not mix or sum(mix.values()) <= 0:
        raise UsageError(f"prompt mix {spec!r} has no positive weight (e.g. short=0.5,medium=0.4,long=0.1)")
    return mix


@dataclass(frozen=True)
class PromptSource:
    """Draws user messages: from a dataset when given, else synthetic by length class."""

    mix: dict[str, float]
    system_prompt: str = ""  # shared prefix (agent template); identical for every user
    dataset: tuple[tuple[str, ...], ...] = ()  # conversations as tuples of human turns

    @cached_property
    def _classes(self) -> tuple[list[str], list[float]]:
        """The class names and their cumulative weights: what `choices` would build on every draw."""
        names = list(self.mix)
        return names, list(accumulate(self.mix[n] for n in names))

    def length_class(self, rng: random.Random) -> str:
        names, cumulative = self._classes
        return rng.choices(names, cum_weights=cumulative)[0]

    def message(self, rng: random.Random) -> str:
        """One standalone message: a dataset conversation's opening turn, or synthetic text."""
        if self.dataset:
            return rng.choice(self.dataset)[0]  # later turns lean on the conversation before them
        low, high = LENGTH_CLASSES[self.length_class(rng)]
        return words(rng, rng.randint(low, high))

    def conversation(self, rng: random.Random, turns: int) -> list[str]:
        """The human side of one session: a dataset conversation, or `turns` synthetic messages."""
        if self.dataset:
            return list(rng.choice(self.dataset))
        return [self.message(rng) for _ in range(turns)]


_TOKEN = re.compile(r"\w+|[^\w\s]")
PER_MESSAGE_TOKENS = 4  # chat-template overhead per message, as in common templates
# Server tokens per estimated token, worst case measured: byte-level BPE (llama.cpp's GGUF "gpt2"
# tokenizer) counts ~1.8x the word-and-punctuation estimate for English text (REFERENCE-llamacpp.md:
# ~1.6 tokens per word); SentencePiece/tiktoken vocabularies count less (~1.3), the simulator 1.0.
# Dividing the context by the worst case plus 10 % (text whose words split worse than the measured
# English) keeps a prompt inside it whatever the tokenizer: a tokenizer-independent margin.
ESTIMATE_LOW_BY = 1.8 * 1.1


def estimate_tokens(messages: list[dict]) -> int:
    """Word-and-punctuation count: exact for the simulator's tokenizer, up to ESTIMATE_LOW_BY low for BPE."""
    return sum(len(_TOKEN.findall(m["content"])) + PER_MESSAGE_TOKENS for m in messages)


def _at_most_tokens(messages: list[dict]) -> int:
    """A bound on estimate_tokens without its regex: a token is at least one character."""
    return sum(len(m["content"]) + PER_MESSAGE_TOKENS for m in messages)


def prompt_budget(context: int, max_tokens: int, max_input: int = 0) -> int:
    """The most estimated tokens (estimate_tokens) a prompt may have; 0 = no limit known.

    `context` is the server's limit on prompt + output in its own tokens (discovery.py), `max_input`
    a separate prompt limit (TGI). The output's room is taken first, then the rest is divided by
    ESTIMATE_LOW_BY, so that a prompt that fits by our count fits by any tokenizer's.
    """
    if context <= 0:
        return 0
    room = context - max(max_tokens, 0)
    if max_input > 0:
        room = min(room, max_input)
    return max(1, int(room / ESTIMATE_LOW_BY))


def fit_history(messages: list[dict], budget: int) -> list[dict]:
    """Drop the oldest turns (never the system prompt nor the newest message) until the estimate fits;
    a newest message too long on its own is cut to what is left.

    Chat front ends keep a sliding window of the conversation; without it a long session would
    end every request in a context-length 400 and measure the client's mistake, not the server.
    """
    if budget <= 0 or _at_most_tokens(messages) <= budget or estimate_tokens(messages) <= budget:
        return messages
    head = [m for m in messages[:1] if m["role"] == "system"]
    turns = messages[len(head):]
    while len(turns) > 1 and estimate_tokens(head + turns) > budget:
        turns = turns[2:] if len(turns) > 2 else turns[1:]
    over = estimate_tokens(head + turns) - budget
    if over > 0 and turns:
        newest = turns[-1]
        tokens = list(_TOKEN.finditer(newest["content"]))
        keep = max(1, len(tokens) - over)
        turns = turns[:-1] + [{**newest, "content": newest["content"][: tokens[keep - 1].end()] if tokens else ""}]
    return head + turns


def system_prompt_of(tokens: int) -> str:
    """A fixed long system prompt (same text in every process) so servers can cache the prefix."""
    if tokens <= 0:
        return ""
    return "You are a helpful agent. " + words(random.Random(1234), max(tokens - 5, 1))


def load_dataset(path: str | Path) -> tuple[tuple[str, ...], ...]:
    p = resources.resolve(path)  # the current directory first, then the prompt sets the package ships
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise UsageError(f"dataset not found: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"dataset {p} unreadable: {exc}") from None
    conversations = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            raise UsageError(f"dataset {p} line {number}: not JSON") from None
        turns = _human_turns(item)
        if turns:
            conversations.append(tuple(turns))
    if not conversations:
        raise UsageError(f"dataset {p} has no conversation with a human turn")
    return tuple(conversations)


def _human_turns(item: object) -> list[str]:
    if not isinstance(item, dict):
        return []
    if isinstance(item.get("conversations"), list):
        return [t["value"] for t in item["conversations"]
                if isinstance(t, dict) and t.get("from") in ("human", "user") and isinstance(t.get("value"), str)]
    if isinstance(item.get("messages"), list):
        return [t["content"] for t in item["messages"]
                if isinstance(t, dict) and t.get("role") == "user" and isinstance(t.get("content"), str)]
    return []
