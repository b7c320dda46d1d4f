"""Who this process is: worker id and request ids, unique across processes and machines.

Computed per process, and again after a fork: `locust --processes N` forks workers after the
locustfiles were imported, so anything computed at import time would be shared by all of them.
"""

from __future__ import annotations

import itertools
import os
import socket
import uuid


class _Identity:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.tag = uuid.uuid4().hex[:6]
        self.worker_id = f"{socket.gethostname()}-{os.getpid()}"
        self._requests = itertools.count(1)
        self._users = itertools.count(1)

    def request_id(self) -> str:
        return f"{self.tag}-{next(self._requests)}"

    def user_id(self) -> str:
        return f"{self.tag}-u{next(self._users)}"


_identity = _Identity()
os.register_at_fork(after_in_child=_identity.reset)


def worker_id() -> str:
    return _identity.worker_id


def next_request_id() -> str:
    return _identity.request_id()


def next_user_id() -> str:
    return _identity.user_id()
