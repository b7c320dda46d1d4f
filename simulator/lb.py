"""The load balancer in front of the replicas: round robin, or least connections (in-flight requests).

Per request, not per connection (an L7 gateway): a keep-alive connection's requests can land on
different replicas. Replicas that are down are skipped; with none up the gateway answers 503.
"""

from __future__ import annotations

from collections.abc import Sequence as Seq

from loadline.simulator.engine import Engine


class LoadBalancer:
    def __init__(self, engines: Seq[Engine], policy: str) -> None:
        self.engines = list(engines)
        self.policy = policy
        self._next = 0

    def pick(self) -> Engine | None:
        n = len(self.engines)
        order = [self.engines[(self._next + k) % n] for k in range(n)]
        self._next = (self._next + 1) % n
        up = [e for e in order if e.up]
        if not up:
            return None
        if self.policy == "least_conn":
            return min(up, key=lambda e: e.in_flight)  # ties go to the rotation order
        return up[0]
