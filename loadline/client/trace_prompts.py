"""Trace prompts: requests that share hash_ids blocks share exactly those prefix tokens.

A block's text is a function of its hash id alone (random words seeded by the id), the same in
every process and run, so two requests naming the same leading ids send the same leading tokens
and the server's prefix cache can serve them. Blocks are built of words the target counts as one
token each after a space (sizing.TokenSpace's word costs: " load", " cache", ...), so a block of B
words is B tokens wherever it stands, and any prefix of it is exactly as many tokens as words: the
last, partial block of a prompt is the first words of its block. Tokens beyond a request's hash_ids
(or every token of a trace without blocks) are random words nobody else sends.

The prompt's length is the trace's input length, template included: the chat template's tokens
(sizing's overhead, learned from /tokenize or the first replies) are taken off the text.
Without an exact counter (calibration only) every vocabulary word counts as one token: the prefixes
are still shared exactly, the lengths are then approximate.
"""

from __future__ import annotations

import random
from collections import OrderedDict

from loadline.client.prompts import VOCABULARY
from loadline.client.sizing import TokenSpace

CACHED_BLOCKS = 4096  # block texts kept per process (~2.5 kB each at 512 tokens); others are rebuilt
MIN_WORDS = 8  # fewer one-token words than this: fall back to the whole vocabulary


class BlockTexts:
    """Per process: the words of each hash id's block, and of the unshared rest."""

    def __init__(self, space: TokenSpace, block_tokens: int, seed: int = 0) -> None:
        self.space = space
        self.block_tokens = block_tokens
        self.words = _one_token_words(space)
        self.exact = space.exact and len(self.words) >= MIN_WORDS
        self._blocks: OrderedDict[int, list[str]] = OrderedDict()
        self._fresh = random.Random(seed or None)

    def block(self, hash_id: int) -> list[str]:
        words = self._blocks.get(hash_id)
        if words is None:
            words = random.Random(hash_id).choices(self.words, k=self.block_tokens)
            if len(self._blocks) >= CACHED_BLOCKS:
                self._blocks.popitem(last=False)
            self._blocks[hash_id] = words
        else:
            self._blocks.move_to_end(hash_id)
        return words

    def text(self, hash_ids: tuple[int, ...], tokens: int) -> str:
        """`tokens` one-token words: the blocks' in order, then fresh ones; each after a space."""
        parts: list[str] = []
        left = max(1, tokens)
        for h in hash_ids:
            if left <= 0:
                break
            words = self.block(h)
            parts.extend(words[:left])
            left -= min(left, len(words))
        if left > 0:
            parts.extend(self._fresh.choices(self.words, k=left))
        return " " + " ".join(parts)

    def messages(self, hash_ids: tuple[int, ...], input_tokens: int) -> tuple[list[dict], int]:
        """The chat messages of a prompt of `input_tokens` (template included) and that length as counted."""
        overhead = self.space.overhead.of("chat", 1)
        content = max(1, input_tokens - overhead)
        return [{"role": "user", "content": self.text(hash_ids, content)}], content + overhead


def _one_token_words(space: TokenSpace) -> tuple[str, ...]:
    costs = space.word_costs() if space.exact else None
    if costs:
        ones = tuple(w for w in VOCABULARY if costs.get(w, (0, 0))[0] == 1)
        if len(ones) >= MIN_WORDS:
            return ones
    return tuple(w for w in VOCABULARY if len(w) <= 4) or VOCABULARY
