"""Single prompts against the legacy /v1/completions API."""

import loadline.plugin  # noqa: F401
from loadline.users import CompletionUser  # noqa: F401
