"""Entry file: the stages load shape (see shapes/stages.py and docs/shapes.md).

Append it to a scenario: locust -f locustfiles/<scenario>.py,locustfiles/shape_stages.py
"""

from shapes.stages import StagesShape  # noqa: F401  (Locust picks up the LoadTestShape subclass)
