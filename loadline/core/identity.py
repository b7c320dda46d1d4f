"""Who this process is: worker id and request ids, unique across processes and machines.

Worker ids read `hostname-pid-<16 hex digits>`: 64 random bits, the first 8 digits being the
process's random tag (the first group of its request ids). With one hostname and one PID per
container (Kubernetes), n workers collide with probability about n^2 / 2^65: 3e-16 at 100 workers.

Request ids are UUIDs (version 4 layout), because some servers accept nothing else in X-Request-Id
(llama-cpp-python's server answers any other value with an empty HTTP 400). The first group is the
process's random tag (also the prefix of its user ids), the last 48 bits count requests, the rest
is random per process: unique without coordination, and sortable by process in a run folder.

Computed per process, and again after a fork: `locust --processes N` forks workers after the
locustfiles were imported, so anything computed at import time would be shared by all of them.
"""

from __future__ import annotations

import itertools
import os
import secrets
import socket
import uuid

COUNTER_MASK = (1 << 48) - 1  # the UUID's last group: version and variant bits lie outside it


class _Identity:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._base = uuid.uuid4().int & ~COUNTER_MASK
        self.tag = uuid.UUID(int=self._base).hex[:8]
        # everything but the counter is fixed per process: the id is this prefix and 12 hex digits
        self._prefix = str(uuid.UUID(int=self._base, version=4))[:-12]
        # hostname-pid alone collides (two PID-1 containers with one hostname: hostNetwork pods on a
        # node); 64 random bits make it unique at any fleet size, and the first 32 (the tag) tie it
        # to this process's request ids. Two workers that collided would merge their clock estimates.
        self.worker_id = f"{socket.gethostname()}-{os.getpid()}-{self.tag}{secrets.token_hex(4)}"
        self._requests = itertools.count(1)
        self._users = itertools.count(1)

    def request_id(self) -> str:
        return f"{self._prefix}{next(self._requests) & COUNTER_MASK:012x}"

    def user_id(self) -> str:
        return f"{self.tag}-u{next(self._users)}"


_identity = _Identity()
os.register_at_fork(after_in_child=_identity.reset)


def worker_id() -> str:
    return _identity.worker_id


TAG_DIGITS = 8  # a worker id's suffix starts with the process's tag: its request ids' first group


def request_tag_of_worker(worker: str) -> str:
    """The first group of a worker's request ids, read off its id (`hostname-pid-<tag><random>`)."""
    return worker.rsplit("-", 1)[-1][:TAG_DIGITS]


def host_of_worker(worker: str) -> str:
    """The hostname in a worker id (`hostname-pid-tag`: a hostname may hold dashes, pid and tag do not)."""
    return worker.rsplit("-", 2)[0]


def next_request_id() -> str:
    return _identity.request_id()


def next_user_id() -> str:
    return _identity.user_id()
