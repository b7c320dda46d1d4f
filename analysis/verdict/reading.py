"""The engine's state in one window, and the margin arithmetic every rule uses.

`read(ctx, window)` gathers what the engine said during a window (running and waiting requests,
KV pool, preemptions, GPU, per-token time, queue and prefill time) and the engine-side reasons the
window shows a limit: a waiting queue persistently non-empty, or a KV pool pinned while it
preempts (DOMAIN.md: "any of these works in a single phase").

A `Check` is one defining signal against its threshold. Its margin says how far past the
threshold the signal is, relative to the threshold (0 = exactly at it, 0.5 = 50 % past it); for
fractions bounded by 1 (KV usage, the share of scrapes with a queue, running against its cap) the
margin is taken on the room left (1 - value), where a fixed step means more near the bound; for
ratios (per-token time against the baseline) on the rise above 1 (2.0x against a 1.5x threshold is
the rise doubled: +100 %).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from loadline.analysis.verdict.context import Context, Window
from loadline.analysis.verdict.signals import GaugeStats
from loadline.core.records import Status

MARGIN_CAP = 3.0  # "far past": beyond 3x the threshold the exact figure adds nothing
FULL_FLOOR = 0.5  # kv_full_level never calls a pool full below half (one request over half fills it)


@dataclass
class Check:
    text: str  # what was seen, with the numbers, e.g. "KV-cache usage p90 97 %"
    value: float | None  # None: not measured
    threshold: float
    above: bool = True  # the signal holds when value >= threshold (else value <= threshold)
    bounded: bool = False  # a 0-1 fraction: margin on the room left below 1
    required: bool = True  # unmeasured and required -> the rule cannot judge; else it caps confidence
    decisive: bool = False  # an event that settles it once seen (an OOM restart): held means far past
    origin: float = 0.0  # where the quantity means "nothing": 1 for ratios (a 1.0x rise is no rise)

    @property
    def measured(self) -> bool:
        return self.value is not None

    @property
    def held(self) -> bool:
        if self.value is None:
            return False
        return self.value >= self.threshold if self.above else self.value <= self.threshold

    @property
    def margin(self) -> float | None:
        if self.value is None:
            return None
        v, t = self.value, self.threshold
        if self.decisive:
            return MARGIN_CAP if self.held else -1.0
        if self.bounded:
            v, t = 1.0 - v, 1.0 - t  # room left: smaller is further past an "above" threshold
            ratio = _ratio(t, v) if self.above else _ratio(v, t)
        else:
            v, t = v - self.origin, t - self.origin  # a ratio's margin is on the rise, not on the ratio
            ratio = _ratio(v, t) if self.above else _ratio(t, v)
        return max(-1.0, min(MARGIN_CAP, ratio - 1.0))

    def line(self) -> str:
        """The signal, its measured value and its threshold (the margin is capped: it is not shown)."""
        if self.value is None:
            return f"{self.text}: not measured"
        return (
            f"{self.text}: measured {self.measured_text} (threshold {self.threshold_text}; "
            f"{'held' if self.held else 'not held'})"
        )

    @property
    def measured_text(self) -> str:
        return "not measured" if self.value is None else _fmt(self.value, self.bounded)

    @property
    def threshold_text(self) -> str:
        return f"{'>=' if self.above else '<='} {_fmt(self.threshold, self.bounded)}"


def _ratio(a: float, b: float) -> float:
    if b <= 0:
        return MARGIN_CAP + 1.0 if a > 0 else 1.0
    return a / b


def _fmt(x: float, fraction: bool) -> str:
    return f"{x * 100:.0f} %" if fraction else f"{x:.3g}"


@dataclass
class Reading:
    window: Window
    running: GaugeStats | None = None
    waiting: GaugeStats | None = None
    waiting_share: float | None = None
    kv: GaugeStats | None = None
    preemptions: float | None = None
    gpu: GaugeStats | None = None
    per_token_ms: float | None = None  # wall ms: the engine's mean ITL, else the client's TPOT p50
    per_token_source: str = ""
    # the KV usage at and above which the pool is full for this window's requests (read: kv_full_level)
    kv_full: float = 1.0
    kv_full_why: str = ""
    queue_ms: float | None = None  # wall ms, means of the engine's histograms
    prefill_ms: float | None = None
    server_ttft_ms: float | None = None
    saturation: list[str] = field(default_factory=list)

    def in_engine(self) -> float:
        return (self.running.mean if self.running else 0.0) + (self.waiting.mean if self.waiting else 0.0)


def read(ctx: Context, w: Window) -> Reading:
    s, th = ctx.signals, ctx.th
    r = Reading(w, s.gauge("running", w.start, w.end), s.gauge("waiting", w.start, w.end))
    series = s.gauge_series("waiting")
    inside = series[(series.index >= w.start) & (series.index <= w.end)]
    r.waiting_share = float((inside > 0).mean()) if len(inside) else None
    r.kv = s.gauge("kv_usage", w.start, w.end)
    r.preemptions = s.increase("preemptions", w.start, w.end)
    # room for one more request matters when one waits to be admitted or the engine evicted one
    pressed = bool(r.preemptions) or (r.waiting_share or 0.0) >= th.waiting_share
    r.kv_full, r.kv_full_why = kv_full_level(ctx, w) if pressed else (th.kv_pinned, "")
    r.gpu = s.gauge("gpu_util", w.start, w.end)
    itl = s.histogram("itl", w.start, w.end)
    if itl is not None and itl.count > 0 and itl.mean is not None:
        r.per_token_ms, r.per_token_source = itl.mean * 1000, "engine ITL mean"
    elif w.stat("tpot_p50_ms") is not None:
        r.per_token_ms, r.per_token_source = w.stat("tpot_p50_ms"), "client TPOT p50"
    for name, attr in (("queue_time", "queue_ms"), ("prefill_time", "prefill_ms"), ("ttft", "server_ttft_ms")):
        h = s.histogram(name, w.start, w.end)
        if h is not None and h.count > 0 and h.mean is not None:
            setattr(r, attr, h.mean * 1000)
    if r.waiting_share is not None and r.waiting_share >= th.waiting_share and r.waiting is not None:
        r.saturation.append(
            f"requests waiting at the engine in {r.waiting_share:.0%} of scrapes "
            f"(mean {r.waiting.mean:.1f}, max {r.waiting.max:.0f}) in {w.label}"
        )
    if kv_pinned(r) and r.preemptions and r.kv is not None:
        r.saturation.append(
            f"KV-cache pool pinned (p90 {r.kv.p90:.0%}, max {r.kv.max:.0%}{r.kv_full_why}) with "
            f"{r.preemptions:.0f} preemptions in {w.label}"
        )
    return r


def kv_full_level(ctx: Context, w: Window) -> tuple[float, str]:
    """The KV usage at which the pool is full for the window's requests, and why, when not the fixed level.

    Full is "pinned near 1.0" (DOMAIN.md rule 3, `kv_pinned`), or earlier: when the room left is less
    than one request of the window holds by its end (median prompt + reply tokens, as the engine counts
    them, less the prefix its cache already held), no further request can run to its end beside those
    running, and vLLM preempts one as the others grow (it preempts only when no block is free). Long
    requests in a small pool sit so below 90 %: 1,000-2,000-token chats in a 2,560-token pool are full
    above half. Needs the pool's size (vLLM's cache_config_info); without it the fixed level stands.
    """
    fixed = ctx.th.kv_pinned
    pool = ctx.signals.kv_pool_tokens()
    if pool is None:
        return fixed, ""
    rows = ctx.requests_in(w.start, w.end)
    if rows.empty or not {"prompt_tokens", "output_tokens"} <= set(rows.columns):
        return fixed, ""
    rows = rows[rows["status"] == Status.OK]  # a refused request held no KV; a finished one held it all
    sizes = pd.to_numeric(rows["prompt_tokens"], errors="coerce") + pd.to_numeric(
        rows["output_tokens"], errors="coerce"
    )
    if "cached_tokens" in rows.columns:  # a prefix the cache already held takes no new blocks
        sizes = sizes - pd.to_numeric(rows["cached_tokens"], errors="coerce").fillna(0.0)
    sizes = sizes[sizes > 0].dropna()
    if sizes.empty:
        return fixed, ""
    need = float(sizes.median())
    if need >= pool:  # no engine runs a request larger than its pool: these are not its numbers
        return fixed, ""
    # At most one such request fits when it needs over half the pool; it alone then holds >= half, so
    # "full above half" loses nothing and bounds what wrong numbers could do.
    level = max(1.0 - need / pool, FULL_FLOOR)
    if level >= fixed:
        return fixed, ""
    return level, (
        f"; full above {level * 100:.0f} %: a request holds {need:,.0f} tokens (median prompt + reply) "
        f"of the {pool:,}-token pool"
    )


def kv_pinned(r: Reading) -> bool:
    """Pinned near full most of the time, or exhausted: engines preempt only when the pool is, so
    preemptions with the pool seen at the full level count even if usage mostly sat just below it
    (it drops each time sequences leave)."""
    if r.kv is None:
        return False
    return r.kv.p90 >= r.kv_full or (bool(r.preemptions) and r.kv.max >= r.kv_full)


def kv_level(r: Reading) -> float | None:
    """The KV level the pinned test uses: p90, or the peak when the pool preempted."""
    if r.kv is None:
        return None
    return max(r.kv.p90, r.kv.max) if r.preemptions else r.kv.p90


def queue_share(r: Reading) -> tuple[float | None, float | None, str]:
    """The engine's queue time as a share of its time to first token, the queue time (ms), and how.

    From the engine's histograms when it has them (queue / TTFT, else queue / (queue + prefill));
    otherwise from Little's law on the waiting gauge: time in queue = mean waiting / completion
    rate, against the client's mean TTFT (the only engines without queue histograms, llama.cpp's
    server among them, still report how many requests wait).
    """
    if r.queue_ms is not None:
        q = r.queue_ms
        if r.server_ttft_ms:
            return (
                min(1.0, r.queue_ms / r.server_ttft_ms),
                r.queue_ms,
                f"queue {q:.0f} ms of the engine's TTFT {r.server_ttft_ms:.0f} ms",
            )
        if r.prefill_ms is not None and r.queue_ms + r.prefill_ms > 0:
            return (
                r.queue_ms / (r.queue_ms + r.prefill_ms),
                r.queue_ms,
                f"queue {q:.0f} ms vs prefill {r.prefill_ms:.0f} ms",
            )
    rps, ttft = r.window.stat("rps"), r.window.stat("ttft_mean_ms")
    if r.waiting is not None and rps and ttft:
        est = r.waiting.mean / rps * 1000
        return (
            min(1.0, est / ttft),
            est,
            (
                f"queue ~{est:.0f} ms (Little's law: {r.waiting.mean:.1f} waiting / "
                f"{rps:.1f} req/s) of TTFT {ttft:.0f} ms"
            ),
        )
    return None, None, "queue time not measured"
