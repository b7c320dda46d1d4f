"""The first-bytes watch's budget (watch_budget.py): it rests while its thread waits for a core more
than BUDGET of each second, looks again after a pause that doubles while the machine stays busy, and
starts that pause afresh after a second within budget."""

from __future__ import annotations

import sys

import pytest

from loadline.client.watch_budget import BUDGET, FIRST_PAUSE_S, MAX_PAUSE_S, WINDOW_S, WatchBudget, thread_wait_s


def feed(budget: WatchBudget, shares: list[float], start: float = 0.0, waited: float = 0.0) -> list[bool]:
    """One observation per window, the thread having waited `share` of it; `resting` after each."""
    now, states = start, []
    budget.observe(now, waited)
    for share in shares:
        now += WINDOW_S
        waited += share * WINDOW_S
        budget.observe(now, waited)
        states.append(budget.resting)
    return states


# quiet box 0.2-0.8 %, a hog on the generator's core 0.3-2 % (measured, watch_budget.py)
@pytest.mark.parametrize("shares", [[0.002] * 30, [0.008, 0.02, 0.0, 0.03] * 5, [BUDGET * 0.99] * 10])
def test_within_budget_it_never_rests(shares):
    budget = WatchBudget()
    assert feed(budget, shares) == [False] * len(shares) and budget.pauses == 0


# beside two busy processes: 21-46 % (measured); just over the budget counts too
@pytest.mark.parametrize("share", [0.21, 0.46, BUDGET * 1.05])
def test_over_budget_it_rests_for_the_first_pause_then_looks_again(share):
    budget = WatchBudget()
    states = feed(budget, [share])
    assert states == [True] and budget.pauses == 1
    budget.observe(WINDOW_S + FIRST_PAUSE_S - 0.01, share * WINDOW_S)
    assert budget.resting  # still inside its pause
    budget.observe(WINDOW_S + FIRST_PAUSE_S, share * WINDOW_S)
    assert not budget.resting  # looks again: a new window starts here


def test_the_pause_doubles_while_busy_up_to_its_cap_and_starts_afresh_after_a_good_second():
    budget, now, waited, pauses = WatchBudget(), 0.0, 0.0, []
    budget.observe(now, waited)
    for _ in range(8):  # each time it looks again, one busy window sends it back to rest
        now += WINDOW_S
        waited += 0.3 * WINDOW_S
        budget.observe(now, waited)
        assert budget.resting
        pauses.append(budget._rest_until - now)
        budget.observe(budget._rest_until - 0.001, waited)
        assert budget.resting  # not a moment early
        now = budget._rest_until
        budget.observe(now, waited)  # looks again: a new window starts here
        assert not budget.resting
    assert pauses == [5.0, 10.0, 20.0, 40.0, 60.0, 60.0, 60.0, 60.0] and MAX_PAUSE_S == 60.0
    now += WINDOW_S
    budget.observe(now, waited)  # a quiet second
    assert not budget.resting
    now += WINDOW_S
    budget.observe(now, waited + 0.3)
    assert budget.resting and budget._rest_until == pytest.approx(now + FIRST_PAUSE_S)


def test_a_window_shorter_than_a_second_is_not_judged():
    budget = WatchBudget()
    budget.observe(0.0, 0.0)
    budget.observe(0.5, 0.4)  # 80 % of half a second: too short to say
    assert not budget.resting
    budget.observe(1.0, 0.4)  # 40 % of the second
    assert budget.resting


def test_where_the_wait_cannot_be_read_the_watch_stays_at_rest():
    budget = WatchBudget()
    budget.observe(0.0, None)
    budget.observe(1e6, 0.0)
    assert budget.resting


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/thread-self is Linux's")
def test_the_threads_own_wait_is_read_from_the_kernel_and_never_goes_back():
    first = thread_wait_s()
    assert first is not None and first >= 0.0
    assert thread_wait_s() >= first
