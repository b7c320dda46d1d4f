"""A person chatting: a session of several turns, history growing, think time between turns."""

from __future__ import annotations

import time
from collections.abc import Sequence

import gevent
from locust import task

from loadline.client.users.base import Lane, LLMUser


class ChatSessionUser(LLMUser):
    """Multi-turn chat over SSE. Each turn resends the whole history plus the new user message."""

    kind = "chat"

    @task
    def session(self) -> None:
        self.check_settings()
        reply_tokens = self.converse()
        s = self.settings
        assert s is not None  # check_settings passed
        gevent.sleep(s.think.sample(self.rng, reply_tokens))  # before the next conversation

    def converse(self, lane: Lane | None = None) -> int:
        """One conversation, turn by turn; returns the last reply's token count (for the reading time).

        Open-loop sessions (users/arrivals.py) pass their `lane`: the first turn is due when the session
        arrived, each later turn when its think time ended."""
        s = self.settings
        assert s is not None  # its callers' tasks passed check_settings
        session_id = f"{self.user_id}-s{self.rng.getrandbits(32):08x}"
        messages: list[dict] = self.system_messages()
        turns = s.session.sample(self.rng)
        # a dataset conversation's human turns, or None: a message built to a drawn length per turn
        human_turns: Sequence[str | None] = s.prompts.dataset_conversation(self.rng) or [None] * turns
        reply_tokens = 0
        for turn, text in enumerate(human_turns):
            if turn:
                gevent.sleep(s.think.sample(self.rng, reply_tokens))
                if lane is not None:
                    lane.due_wall = time.time()
            plan = self.plan(messages, text, whole=False)
            result = self.send(self.body(plan.messages, plan.max_tokens), session_id, turn, lane, plan)
            if result is None:
                # A failed turn leaves no trace in the conversation (chat front ends drop the
                # errored exchange; resending it would make every later turn fail the same way).
                reply_tokens = 0
                continue
            messages.append(plan.messages[-1])
            reply_tokens = len(result.arrivals)
            messages.append({"role": "assistant", "content": result.text})
        return reply_tokens
