"""A trace turned into a replay schedule: a window of it, at a speed, with surges laid on top.

Times: the window and the surges are in *trace* time (a surge's offset counts from the window's
start), so `--trace-window 2h..3h --trace-surge 3x@10m+2m` surges 10 minutes into that hour
whatever the speed; the schedule's `due_s` are replay (model) seconds from the replay's start:
(trace time - window start) / speed. `--time-scale X` divides them again at run time, as it does
every other duration.

A surge multiplies the rate by F over its stretch: each request in it is sent floor(F) times, one
more with probability frac(F) (seeded, so every run of one command sends the same schedule), the
copies spread evenly up to the next request so the per-second rate rises F-fold rather than
arriving in clumps. Copy j's hash_ids are moved to a namespace of its own (h + j * stride): copies
share prefixes among themselves as the trace's requests do, not with the originals (new users,
not the same prompts resent). F < 1 thins the stretch instead (a dip).

The schedule file (JSONL, written by `loadline run` into the run folder, read by every worker and
by the report) is a header object, then one array a request:
[due_s, input_tokens, output_tokens, hash_ids, session, turn, trace_index].
"""

from __future__ import annotations

import json
import math
import random
import re
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from loadline.core.errors import UsageError
from loadline.core.trace import BLOCK_TOKENS, Trace, TraceRequest, read_jsonl, sniff_jsonl

_SPAN = re.compile(r"(?:(?P<h>\d+(?:\.\d+)?)h)?(?:(?P<m>\d+(?:\.\d+)?)m)?(?:(?P<s>\d+(?:\.\d+)?)s?)?")
_SURGE = re.compile(r"(?P<factor>\d+(?:\.\d+)?)x@(?P<at>[0-9.hms]+)\+(?P<for>[0-9.hms]+)")
MAX_SURGE = 100.0


@dataclass(frozen=True)
class Surge:
    factor: float
    at_s: float  # trace seconds from the window's start
    for_s: float

    @property
    def label(self) -> str:
        return f"surge x{self.factor:g}"


@dataclass(frozen=True)
class Scheduled:
    due_s: float  # replay seconds from the replay's start (model time)
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...]
    session: str
    turn: int
    trace_index: int  # the trace request it replays (copies of a surge share it)

    def row(self) -> list[Any]:
        return [round(self.due_s, 6), self.input_tokens, self.output_tokens, list(self.hash_ids), self.session,
                self.turn, self.trace_index]  # fmt: skip

    @classmethod
    def of_row(cls, row: list[Any]) -> Scheduled:
        due, n_in, n_out, hashes, session, turn, index = row
        return cls(float(due), int(n_in), int(n_out), tuple(hashes), str(session), int(turn), int(index))


@dataclass(frozen=True)
class PhaseSpan:
    label: str
    kind: str  # shapes/phase.py KINDS: baseline, burst, recover
    start_s: float  # replay seconds
    end_s: float
    requests: int  # scheduled in [start, end)

    @property
    def rate(self) -> float:
        return self.requests / (self.end_s - self.start_s) if self.end_s > self.start_s else 0.0


@dataclass
class Schedule:
    format: str
    block_tokens: int
    source: str
    speed: float
    window: tuple[float, float | None]
    surges: list[Surge]
    requests: list[Scheduled]
    trace_requests: int  # in the window, before surges
    duration_s: float  # replay seconds: the window's length (or its last request) / speed
    phases: list[PhaseSpan] = field(default_factory=list)

    def header(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "block_tokens": self.block_tokens,
            "source": self.source,
            "speed": self.speed,
            "window": list(self.window),
            "surges": [asdict(s) for s in self.surges],
            "trace_requests": self.trace_requests,
            "requests": len(self.requests),
            "duration_s": self.duration_s,
            "phases": [asdict(p) for p in self.phases],
        }


