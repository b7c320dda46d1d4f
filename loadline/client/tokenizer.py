"""How many tokens the target counts in a text: the best counter available, per host and process.

The chain, first that works (README "Lengths in tokens"):
(a) a Hugging Face tokenizer the user names (`--tokenizer PATH_OR_NAME`, a tokenizer.json file or a
    hub name), through the optional `tokenizers` package: exact and local, no load on the target;
(b) the server's own POST /tokenize, discovered with one request whose body speaks every engine's
    dialect at once (llama.cpp reads `content`, vLLM and SGLang `prompt`, TGI `inputs`;
    REFERENCE-workloads.md section 1), or llama-cpp-python's /extras/tokenize/count: exact, one
    local round trip per count, never per token;
(c) calibration from the replies: the server's `usage.prompt_tokens` against our word count,
    refined by every reply (least squares, so the chat template's fixed tokens do not bias the
    ratio, once the replies' lengths pin the slope down). Until the first reply it assumes
    PRIOR_TOKENS_PER_UNIT.
Counts are of text alone, without special tokens (vLLM's `add_special_tokens` is sent false);
what the chat template adds is learned from usage (`Overhead`).
"""

from __future__ import annotations

import logging
import math
import re
import statistics
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import requests

log = logging.getLogger("loadline")

HF, SERVER, CALIBRATED = "hf", "server", "calibrated"
_WORD = re.compile(r"\w+|[^\w\s]")
# Calibration relates tokens to a text's size in units of one per word or punctuation mark plus one
# per 4 characters: word-level tokenizers count words, subword ones nearer characters (~4 per token
# in English), and the mix keeps the tokens per unit within ~3 % from text to text for both (the
# simulator's pieces of 0, 2, 3 and 4 characters), against ~4 % for words alone.
CHARS_PER_UNIT = 4
# Before any reply: tokenizers count from ~1.3 tokens per English word (large vocabularies) and ~1.6
# (byte-level BPE, REFERENCE-llamacpp.md) up to 2.5-4 (a small vocabulary, as llama-server's test model
# counted Loadline's words); the top of that range, 4 tokens per word of ~6 characters (2.5 units),
# so that a first prompt sized by the prior stays short of, not over, a context limit. The first
# reply's usage replaces it.
PRIOR_TOKENS_PER_UNIT = 1.6
_PROBE = "Hello world"


class TokenizeError(Exception):
    """The counter could not count (the server stopped answering /tokenize, say)."""


class Counter(Protocol):
    source: str  # HF, SERVER or CALIBRATED
    exact: bool  # whether count() is the target's own count

    def count(self, text: str) -> int: ...


def word_count(text: str) -> int:
    """Words and punctuation marks."""
    return len(_WORD.findall(text))


def text_units(text: str) -> float:
    """A text's size as calibration measures it (CHARS_PER_UNIT)."""
    return len(_WORD.findall(text)) + len(text) / CHARS_PER_UNIT


@dataclass
class HFCounter:
    """A Hugging Face tokenizer (the `tokenizers` package; a tokenizer.json path or a hub name)."""

    name: str
    source: str = HF
    exact: bool = True

    def __post_init__(self) -> None:
        try:
            from tokenizers import Tokenizer  # optional: pip install 'loadline[tokenizer]'
        except ImportError:
            raise TokenizeError(
                "--tokenizer needs the 'tokenizers' package: pip install 'loadline[tokenizer]'"
            ) from None
        path = Path(self.name)
        try:
            self._tokenizer = Tokenizer.from_file(str(path)) if path.exists() else Tokenizer.from_pretrained(self.name)
        except Exception as exc:  # the library raises plain Exceptions for a missing file or hub name
            raise TokenizeError(f"--tokenizer {self.name!r} could not be loaded: {type(exc).__name__}: {exc}") from None

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)


