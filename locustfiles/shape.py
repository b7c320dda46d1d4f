"""Entry file: every registered load shape, the chosen one first (Locust runs the first it finds).

    locust -f locustfiles/chat.py,locustfiles/shape.py --shape stepped   (or `shape = stepped` in a conf file)
    locust -f locustfiles/chat.py,locustfiles/shape.py --class-picker    (choose in the web UI; "Default" = no shape)

Shapes are the classes of the `shapes` package and of the modules named in LOADLINE_SHAPE_MODULES
that declare `shape_name` (shapes/registry.py); without --shape, the first by name runs.
"""

import loadline.runtime.plugin  # noqa: F401  (options, run folder, phases.csv even with a foreign user file)
from loadline.core.errors import UsageError
from loadline.shapes import registry

try:
    globals().update(registry.locustfile_classes())  # Locust picks up LoadTestShape classes from this namespace
except UsageError as error:
    registry.exit_on_usage_error(error)
