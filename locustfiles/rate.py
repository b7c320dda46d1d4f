"""Open-loop load: requests (or chat sessions with --arrival-sessions) arriving at --arrival-rate per second.

locust -f locustfiles/rate.py --users 1 --arrival-rate 5 --arrival poisson    (one user per process)
"""

import loadline.runtime.plugin  # noqa: F401
from loadline.client.users.arrivals import ArrivalRateUser  # noqa: F401
