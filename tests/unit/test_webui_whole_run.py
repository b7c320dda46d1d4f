"""The LLM tab's whole-run column: recomputed at most every few seconds, but never held empty."""

from __future__ import annotations

from types import SimpleNamespace

from loadline.runtime import webui


class Live:
    """Live stats whose records arrive after the first poll."""

    def __init__(self) -> None:
        self.requests = 0
        self.calls = 0

    def window(self, start_wall, end_wall, itl):
        self.calls += 1
        return SimpleNamespace(requests=self.requests) if self.requests else None


def test_an_empty_whole_run_is_recomputed_at_the_next_poll_and_a_full_one_is_kept(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(webui.time, "monotonic", lambda: clock[0])
    webui._whole_cache.clear()
    live = Live()
    env = SimpleNamespace(loadline_live=live, parsed_options=SimpleNamespace(time_scale=1.0))
    assert webui._whole_run(env, 0.0, 10.0) is None  # no records yet
    live.requests = 5
    clock[0] += 1.0  # well inside the refresh interval
    assert webui._whole_run(env, 0.0, 11.0).requests == 5  # not the cached "nothing yet"
    live.requests = 9
    clock[0] += 1.0
    assert webui._whole_run(env, 0.0, 12.0).requests == 5  # data is kept for the refresh interval
    clock[0] += webui.WHOLE_RUN_REFRESH_S
    assert webui._whole_run(env, 0.0, 13.0).requests == 9
    assert live.calls == 3
