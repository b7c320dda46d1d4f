"""Entry file: the stepped load shape (see shapes/stepped.py and docs/shapes.md).

Append it to a scenario: locust -f locustfiles/<scenario>.py,locustfiles/shape_stepped.py
"""

import loadline.runtime.plugin  # noqa: F401  (shape options, run folder, phases.csv even with a foreign user file)
from shapes.stepped import StepShape  # noqa: F401  (Locust picks up the LoadTestShape subclass)
