"""What users say: prompt lengths in tokens, a shared-prefix agent template, and JSONL datasets.

Lengths are token counts drawn from a distribution (lengths.py; by default the length classes of
DOMAIN.md: short (< 50 tokens), medium (200-500), long (> 1,000), mixed by weights); the text is
plain words of VOCABULARY built to that many of the target's tokens by sizing.py. Datasets are
ShareGPT-style JSONL: {"conversations": [{"from": "human"|"gpt", "value": "..."}, ...]} (or
{"messages": [{"role": ..., "content": ...}]}); the human turns are replayed in order.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from loadline.client.lengths import LENGTH_CLASSES, Lengths, parse_lengths, parse_mix
from loadline.core import resources
from loadline.core.errors import UsageError

__all__ = [
    "LENGTH_CLASSES",
    "VOCABULARY",
    "Lengths",
    "PromptSource",
    "load_dataset",
    "parse_lengths",
    "parse_mix",
    "words",
]

VOCABULARY: tuple[str, ...] = tuple(
    "load capacity token latency model server request stream batch cache queue replica gateway "
    "throughput percentile window budget signal service cluster memory compute decode prefill "
    "answer question explain summary detail example please could would should about which where "
    "when what how why the a of to in for on with and or but not this that these those".split()
)


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(VOCABULARY, k=n))


@dataclass(frozen=True)
class PromptSource:
    """What users say: a dataset's turns when given, else text of a drawn length in tokens."""

    mix: dict[str, float]
    dataset: tuple[tuple[str, ...], ...] = ()  # conversations as tuples of human turns
    lengths: Lengths | None = None  # prompt lengths in tokens; None: the mix's classes
    system_prompt_tokens: int = 0  # a shared prefix (agent template) of this many of the target's tokens, the
    #                                same text for every user (sizing.TokenSpace.fixed_text): 0 = none

    @cached_property
    def prompt_lengths(self) -> Lengths:
        return self.lengths or Lengths("classes", classes=tuple(self.mix.items()))

    def draw_tokens(self, rng: random.Random) -> int:
        """The next prompt's length in the target's tokens."""
        return self.prompt_lengths.sample(rng)

    def dataset_message(self, rng: random.Random) -> str | None:
        """A dataset conversation's opening turn (later turns lean on the conversation before
        them); None without a dataset: the text is built to a drawn length."""
        return rng.choice(self.dataset)[0] if self.dataset else None

    def dataset_conversation(self, rng: random.Random) -> list[str] | None:
        """The human side of a dataset conversation; None without a dataset."""
        return list(rng.choice(self.dataset)) if self.dataset else None


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
        return [
            t["value"]
            for t in item["conversations"]
            if isinstance(t, dict) and t.get("from") in ("human", "user") and isinstance(t.get("value"), str)
        ]
    if isinstance(item.get("messages"), list):
        return [
            t["content"]
            for t in item["messages"]
            if isinstance(t, dict) and t.get("role") == "user" and isinstance(t.get("content"), str)
        ]
    return []
