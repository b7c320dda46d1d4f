"""Entry file: the pulse load shape (see shapes/pulse.py and docs/shapes.md).

Append it to a scenario: locust -f locustfiles/<scenario>.py,locustfiles/shape_pulse.py
"""

import loadline.runtime.plugin  # noqa: F401  (shape options, run folder, phases.csv even with a foreign user file)
from shapes.pulse import PulseShape  # noqa: F401  (Locust picks up the LoadTestShape subclass)