def parse_span(text: str, what: str) -> float:
    """Seconds in `90`, `90s`, `2.5m`, `1h30m`; UsageError otherwise."""
    match = _SPAN.fullmatch(text.strip())
    if not text.strip() or match is None or not any(match.groupdict().values()):
        raise UsageError(f"{what}: expected a duration like 90, 90s, 10m or 1h30m (got {text!r})")
    parts = {k: float(v or 0) for k, v in match.groupdict().items()}
    return parts["h"] * 3600 + parts["m"] * 60 + parts["s"]


def parse_window(text: str) -> tuple[float, float | None]:
    """`START..END` in trace time from its first request (either side may be empty): 2h..3h, 600..1200, ..30m."""
    if not text:
        return 0.0, None
    if ".." not in text:
        raise UsageError(f"--trace-window: expected START..END like 2h..3h or 600..1200 (got {text!r})")
    start_text, end_text = text.split("..", 1)
    start = parse_span(start_text, "--trace-window") if start_text.strip() else 0.0
    end = parse_span(end_text, "--trace-window") if end_text.strip() else None
    if end is not None and end <= start:
        raise UsageError(f"--trace-window: the end must come after the start (got {text!r})")
    return start, end


def parse_surges(text: str) -> list[Surge]:
    """`FACTORx@OFFSET+DURATION`, comma-separated: 3x@10m+2m = three times the rate, 10 minutes into
    the window, for 2 minutes (trace time)."""
    surges = []
    for part in (p.strip() for p in (text or "").split(",") if p.strip()):
        match = _SURGE.fullmatch(part)
        if match is None:
            raise UsageError(f"--trace-surge: expected FACTORx@OFFSET+DURATION like 3x@10m+2m (got {part!r})")
        surge = Surge(
            float(match["factor"]),
            parse_span(match["at"], "--trace-surge offset"),
            parse_span(match["for"], "--trace-surge duration"),
        )
        if not (0 < surge.factor <= MAX_SURGE) or surge.factor == 1:
            raise UsageError(f"--trace-surge: the factor must be > 0, not 1, and <= {MAX_SURGE:g} (got {part!r})")
        if surge.for_s <= 0:
            raise UsageError(f"--trace-surge: the duration must be > 0 (got {part!r})")
        surges.append(surge)
    surges.sort(key=lambda s: s.at_s)
    for a, b in zip(surges, surges[1:]):
        if b.at_s < a.at_s + a.for_s:
            raise UsageError("--trace-surge: surges must not overlap")
    return surges


def check_speed(speed: float) -> None:
    if not (math.isfinite(speed) and speed > 0):
        raise UsageError(f"--trace-speed must be > 0 (got {speed!r})")


def warp(
    trace: Trace, window: tuple[float, float | None], speed: float, surges: list[Surge], seed: int = 0
) -> Schedule:
    """The replay schedule of `trace` (see the module docstring)."""
    check_speed(speed)
    start, end = window
    picked = [r for r in trace.requests if r.at_s >= start and (end is None or r.at_s < end)]
    if not picked:
        raise UsageError(
            f"--trace-window {start:g}s..{'' if end is None else f'{end:g}s'} holds none of the trace's requests "
            f"(it spans 0..{trace.duration_s:.6g} s)"
        )
    if end is None:  # to the last request and one mean gap after it, so the last is inside the replay
        span = picked[-1].at_s - picked[0].at_s
        end = picked[-1].at_s + (span / (len(picked) - 1) if len(picked) > 1 and span > 0 else 1.0)
    length = end - start
    for s in surges:
        if s.at_s >= length:
            raise UsageError(f"--trace-surge {s.factor:g}x@{s.at_s:g}s starts after the replay's {length:g} s")
    stride = 1 + max((h for r in trace.requests for h in r.hash_ids), default=0)
    rng = random.Random(f"trace-surge-{seed}")
    out: list[Scheduled] = []
    for i, r in enumerate(picked):
        t = r.at_s - start
        surge = next((s for s in surges if s.at_s <= t < s.at_s + s.for_s), None)
        copies = 1
        if surge is not None:
            copies = int(surge.factor) + (1 if rng.random() < surge.factor - int(surge.factor) else 0)
        if copies == 0:
            continue
        following = picked[i + 1].at_s - start if i + 1 < len(picked) else length
        until = min(following, surge.at_s + surge.for_s) if surge is not None else following
        gap = max(0.0, until - t) / copies
        for j in range(copies):
            out.append(_scheduled(r, (t + j * gap) / speed, j, stride))
    out.sort(key=lambda s: s.due_s)
    schedule = Schedule(trace.format, trace.block_tokens, trace.source, speed, window, surges, out, len(picked),
                        length / speed)  # fmt: skip
    schedule.phases = phases_of(schedule)
    return schedule


