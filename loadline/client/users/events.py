"""Event-driven users: one request per event (DOMAIN.md's second request kind), no history."""

from __future__ import annotations

import gevent
from locust import task

from loadline.client.streaming import completion_content
from loadline.client.users.base import LLMUser, PromptPlan


def event_plan(user: LLMUser) -> PromptPlan:
    """One event's request: the shared system prompt (if any) and one fresh user message, a
    dataset's opening turn or text built so that the whole prompt has the drawn length in tokens."""
    s = user.settings
    assert s is not None  # the user's task passed check_settings
    return user.plan(user.system_messages(), s.prompts.dataset_message(user.rng), whole=True)


class SingleShotUser(LLMUser):
    """One chat completion per event, then an exponential pause (mean --event-interval) before the next.

    A closed loop like every Locust user: when the service slows down, each user sends less. For
    a fixed arrival rate, give many users a long interval (rate ~ users / interval).
    """

    abstract = False
    kind = "single"

    @task
    def event(self) -> None:
        self.check_settings()
        s = self.settings
        assert s is not None  # check_settings passed
        plan = event_plan(self)
        self.send(self.body(self.prompt_of(plan.messages), plan.max_tokens), plan=plan)
        if s.event_interval > 0:
            gevent.sleep(self.rng.expovariate(1.0 / s.event_interval))

    def prompt_of(self, messages: list[dict]) -> list[dict] | str:
        return messages


class CompletionUser(SingleShotUser):
    """The legacy /v1/completions API: a plain prompt string, tokens in choices[0].text."""

    endpoint = "/v1/completions"
    kind = "completion"
    template = "completion"
    content_of = staticmethod(completion_content)

    def prompt_of(self, messages: list[dict]) -> str:
        return "\n\n".join(m["content"] for m in messages)

    def body(self, prompt: str | list[dict], max_tokens: int | None = None) -> dict:
        s = self.settings
        assert s is not None  # check_settings passed
        return self._common({"model": self.model, "prompt": prompt, "stream": s.stream}, max_tokens)
