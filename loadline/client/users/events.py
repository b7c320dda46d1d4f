"""Event-driven users: one request per event (DOMAIN.md's second request kind), no history."""

from __future__ import annotations

import gevent
from locust import task

from loadline.client.prompts import fit_history
from loadline.client.streaming import completion_content
from loadline.client.users.base import LLMUser


def event_messages(user: LLMUser) -> list[dict]:
    """One event's chat messages: the shared system prompt (if any) and one fresh user message."""
    s = user.settings
    messages = [{"role": "system", "content": s.prompts.system_prompt}] if s.prompts.system_prompt else []
    messages.append({"role": "user", "content": s.prompts.message(user.rng)})
    return fit_history(messages, user.prompt_budget)


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
        self.send(self.body(self.prompt_of(event_messages(self))))
        if s.event_interval > 0:
            gevent.sleep(self.rng.expovariate(1.0 / s.event_interval))

    def prompt_of(self, messages: list[dict]) -> list[dict] | str:
        return messages


class CompletionUser(SingleShotUser):
    """The legacy /v1/completions API: a plain prompt string, tokens in choices[0].text."""

    endpoint = "/v1/completions"
    kind = "completion"
    content_of = staticmethod(completion_content)

    def prompt_of(self, messages: list[dict]) -> str:
        return "\n\n".join(m["content"] for m in messages)

    def body(self, prompt) -> dict:
        return self._common({"model": self.model, "prompt": prompt, "stream": self.settings.stream})
