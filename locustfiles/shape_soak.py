"""Entry file: the soak load shape (see shapes/soak.py and docs/shapes.md).

Append it to a scenario: locust -f locustfiles/<scenario>.py,locustfiles/shape_soak.py
"""

import loadline.runtime.plugin  # noqa: F401  (shape options, run folder, phases.csv even with a foreign user file)
from shapes.soak import SoakShape  # noqa: F401  (Locust picks up the LoadTestShape subclass)
