"""The simulator's tokenizer: deterministic, documented, cheap.

One token per match of the regex `\\w+|[^\\w\\s]` (a run of word characters, or one punctuation
character). A chat prompt adds a fixed template overhead: `MESSAGE_OVERHEAD` tokens per message
(role and separators) plus `REPLY_PRIMER` tokens for the assistant turn that starts the answer.
Real tokenizers differ by ~1.3x on English text; what matters here is that the count is exact
and reproducible, so the client's and the server's `usage` agree.

Generated text is a fixed cycle of lorem-ipsum words, one token per word with a leading space, so
a client counting content chunks counts tokens.
"""

from __future__ import annotations

import re
from typing import Any

TOKEN_RE = re.compile(r"\w+|[^\w\s]")
MESSAGE_OVERHEAD = 4
REPLY_PRIMER = 3

WORDS: tuple[str, ...] = tuple(
    " " + w
    for w in (
        "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut "
        "labore et dolore magna aliqua enim ad minim veniam quis nostrud exercitation ullamco laboris "
        "nisi aliquip ex ea commodo consequat"
    ).split()
)


def tokens_of_text(text: str) -> list[str]:
    return TOKEN_RE.findall(text)


def count_text(text: str) -> int:
    return len(TOKEN_RE.findall(text))


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


def chat_prompt_tokens(messages: list[dict]) -> list[str]:
    """The token sequence of a chat prompt, template markers included (used for prefix caching)."""
    tokens: list[str] = []
    for message in messages:
        if not isinstance(message, dict):
            raise ValueError("each message must be an object with 'role' and 'content'")
        role = message.get("role")
        if not isinstance(role, str):
            raise ValueError("each message needs a string 'role'")
        tokens.extend(("<|start|>", role, "<|sep|>"))
        tokens.extend(tokens_of_text(_content_text(message.get("content"))))
        tokens.append("<|end|>")
    tokens.extend(("<|start|>", "assistant", "<|sep|>"))
    return tokens


def completion_prompt_tokens(prompt: Any) -> list[str]:
    """A completion prompt: a string, a list with one string, or a list of token ids."""
    if isinstance(prompt, str):
        return tokens_of_text(prompt)
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return [str(t) for t in prompt]
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        return tokens_of_text(prompt[0])
    raise ValueError("'prompt' must be a string, a list with one string, or a list of token ids")


def output_word(index: int) -> str:
    return WORDS[index % len(WORDS)]


def output_text(n_tokens: int) -> str:
    return "".join(output_word(i) for i in range(n_tokens))