def _scheduled(r: TraceRequest, due_s: float, copy: int, stride: int) -> Scheduled:
    hashes = r.hash_ids if copy == 0 else tuple(h + copy * stride for h in r.hash_ids)
    session = r.session if copy == 0 or not r.session else f"{r.session}~{copy}"
    return Scheduled(due_s, r.input_tokens, r.output_tokens, hashes, session, r.turn, r.index)


def phases_of(schedule: Schedule) -> list[PhaseSpan]:
    """The replay's phases in replay seconds: the trace before, during and after each surge."""
    edges: list[tuple[float, str, str]] = [(0.0, "replay", "baseline")]
    for n, s in enumerate(schedule.surges, 1):
        edges.append((s.at_s / schedule.speed, f"surge-{n} (x{s.factor:g})", "burst"))
        edges.append(((s.at_s + s.for_s) / schedule.speed, f"after-surge-{n}", "recover"))
    end = max(schedule.duration_s, schedule.requests[-1].due_s if schedule.requests else 0.0)
    spans = []
    dues = [r.due_s for r in schedule.requests]
    for k, (at, label, kind) in enumerate(edges):
        until = min(edges[k + 1][0], end) if k + 1 < len(edges) else end
        at = min(at, end)
        last = k + 1 == len(edges)
        count = sum(1 for d in dues if at <= d < until or (last and d >= until))
        if until > at or count:
            spans.append(PhaseSpan(label, kind, at, until, count))
    return spans


def share(requests: list[Scheduled], k: int, n: int) -> list[Scheduled]:
    """Worker k of n's deterministic share: by session (a conversation stays on one worker) when the
    trace names sessions, else every n-th request. The n shares partition the schedule."""
    if n <= 1:
        return list(requests)
    if any(r.session for r in requests):
        return [r for r in requests if zlib.crc32(r.session.encode()) % n == k]
    return requests[k::n]


def write(schedule: Schedule, path: Path) -> None:
    write_rows(schedule.header(), schedule.requests, path)


def write_rows(header: dict[str, Any], requests: list[Scheduled], path: Path) -> None:
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps(header) + "\n")
        for r in requests:
            out.write(json.dumps(r.row(), separators=(",", ":")) + "\n")


def load(path: str | Path) -> tuple[dict[str, Any], list[Scheduled]]:
    """A schedule file, or a JSONL trace (Mooncake or Loadline format) replayed as recorded: what a
    Locust run started without `loadline run` (the web UI's trace-schedule field) can be given."""
    try:
        with Path(path).open(encoding="utf-8") as handle:
            first = json.loads(handle.readline() or "null")
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"trace schedule {path} unreadable: {exc}") from None
    if isinstance(first, dict) and "phases" in first:
        return read(path)
    fmt = sniff_jsonl(Path(path))
    schedule = warp(read_jsonl(Path(path), fmt, BLOCK_TOKENS[fmt]), (0.0, None), 1.0, [])
    return schedule.header(), schedule.requests


def read(path: str | Path) -> tuple[dict[str, Any], list[Scheduled]]:
    """The schedule file's header and requests; UsageError when it is not one."""
    try:
        with Path(path).open(encoding="utf-8") as handle:
            header = json.loads(handle.readline())
            requests = [Scheduled.of_row(json.loads(line)) for line in handle if line.strip()]
    except (OSError, ValueError, TypeError) as exc:
        raise UsageError(f"trace schedule {path} unreadable: {exc}") from None
    if not isinstance(header, dict):
        raise UsageError(f"trace schedule {path}: no header")
    return header, requests
