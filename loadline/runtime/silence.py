"""A worker that runs users but sends no records while the others do: the master's rule, as pure code.

Every worker ships its finished records once per shipping interval (transport.py, 1 s), an empty
batch too. A worker whose users run but never finish a request (stuck on a host-side problem the
users do not raise: a proxy that swallows connections, a hung DNS lookup) sends empty batches, its
heartbeats are fine, and Locust counts its users as running. The master compares it with the others:

- The others' records since this worker last sent one, scaled to this worker's share of users, is
  what it would have sent if its users behaved like theirs: expected = others_sent x users / others_users.
  A worker with long think times or long generations legitimately sends nothing for a while; so do
  the others then, and the expected count stays small. Silence is flagged only when at least
  EXPECTED_MIN records were expected: if its users' records came as a Poisson stream at the others'
  rate, the chance of none is e^-30 (1e-13), so a quiet but healthy worker is not flagged.
- The others' per-user cycle (user-seconds per record = think time + request duration, as they see
  it) gives the time a freshly started user needs for its first record: the window is at least two
  such cycles plus SHIPPING_SLACK shipping intervals (the record waits up to one interval in the
  buffer, and its batch and the master's poll add one each), so a worker that just got its users
  (a ramp, a late spawn) is never flagged before its first records could have come.

Needs another worker that sends: with one worker, or when all are silent, nothing is flagged (the
run's own checks then see no records). A worker with no users is never silent. Nor is one the master
has not heard from within HEARD_WITHIN shipping intervals: a live worker ships a batch every interval,
empty or not, so one that sends nothing at all is dead or cut off, and Locust's heartbeats declare it
lost a few seconds later (fleet.py): calling it silent first would stop a run a lost worker must not stop.
"""

from __future__ import annotations

from dataclasses import dataclass

EXPECTED_MIN = 30.0
HEARD_WITHIN = 2.5  # shipping intervals: one batch late is a busy worker, more is a lost one
CYCLES = 2.0
SHIPPING_SLACK = 3.0


@dataclass(frozen=True)
class Activity:
    """One connected worker at a poll: its users now and its records so far this run."""

    node: str
    worker: str
    users: int
    rows: int
    heard_s_ago: float = 0.0  # since the master last heard from it (a batch or a clock reply)


@dataclass
class _Quiet:
    since: float  # master clock: when it last sent a record (or got its users)
    rows: int  # its records then
    others: int  # the other workers' records then


@dataclass(frozen=True)
class Silent:
    node: str
    worker: str
    users: int
    quiet_s: float
    others_sent: int
    expected: float
    window_s: float

    @property
    def reason(self) -> str:
        return (
            f"ran {self.users} user(s) but sent no records for {self.quiet_s:.0f} s (its batches came, empty) "
            f"while the other workers "
            f"sent {self.others_sent} (about {self.expected:.0f} expected from it at its share of the users; "
            f"the rule waits at least {self.window_s:.0f} s)"
        )


class SilenceRule:
    """Fed the workers' activity at every poll; returns each silent worker once per run."""

    def __init__(self, shipping_interval_s: float) -> None:
        self.shipping_interval_s = shipping_interval_s
        self._quiet: dict[str, _Quiet] = {}
        self._flagged: set[str] = set()

    def reset(self) -> None:
        self._quiet, self._flagged = {}, set()

    def update(self, now: float, workers: list[Activity]) -> list[Silent]:
        total = sum(w.rows for w in workers)
        out = []
        for w in workers:
            others_rows = total - w.rows
            quiet = self._quiet.get(w.node)
            if w.users <= 0:
                self._quiet.pop(w.node, None)
                continue
            if quiet is None or w.rows != quiet.rows:
                self._quiet[w.node] = _Quiet(now, w.rows, others_rows)
                continue
            found = self._judge(now, w, quiet, others_rows, workers)
            if found is not None and w.node not in self._flagged:
                self._flagged.add(w.node)
                out.append(found)
        return out

    def _judge(
        self, now: float, w: Activity, quiet: _Quiet, others_rows: int, workers: list[Activity]
    ) -> Silent | None:
        others_users = sum(o.users for o in workers if o.node != w.node and o.users > 0)
        others_sent = others_rows - quiet.others
        quiet_s = now - quiet.since
        if others_users <= 0 or others_sent <= 0 or quiet_s <= 0:
            return None
        expected = others_sent * w.users / others_users
        cycle_s = others_users * quiet_s / others_sent  # user-seconds per record among the others
        window_s = CYCLES * cycle_s + SHIPPING_SLACK * self.shipping_interval_s
        if expected < EXPECTED_MIN or quiet_s < window_s:
            return None
        if w.heard_s_ago > HEARD_WITHIN * self.shipping_interval_s:
            return None  # not even empty batches: lost, not silent (the heartbeats will say)
        return Silent(w.node, w.worker, w.users, quiet_s, others_sent, expected, window_s)
