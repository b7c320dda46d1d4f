"""Locust users that behave like people using an LLM service (see each module)."""

from loadline.client.users.chat import ChatSessionUser
from loadline.client.users.events import CompletionUser, SingleShotUser

__all__ = ["ChatSessionUser", "SingleShotUser", "CompletionUser"]
