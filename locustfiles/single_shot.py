"""Event-driven single-shot chat requests (one request per event, no history)."""

import loadline.runtime.plugin  # noqa: F401
from loadline.client.users import SingleShotUser  # noqa: F401