@dataclass
class ServerCounter:
    """The target's POST /tokenize, in whichever dialect it answered the probe."""

    session: requests.Session
    url: str
    timeout: float
    source: str = SERVER
    exact: bool = True
    # the text's field(s) sent: every dialect's until the probe's answer says which engine it is (vLLM
    # logs every field it ignores, so after the probe only the one it reads is sent)
    fields: tuple[str, ...] = ("content", "prompt", "inputs")

    def count(self, text: str) -> int:
        body: dict = dict.fromkeys(self.fields, text)
        if "prompt" in self.fields:
            body["add_special_tokens"] = False  # vLLM and SGLang add BOS by default; llama.cpp does not
        try:
            response = self.session.post(self.url, json=body, timeout=self.timeout)
            if response.status_code != 200:
                raise TokenizeError(f"POST {self.url}: HTTP {response.status_code}")
            answer = response.json()
            n = count_in_answer(answer)
        except (requests.RequestException, ValueError) as exc:
            raise TokenizeError(f"POST {self.url}: {type(exc).__name__}") from None
        if len(self.fields) > 1:
            self.fields = (dialect_field(answer),)
        return n


def dialect_field(answer: object) -> str:
    """The field the engine that gave this tokenize answer reads: vLLM and SGLang answer a `count`
    (and read `prompt`), llama.cpp only `tokens` (reads `content`), TGI a bare list (reads `inputs`)."""
    if isinstance(answer, list):
        return "inputs"
    return "prompt" if isinstance(answer, dict) and "count" in answer else "content"


def count_in_answer(answer: object) -> int:
    """vLLM/SGLang `count`, llama.cpp `tokens` (a list), TGI a bare list; ValueError otherwise."""
    if isinstance(answer, dict) and isinstance(answer.get("count"), int):
        return answer["count"]
    tokens = answer.get("tokens") if isinstance(answer, dict) else answer
    if isinstance(tokens, list):
        return len(tokens)
    raise ValueError("not a tokenize answer")


# Calibration's slope is used once its 95 % interval (two standard errors) lies within 5 % of it,
# half of the tenth of the context CALIBRATION_MARGIN keeps back. Until then (one or two replies, or
# lengths too alike: two 20-token prompts a few characters apart give any slope, and a slope of 0.1
# token per unit once sized a prompt 11 times over the context) the ratio goes through the origin,
# tokens over units summed: the template's tokens count as text there, so the ratio errs high and
# the prompts built by it err short.
SLOPE_ERROR = 0.05


@dataclass
class Calibrated:
    """Tokens per unit of text (text_units) learned from usage: prompt_tokens = ratio * units + fixed,
    least squares over every reply once the slope is well determined (SLOPE_ERROR), else the ratio
    of the sums."""

    source: str = CALIBRATED
    exact: bool = False
    ratio: float = PRIOR_TOKENS_PER_UNIT
    _sums: list[float] = field(default_factory=lambda: [0.0] * 6)  # n, x, y, xx, xy, yy

    def count(self, text: str) -> int:
        return max(1, round(self.ratio * text_units(text))) if text else 0

    def observe(self, words: float, prompt_tokens: int) -> None:
        """One reply: the units of text sent (`words`, text_units) and the server's prompt_tokens."""
        s = self._sums
        for i, v in enumerate((1.0, words, prompt_tokens, words * words, words * prompt_tokens, prompt_tokens**2)):
            s[i] += v
        slope = fitted_slope(*s)
        if slope is not None:
            self.ratio = slope
        elif s[1] > 0:
            self.ratio = max(0.1, s[2] / s[1])


def fitted_slope(n: float, x: float, y: float, xx: float, xy: float, yy: float) -> float | None:
    """The least-squares slope of y on x from running sums, or None while its standard error is more
    than SLOPE_ERROR / 2 of it (fewer than three points, lengths too alike, a scattered fit)."""
    if n < 3:
        return None
    sxx, sxy, syy = xx - x * x / n, xy - x * y / n, yy - y * y / n
    if sxx <= 1e-9 * max(1.0, xx):
        return None
    slope = sxy / sxx
    residual = max(0.0, syy - slope * sxy)  # rounding can take an exact fit's just below zero
    standard_error = math.sqrt(residual / (n - 2) / sxx)
    return slope if slope > 0 and 2 * standard_error <= SLOPE_ERROR * slope else None


