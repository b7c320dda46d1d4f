"""Entry file: the stepped load shape (see shapes/stepped.py and docs/shapes.md).

Append it to a scenario: locust -f locustfiles/<scenario>.py,locustfiles/shape_stepped.py
"""

from shapes.stepped import StepShape  # noqa: F401  (Locust picks up the LoadTestShape subclass)
