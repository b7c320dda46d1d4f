"""Entry file: the pulse load shape (see shapes/pulse.py and docs/shapes.md).

Append it to a scenario: locust -f locustfiles/<scenario>.py,locustfiles/shape_pulse.py
"""

from shapes.pulse import PulseShape  # noqa: F401  (Locust picks up the LoadTestShape subclass)