def template_tokens(counter: ServerCounter, messages: list[dict]) -> int | None:
    """What the chat template adds to `messages`, from a chat-style /tokenize (vLLM, SGLang: the
    template applied, add_generation_prompt's default true), or None where there is none (llama.cpp)."""
    try:
        response = counter.session.post(counter.url, json={"messages": messages}, timeout=counter.timeout)
        answer = response.json() if response.status_code == 200 else None
    except (requests.RequestException, ValueError):
        return None
    if not isinstance(answer, dict) or not isinstance(answer.get("count"), int):
        return None
    try:
        return answer["count"] - sum(counter.count(m["content"]) for m in messages)
    except TokenizeError:
        return None


# (path, text fields sent): every engine's /tokenize, then llama-cpp-python's server, whose route
# is /extras/tokenize/count with `input` (REFERENCE-llamacpp.md)
_TOKENIZE_ROUTES = (("/tokenize", ("content", "prompt", "inputs")), ("/extras/tokenize/count", ("input",)))


def probe_server(session: requests.Session, host: str, timeout: float) -> ServerCounter | None:
    """The target's tokenize route when it counts a probe sensibly; None otherwise (404, another shape)."""
    for path, fields in _TOKENIZE_ROUTES:
        counter = ServerCounter(session, host + path, timeout, fields=fields)
        try:
            if counter.count(_PROBE) > 0:
                return counter
        except TokenizeError:
            continue
    return None


# Before the first reply (and without a chat-style /tokenize), what the server adds, per message and
# fixed. Chat: 5 and 5 cover Llama 3's template (a 4-token header and <|eot_id|> per message, BOS and
# the assistant's header) and ChatML's (<|im_start|>role\n and <|im_end|>\n, 3 for the primer), so a
# first prompt errs short. Completions: no template, the BOS most models' tokenizers add.
PRIORS = {"chat": (5, 5), "completion": (0, 1)}
OVERHEAD_REPLIES = 25  # replies whose differences the overhead is the median of: ~12 outliers in a row move it


@dataclass
class Overhead:
    """Tokens the server adds to the text we count (chat template, BOS), learned from usage per
    (endpoint kind, number of messages): the median of the last replies' differences. With an exact
    counter every difference is the template's; with calibration each carries the ratio's error on
    that prompt (~5 % of a 2,000-token prompt is 100 tokens), and the last one alone would size the
    next short prompt by it. Unknown: scaled from a known message count of the same kind, else the
    prior above."""

    _differences: dict[tuple[str, int], deque[int]] = field(default_factory=dict)

    @property
    def seen(self) -> dict[tuple[str, int], int]:
        """The overhead per (kind, message count) learned so far."""
        return {key: round(statistics.median(values)) for key, values in self._differences.items()}

    def set(self, kind: str, messages: int, tokens: int) -> None:
        """What the template adds, known exactly (a chat-style /tokenize)."""
        self._differences[(kind, messages)] = deque([tokens], maxlen=OVERHEAD_REPLIES)

    def of(self, kind: str, messages: int) -> int:
        if (values := self._differences.get((kind, messages))) is not None:
            return round(statistics.median(values))
        known = sorted((n, v) for (k, n), v in self.seen.items() if k == kind and n > 0)
        if not known:
            per, fixed = PRIORS.get(kind, PRIORS["chat"])
            return per * messages + fixed
        if len(known) >= 2:  # templates add a fixed part and a part per message: the line through the nearest two
            (n1, v1), (n2, v2) = sorted(known, key=lambda item: (abs(item[0] - messages), item[0]))[:2]
            slope = (v2 - v1) / (n2 - n1)
            return max(0, round(v1 + slope * (messages - n1)))
        n, value = known[0]
        return round(value * messages / n)

    def observe(self, kind: str, messages: int, counted: int, prompt_tokens: int) -> None:
        values = self._differences.setdefault((kind, messages), deque(maxlen=OVERHEAD_REPLIES))
        values.append(max(0, prompt_tokens - counted))
