"""Event-driven single-shot chat requests (one request per event, no history)."""

import loadline.plugin  # noqa: F401
from loadline.users import SingleShotUser  # noqa: F401
