"""The simulator's tokenizer: deterministic, documented, cheap, and not one token per word.

A token is a run of at most `piece_chars` word characters (longer words split into pieces, as
subword tokenizers split rare words), one punctuation character, or one CJK character; whitespace
belongs to the token after it (as in byte-level BPE's " word" tokens), so joining a text's tokens
gives the text back (less trailing whitespace). With the default 4 characters, the client's
English word list comes out at ~1.6 tokens per word, close to what llama.cpp's byte-level BPE
counts (REFERENCE-llamacpp.md: ~1.6): a client that assumes one token per word overshoots, as it
would against a real engine. `piece_chars = 0` is the word-level count (`\\w+` or one punctuation
character per token).

A chat prompt adds a fixed template overhead: `MESSAGE_OVERHEAD` tokens per message (role and
separators) plus `REPLY_PRIMER` tokens for the assistant turn that starts the answer.

Token ids, for /tokenize and /detokenize: each distinct piece gets the next id the first time it
is seen (one table per process, like a vocabulary that grows), so ids round-trip within a run.

Generated text is a fixed cycle of lorem-ipsum words, one *output* token per word with a leading
space, so a client counting content chunks counts tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

MESSAGE_OVERHEAD = 4
REPLY_PRIMER = 3
PIECE_CHARS = 4  # the default longest word piece, in characters
# Hiragana, katakana, CJK ideographs (and extension A), Hangul syllables, compatibility ideographs:
# one token per character, as CJK text mostly tokenizes.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"

WORDS: tuple[str, ...] = tuple(
    " " + w
    for w in (
        "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut "
        "labore et dolore magna aliqua enim ad minim veniam quis nostrud exercitation ullamco laboris "
        "nisi aliquip ex ea commodo consequat"
    ).split()
)


def token_pattern(piece_chars: int) -> re.Pattern[str]:
    """Whitespace, then one CJK character, a word piece of at most `piece_chars` characters
    (any length when 0: the word-level count), or one punctuation character."""
    if piece_chars <= 0:
        return re.compile(r"\s*(?:\w+|[^\w\s])")
    return re.compile(rf"\s*(?:[{_CJK}]|[^\W{_CJK}]{{1,{piece_chars}}}|[^\w\s])")


@dataclass
class Tokenizer:
    piece_chars: int = PIECE_CHARS
    _ids: dict[str, int] = field(default_factory=dict, repr=False)
    _pieces: list[str] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self._pattern = token_pattern(self.piece_chars)

    def tokens(self, text: str) -> list[str]:
        return self._pattern.findall(text)

    def count(self, text: str) -> int:
        return len(self._pattern.findall(text))

    def encode(self, text: str) -> list[int]:
        return self.ids_of(self._pattern.findall(text))

    def ids_of(self, pieces: list[str]) -> list[int]:
        """The ids of pieces (template markers included), each new piece given the next id."""
        ids = []
        for piece in pieces:
            if (token_id := self._ids.get(piece)) is None:
                token_id = self._ids[piece] = len(self._pieces)
                self._pieces.append(piece)
            ids.append(token_id)
        return ids

    def decode(self, ids: list[int]) -> str:
        """The text of known ids; ValueError for an id this tokenizer never gave out."""
        if not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(self._pieces) for i in ids):
            raise ValueError("'tokens' must be a list of token ids this server gave out")
        return "".join(self._pieces[i] for i in ids)

    def chat_prompt_tokens(self, messages: list[dict]) -> list[str]:
        """The token sequence of a chat prompt, template markers included (used for prefix caching)."""
        tokens: list[str] = []
        for message in messages:
            if not isinstance(message, dict):
                raise ValueError("each message must be an object with 'role' and 'content'")
            role = message.get("role")
            if not isinstance(role, str):
                raise ValueError("each message needs a string 'role'")
            tokens.extend(("<|start|>", role, "<|sep|>"))
            tokens.extend(self.tokens(_content_text(message.get("content"))))
            tokens.append("<|end|>")
        tokens.extend(("<|start|>", "assistant", "<|sep|>"))
        return tokens

    def completion_prompt_tokens(self, prompt: Any) -> list[str]:
        """A completion prompt: a string, a list with one string, or a list of token ids."""
        if isinstance(prompt, str):
            return self.tokens(prompt)
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            return [str(t) for t in prompt]
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            return self.tokens(prompt[0])
        raise ValueError("'prompt' must be a string, a list with one string, or a list of token ids")


def _content_text(content: Any) -> str:
    """Message content is a string or a list of parts ({"type": "text", "text": ...})."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or not isinstance(part.get("text", ""), str):
                raise ValueError("message content parts must be objects with a string 'text'")
            parts.append(part.get("text", ""))
        return " ".join(parts)
    raise ValueError("message content must be a string or a list of parts")


DEFAULT = Tokenizer()


def count_text(text: str) -> int:
    return DEFAULT.count(text)


def chat_prompt_tokens(messages: list[dict]) -> list[str]:
    return DEFAULT.chat_prompt_tokens(messages)


def output_word(index: int) -> str:
    return WORDS[index % len(WORDS)]


def output_text(n_tokens: int) -> str:
    return "".join(output_word(i) for i in range(n_tokens))
