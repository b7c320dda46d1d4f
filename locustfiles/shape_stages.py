"""Entry file: the stages load shape (see shapes/stages.py and docs/shapes.md).

Append it to a scenario: locust -f locustfiles/<scenario>.py,locustfiles/shape_stages.py
"""

import loadline.runtime.plugin  # noqa: F401  (shape options, run folder, phases.csv even with a foreign user file)
from shapes.stages import StagesShape  # noqa: F401  (Locust picks up the LoadTestShape subclass)
