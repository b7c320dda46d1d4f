"""A worker's own checks: users that fail at start, and its own options that the master replaced.

Worker side (imported by plugin.py on every process; no numpy, no Flask).

Users that fail at start: Locust runs a user's `on_start` in `User.run`; when it raises, Locust
logs it, fires `user_error` with the *User* itself (a task's error comes with its TaskSet instead)
and the user's greenlet ends: the worker then runs fewer users than the master gave it and says
nothing else. Such a failure is usually the host's (a file, a credential, a library missing there),
so it hits every user of that worker: the worker tells the master (fleet.py's worker error, which
stops the run with exit 2, or is noted with --allow-partial-workers). It waits a moment first so
that the message counts the users of one spawn that failed, not only the first.

Options the master replaced: Locust hands every worker the master's parsed options with each spawn
message and they replace the worker's own (runners.py, "receive custom arguments"). A Loadline
option given on a worker's own command line (or in its LOCUST_* environment or conf file) is then
silently not what ran. The worker keeps what it was started with, compares at each test start, and
sends the master the options whose values differ: the master warns loudly and writes them in the
manifest (`worker_option_mismatches`). Not an error: the master's value is what every worker ran,
so the measurement is consistent; the warning says the worker's value was not used. Values of
secret options are never sent, only their names.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import gevent
from locust import User

from loadline.runtime import fleet

log = logging.getLogger("loadline")

GRACE_S = 0.5  # a spawn starts its users within milliseconds: their failures arrive together
SECRET_MARK = "(secret)"


class StartFailures:
    """Counts this worker's users whose start raised; reports them to the master once per test run."""

    def __init__(
        self,
        environment: Any,
        worker: str,
        report: Callable[..., None] = fleet.report_error,
        grace_s: float = GRACE_S,
    ) -> None:
        self.environment = environment
        self.worker = worker
        self.report = report
        self.grace_s = grace_s
        self.failed = 0
        self.first = ""
        self._sent = False

    def install(self) -> StartFailures:
        self.environment.events.user_error.add_listener(self.on_user_error)
        self.environment.events.test_start.add_listener(lambda **_: self.reset())
        return self

    def reset(self) -> None:
        self.failed, self.first, self._sent = 0, "", False

    def on_user_error(self, user_instance: Any, exception: BaseException, tb: Any = None, **_: Any) -> None:
        if not isinstance(user_instance, User):  # a task's error: the request path records it
            return
        self.failed += 1
        if self.failed == 1:
            self.first = f"{type(user_instance).__name__}.on_start raised {type(exception).__name__}: {exception}"
            gevent.spawn_later(self.grace_s, self.send)

    def send(self) -> None:
        if self._sent or not self.failed:
            return
        self._sent = True
        planned = int(getattr(self.environment.runner, "target_user_count", 0) or 0)
        of = f" of {planned}" if planned >= self.failed else ""
        reason = f"{self.failed}{of} user(s) failed at start: {self.first}"
        self.report(
            self.environment.runner,
            self.worker,
            reason,
            kind="users failed at start",
            users_short=self.failed,
        )


def own_options(parsed: Any, defaults: dict[str, Any]) -> dict[str, Any]:
    """The Loadline options this process was started with that differ from their defaults."""
    out = {}
    for dest, default in defaults.items():
        value = getattr(parsed, dest, default)
        if value != default:
            out[dest] = value
    return out


def _plain(value: Any) -> Any:
    """As the master's options arrive (msgpack): tuples as lists."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def replaced(own: dict[str, Any], now: Any, secret: frozenset[str]) -> dict[str, list[Any]]:
    """{option: [the worker's own value, the value that runs]} for own values the master replaced."""
    out: dict[str, list[Any]] = {}
    for dest, value in own.items():
        running = getattr(now, dest, value)
        if _plain(running) != _plain(value):
            out[dest] = [SECRET_MARK, SECRET_MARK] if dest in secret else [value, running]
    return out


def option_flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


class OptionCheck:
    """Worker side: at each test start (the master's options are in place then), send the replaced ones."""

    def __init__(self, environment: Any, worker: str, defaults: dict[str, Any], secret: frozenset[str]) -> None:
        self.environment = environment
        self.worker = worker
        self.secret = secret
        self.own = own_options(environment.parsed_options, defaults)

    def install(self) -> OptionCheck:
        self.environment.events.test_start.add_listener(lambda **_: self.check())
        return self

    def check(self) -> dict[str, list[Any]]:
        differ = replaced(self.own, self.environment.parsed_options, self.secret)
        if differ:
            shown = ", ".join(f"{option_flag(k)} {v[0]!r} (runs with {v[1]!r})" for k, v in differ.items())
            log.warning("loadline: this worker's own options are replaced by the master's: %s", shown)
            try:
                self.environment.runner.send_message(fleet.OPTIONS_MSG, {"worker": self.worker, "differ": differ})
            except Exception as exc:  # noqa: BLE001 - the warning above still says it
                log.error("loadline: could not tell the master: %s", exc)
        return differ
