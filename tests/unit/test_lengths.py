"""Length distributions in tokens (loadline/client/lengths.py): one spec syntax for prompts and replies."""

from __future__ import annotations

import random
import statistics

import pytest

from loadline.client.lengths import LENGTH_CLASSES, parse_lengths
from loadline.core.errors import UsageError


def _draws(spec: str, n: int = 4000) -> list[int]:
    lengths, rng = parse_lengths(spec), random.Random(11)
    return [lengths.sample(rng) for _ in range(n)]


@pytest.mark.parametrize("spec", ["200", "fixed:200", " fixed:200 "])
def test_a_fixed_length_is_always_that(spec):
    assert set(_draws(spec, 50)) == {200}


def test_uniform_covers_its_range_both_ends_included():
    draws = _draws("uniform:10-14")
    assert set(draws) == {10, 11, 12, 13, 14}


def test_normal_has_its_mean_and_spread_and_never_goes_below_one_token():
    draws = _draws("normal:300,50")
    assert statistics.mean(draws) == pytest.approx(300, rel=0.02)
    assert statistics.stdev(draws) == pytest.approx(50, rel=0.06)
    assert min(_draws("normal:2,10")) >= 1


def test_lognormal_has_its_mean_and_a_long_tail():
    draws = _draws("lognormal:300,0.6", 20000)
    assert statistics.mean(draws) == pytest.approx(300, rel=0.03)
    assert statistics.median(draws) < 300 < max(draws) / 2


def test_classes_draw_within_their_ranges_by_weight():
    draws = _draws("short=0.5,long=0.5")
    short = [d for d in draws if LENGTH_CLASSES["short"][0] <= d <= LENGTH_CLASSES["short"][1]]
    long = [d for d in draws if LENGTH_CLASSES["long"][0] <= d <= LENGTH_CLASSES["long"][1]]
    assert len(short) + len(long) == len(draws) and abs(len(short) - len(long)) < 0.06 * len(draws)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("0", "at least 1 token"),
        ("abc", "not a number"),
        ("uniform:300-100", "low <= high"),
        ("uniform:100", "two numbers"),
        ("normal:300", "two numbers"),
        ("normal:0,5", "mean >= 1"),
        ("pareto:1,2", "unknown kind"),
        ("tiny=1", "unknown length class"),
        ("short=-1", "negative"),
        ("nan", "at least 1 token"),
    ],
)
def test_a_bad_spec_is_one_line_naming_what_is_wrong(spec, message):
    with pytest.raises(UsageError, match=message):
        parse_lengths(spec, "--prompt-tokens")
