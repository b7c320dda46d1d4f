"""Entry file: all four Loadline shapes, to choose one in the web UI with --class-picker.

locust -f locustfiles/<scenario>.py,locustfiles/all_shapes.py --class-picker
(The picker's "Default" means no shape: plain users / spawn rate.)
"""

import loadline.runtime.plugin  # noqa: F401  (shape options, run folder, phases.csv even with a foreign user file)
from shapes.pulse import PulseShape  # noqa: F401
from shapes.soak import SoakShape  # noqa: F401
from shapes.stages import StagesShape  # noqa: F401
from shapes.stepped import StepShape  # noqa: F401
