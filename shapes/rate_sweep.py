"""Rate sweep: the highest arrival rate that meets the SLO, found by a documented search.

The search (as guidellm's sweep: synchronous, saturated, then between):
1. light: --sweep-start-rate (default 0.5/s) for one hold. Requests rarely overlap, so 1 / E2E P50 is
   the synchronous rate (one request at a time, closed loop); the phase must meet the SLO, else
   there is no compliant rate and the sweep ends.
2. saturated: --sweep-max-rate (a flood) for one hold; what the server completed per second there
   is its saturated throughput. If the flood itself met the SLO and was carried, the answer is >= it.
   A drain phase at rate 0 for half a hold (kind `recover`, not a load level) follows every
   overloaded phase, so its backlog does not burden the next probe.
3. bisect: lo = the synchronous rate (capped at the saturated one), hi = 1.25 x the saturated
   throughput (the window undercounts requests still in flight at its end), at most --sweep-max-rate.
   Each probe at (lo + hi) / 2 holds for one hold; it passes when it meets the SLO (the stop rule's
   judge: loadline/core/judge.py) and carried its rate (loadline/core/arrival_rate.py): lo = probe,
   else hi = probe. The sweep ends when (hi - lo) / hi < --sweep-precision or after --sweep-probes probes.
   That hi is a guess, not a bound: a server overloaded by the flood can complete fewer requests per
   second than it serves at a lower rate (preemption, a queue past its KV cache, a generator that fell
   behind at the flood's rate), so the guess is probed first. If it passes, lo = it and the guess
   doubles (up to the flood's rate, which failed); bisection starts once hi is a rate that failed.
   An answer that no failed probe bounds (the probes ran out first) is reported as "at least" it.
The answer, the highest passing rate, is written on the last phase's note and in the manifest
(`sweep_max_rate`); every probe is a phase with its `target_rate`, so the report's max
SLO-compliant throughput and `loadline plan` read the same run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from loadline.core import runfolder
from loadline.shapes.options import ShapeOption, require, time_scale
from loadline.shapes.phase import Phase, scaled
from loadline.shapes.rate_steps import RateShape, rate_text
from loadline.shapes.stepped import MAX_ERROR_RATE, MIN_REQUESTS, SETTLE

logger = logging.getLogger(__name__)

START = ShapeOption("--sweep-start-rate", 0.5, "Rate sweep: the light probe's rate (model requests/s)")
MAX_RATE = ShapeOption("--sweep-max-rate", 100.0, "Rate sweep: the flood probe's rate, and the highest probed")
HOLD = ShapeOption("--sweep-hold", 60.0, "Rate sweep: seconds each probe holds its rate")
PROBES = ShapeOption("--sweep-probes", 6, "Rate sweep: most probes after the light and flood ones")
PRECISION = ShapeOption("--sweep-precision", 0.05, "Rate sweep: stop when (hi - lo) / hi is below this")
HEADROOM = 1.25  # hi = 1.25 x the flood's measured completions/s (module docstring, step 3)


@dataclass(frozen=True)
class SweepSettings:
    start: float
    max_rate: float
    hold_s: float
    probes: int
    precision: float
    stop_on_slo: bool  # read by the stepped stop rule's judge; a sweep judges every probe and never stops early
    max_error_rate: float
    min_requests: int
    settle_s: float

    @classmethod
    def from_options(cls, options: Any) -> SweepSettings:
        s = cls(
            START.read(options),
            MAX_RATE.read(options),
            HOLD.read(options),
            PROBES.read(options),
            PRECISION.read(options),
            True,
            MAX_ERROR_RATE.read(options),
            MIN_REQUESTS.read(options),
            SETTLE.read(options),
        )
        require(0 < s.start < s.max_rate, "--sweep-start-rate must be > 0 and below --sweep-max-rate")
        require(s.hold_s > 0, "--sweep-hold must be > 0")
        require(1 <= s.probes <= 30, "--sweep-probes must be between 1 and 30")
        require(0 < s.precision < 1, "--sweep-precision must be between 0 and 1")
        return s


@dataclass
class Search:
    lo: float = 0.0  # highest rate that passed
    hi: float = 0.0
    hi_failed: bool = False  # hi is a rate that broke (a probe's, or the flood's), not the 1.25x guess
    probes: int = 0
    answer: float | None = None


class RateSweepShape(RateShape):
    """What is the highest arrival rate that meets the SLO? A light, a flood, then bisection probes.

    Run with arrival-rate users (`loadline run --scenario rate --shape rate-sweep`); see the module docstring.
    """

    shape_name = "rate-sweep"
    settings: SweepSettings | None  # StepShape's, narrowed: plan() sets a SweepSettings
    shape_options = (START, MAX_RATE, HOLD, PROBES, PRECISION, MAX_ERROR_RATE, MIN_REQUESTS, SETTLE)

    def plan(self, options: Any) -> list[Phase]:
        super().plan(options)  # the SLO, time scale and streaming the stop rule judges with
        self.settings = SweepSettings.from_options(options)
        self.search = Search()
        s = self.settings
        return [
            self.rate_phase("light", s.start, s.hold_s, judged=True),
            self.rate_phase("flood", s.max_rate, s.hold_s, judged=True),
        ]

    def on_phase_end(self, phase: Phase, start_wall: float, end_wall: float) -> str | None:
        if not phase.judged:
            return None
        reason = super().on_phase_end(phase, start_wall, end_wall)  # SLO, errors, rate carried
        passed = reason is None
        rate = float(phase.target_rate or 0.0)
        search, s = self.search, self.settings
        if phase.label.startswith("light"):
            if not passed:
                return self._finish(None, f"even {rate_text(rate)} breaks: {reason}")
            e2e = self._window(start_wall, end_wall)
            sync = 1000.0 / e2e.e2e_p50_ms if e2e is not None and e2e.e2e_p50_ms else rate
            search.lo = max(rate, sync)
            logger.info("rate sweep: synchronous rate %.3g/s (1 / E2E P50 at %s)", sync, rate_text(rate))
            return None
        if phase.label.startswith("flood"):
            if passed:
                return self._finish(rate, "the flood itself met the SLO: raise --sweep-max-rate to look higher")
            window = self._window(start_wall, end_wall)
            throughput = window.rps if window is not None and window.rps else rate
            self._guess_ceiling(HEADROOM * throughput)
            search.lo = min(search.lo, search.hi / 2)
            logger.info(
                "rate sweep: saturated throughput %.3g/s; searching %s..%s%s",
                throughput,
                rate_text(search.lo),
                rate_text(search.hi),
                "" if search.hi_failed else ", the guessed ceiling first",
            )
            self._drain()
            self._next_probe()
            return None
        search.probes += 1
        # each probe's outcome in the log: the sweep's answer is read off these lines
        logger.info("rate sweep: %s %s", phase.label, f"failed: {reason}" if reason else "met the SLO")
        if not passed:
            search.hi, search.hi_failed = rate, True
        elif search.hi_failed or rate < search.hi:
            search.lo = rate
        else:  # the guessed ceiling held: look twice as high
            search.lo = rate
            self._guess_ceiling(2 * search.hi)
        assert s is not None  # plan() set it before the first phase
        converged = search.hi_failed and (search.hi - search.lo) / search.hi < s.precision
        if converged or search.probes >= s.probes:
            if not search.hi_failed:
                return self._finish(
                    search.lo,
                    f"at least {rate_text(search.lo)}: every probe passed, and no rate "
                    f"between it and the flood's {rate_text(s.max_rate)} was tried",
                )
            return self._finish(search.lo, f"bracket {rate_text(search.lo)}..{rate_text(search.hi)}")
        if not passed:
            self._drain()
        self._next_probe()
        return None

    def _guess_ceiling(self, rate: float) -> None:
        """hi = `rate`, rounded as probes are and capped at the flood's rate, which is a failure, not a guess."""
        assert self.settings is not None  # plan() set it before the first phase
        search, max_rate = self.search, self.settings.max_rate
        search.hi = round(min(max_rate, rate), 3)
        search.hi_failed = search.hi >= max_rate

    def _drain(self) -> None:
        """Rate 0 for half a hold after an overloaded phase: its backlog (at most --max-inflight requests)
        finishes before the next probe, which would otherwise inherit its queue."""
        assert self.settings is not None  # plan() set it before the first phase
        self._append(Phase("drain (0/s)", "recover", self.settings.hold_s / 2, self.schedulers(), target_rate=0.0))

    def _next_probe(self) -> None:
        """The guessed ceiling itself until a rate has failed, then the middle of the bracket."""
        assert self.settings is not None  # plan() set it before the first phase
        search = self.search
        rate = round(search.hi if not search.hi_failed else (search.lo + search.hi) / 2, 3)
        self._append(self.rate_phase(f"probe-{search.probes + 1}", rate, self.settings.hold_s, judged=True))

    def _append(self, phase: Phase) -> None:
        assert self.state is not None
        self.state.phases.append(scaled(phase, time_scale(self.options)))

    def _finish(self, answer: float | None, why: str) -> str | None:
        """No further phase: the shape ends after this one. The answer goes to the timeline and manifest."""
        self.search.answer = answer
        text = (
            f"sweep: max SLO-compliant rate {rate_text(answer)} ({why})"
            if answer is not None
            else f"sweep: no SLO-compliant rate ({why})"
        )
        logger.warning("%s", text)
        assert self.state is not None
        del self.state.phases[self.state.index + 1 :]  # e.g. the flood, when the light probe already broke
        self.state.timeline.planned_phases = len(self.state.phases)  # the open phase is now the last
        if self.state.timeline.open is not None:
            self.state.timeline.annotate(self.state.timeline.open, text)
        active = runfolder.active()
        if active is not None:
            try:
                runfolder.update_manifest(active.path, sweep_max_rate=answer, sweep=text)
            except OSError as exc:
                logger.warning("could not write the sweep's answer to the manifest: %s", exc)
        return None
