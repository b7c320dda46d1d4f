"""Locust users that behave like people using an LLM service (see each module)."""

from loadline.users.chat import ChatSessionUser
from loadline.users.events import CompletionUser, SingleShotUser

__all__ = ["ChatSessionUser", "SingleShotUser", "CompletionUser"]
