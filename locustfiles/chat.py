"""Chat sessions over SSE: `locust -f locustfiles/chat.py --host http://127.0.0.1:8000`.

Add a load shape with `-f locustfiles/chat.py,locustfiles/shape.py --shape stepped` (or
--class-picker to choose in the web UI).
"""

import loadline.runtime.plugin  # noqa: F401  (registers options, run folder, record transport)
from loadline.client.users import ChatSessionUser  # noqa: F401
