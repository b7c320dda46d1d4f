"""Lengths in tokens, as distributions: how long prompts and replies are asked to be.

One spec string names a distribution (the same syntax for prompts and replies):
    200                    fixed: always 200 tokens (also `fixed:200`)
    uniform:100-300        uniform over 100..300, both included
    normal:300,50          normal, mean 300, standard deviation 50
    lognormal:300,0.6      lognormal with mean 300 and log-space sigma 0.6 (long tail, like real
                           prompts and replies: REFERENCE-workloads.md, traces)
    short=0.6,medium=0.3,long=0.1
                           the length classes of DOMAIN.md, mixed by weight (prompts.LENGTH_CLASSES),
                           uniform within a class
Every draw is a whole number of at least 1 token.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from loadline.core.errors import UsageError

LENGTH_CLASSES: dict[str, tuple[int, int]] = {"short": (8, 48), "medium": (200, 500), "long": (1000, 2000)}
KINDS = ("fixed", "uniform", "normal", "lognormal", "classes")


@dataclass(frozen=True)
class Lengths:
    kind: str
    a: float = 0.0  # fixed: the length; uniform: low; normal/lognormal: mean
    b: float = 0.0  # uniform: high; normal: standard deviation; lognormal: sigma
    classes: tuple[tuple[str, float], ...] = ()  # classes: (name, weight)

    def sample(self, rng: random.Random) -> int:
        if self.kind == "fixed":
            value = self.a
        elif self.kind == "uniform":
            value = rng.randint(int(self.a), int(self.b))
        elif self.kind == "normal":
            value = rng.gauss(self.a, self.b)
        elif self.kind == "lognormal":
            value = rng.lognormvariate(math.log(self.a) - self.b * self.b / 2, self.b)
        else:
            names = [n for n, _ in self.classes]
            low, high = LENGTH_CLASSES[rng.choices(names, weights=[w for _, w in self.classes])[0]]
            value = rng.randint(low, high)
        return max(1, round(value))

    @property
    def most(self) -> float:
        """A length few draws exceed (for sizing word lists): the top of the range or mean + 4 sd."""
        if self.kind == "uniform":
            return self.b
        if self.kind == "normal":
            return self.a + 4 * self.b
        if self.kind == "lognormal":
            return self.a * math.exp(4 * self.b)
        if self.kind == "classes":
            return max(LENGTH_CLASSES[n][1] for n, _ in self.classes)
        return self.a


def _numbers(text: str, sep: str, what: str, spec: str) -> tuple[float, float]:
    left, found, right = text.partition(sep)
    try:
        a, b = float(left), float(right)
    except ValueError:
        raise UsageError(f"{what} {spec!r}: expected two numbers separated by {sep!r}") from None
    if not found or not (math.isfinite(a) and math.isfinite(b)):
        raise UsageError(f"{what} {spec!r}: expected two numbers separated by {sep!r}")
    return a, b


def parse_mix(spec: str, what: str = "prompt mix") -> dict[str, float]:
    """'short=0.5,medium=0.4,long=0.1' -> weights; unknown classes or bad numbers are UsageErrors."""
    mix: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, weight = part.partition("=")
        name = name.strip()
        if name not in LENGTH_CLASSES:
            raise UsageError(f"{what}: unknown length class {name!r} (use {', '.join(LENGTH_CLASSES)})")
        try:
            mix[name] = float(weight)
        except ValueError:
            raise UsageError(f"{what}: weight of {name!r} is not a number: {weight!r}") from None
        if mix[name] < 0 or not math.isfinite(mix[name]):
            raise UsageError(f"{what}: weight of {name!r} is negative")
    if not mix or sum(mix.values()) <= 0:
        raise UsageError(f"{what} {spec!r} has no positive weight (e.g. short=0.5,medium=0.4,long=0.1)")
    return mix


def parse_lengths(spec: str, what: str = "length") -> Lengths:
    """A Lengths from its spec (module docstring); a one-line UsageError otherwise."""
    spec = (spec or "").strip()
    if "=" in spec:
        return Lengths("classes", classes=tuple(parse_mix(spec, what).items()))
    kind, _, args = spec.partition(":") if ":" in spec else ("fixed", "", spec)
    kind = kind.strip().lower()
    if kind == "fixed":
        try:
            value = float(args)
        except ValueError:
            raise UsageError(f"{what} {spec!r}: not a number of tokens (kinds: {', '.join(KINDS)})") from None
        if not value >= 1 or not math.isfinite(value):
            raise UsageError(f"{what} {spec!r}: must be at least 1 token")
        return Lengths("fixed", value)
    if kind == "uniform":
        low, high = _numbers(args, "-", what, spec)
        if not 1 <= low <= high:
            raise UsageError(f"{what} {spec!r}: needs 1 <= low <= high")
        return Lengths("uniform", low, high)
    if kind in ("normal", "lognormal"):
        mean, spread = _numbers(args, ",", what, spec)
        if mean < 1 or spread < 0:
            raise UsageError(f"{what} {spec!r}: needs a mean >= 1 and a spread >= 0")
        return Lengths(kind, mean, spread)
    raise UsageError(f"{what} {spec!r}: unknown kind {kind!r} (use {', '.join(KINDS)})")
