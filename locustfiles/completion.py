"""Single prompts against the legacy /v1/completions API."""

import loadline.runtime.plugin  # noqa: F401
from loadline.client.users import CompletionUser  # noqa: F401
