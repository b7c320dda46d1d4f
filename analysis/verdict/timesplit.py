"""Where does the time go? Per phase, the client's TTFT and E2E split into what the engine says it spent.

The engine's own histograms (analysis/data/metric_names.py maps the engines' names) give, for
the requests it finished in a window, the mean queue, prefill, decode, TTFT and E2E time. The client
records give the mean TTFT and E2E the user saw. Means, not percentiles: means add up (client TTFT =
outside + queue + prefill + the engine's other front-end time), percentiles do not, and a histogram's
mean (`_sum` / `_count`) is exact where its quantiles are only bucket interpolations.

- outside the engine = client mean - engine mean: network, gateway, auth, the client itself.
- engine TTFT = queue + prefill + other (tokenising, scheduling, detokenising the first token).
- TGI has no TTFT histogram: queue + prefill stands for it. SGLang has no prefill histogram:
  prefill is its TTFT minus its queue time (prefill and the rest of the engine's share).
It reads the run in model time (loadline.analysis.data.timescale.model_run): every time in the result is model time.

`outside-engine` is called when the outside share of the client's TTFT (E2E for non-streaming runs)
is at least half, and it is larger than the rules' noise floor once the client's own measurement floor
(analysis/verdict/validity.py) is taken off: a slow proxy, not a slow client.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from loadline.analysis.verdict.signals import Signals
from loadline.analysis.verdict.thresholds import Thresholds
from loadline.core.records import Status

OUTSIDE_DOMINATES = 0.5  # the outside share is the largest part: more than every engine part together
PARTS = ("queue", "prefill", "decode")
_CONCEPTS = {"ttft": "ttft", "e2e": "e2e", "queue": "queue_time", "prefill": "prefill_time", "decode": "decode_time"}


def _mean(values: pd.Series) -> float | None:
    values = pd.to_numeric(values, errors="coerce").dropna()
    return float(values.mean()) if len(values) else None


def _engine_means(signals: Signals, start: float, end: float) -> tuple[dict[str, float | None], float]:
    """Engine means in seconds (None when not exposed or nothing observed) and the requests it finished."""
    out: dict[str, float | None] = {}
    finished = 0.0
    for key, concept in _CONCEPTS.items():
        stats = signals.histogram(concept, start, end) if signals.has(concept) else None
        out[key] = stats.mean if stats is not None and stats.count > 0 else None
        if key in ("e2e", "ttft") and stats is not None:
            finished = max(finished, stats.count)
    if out["ttft"] is None and out["queue"] is not None and out["prefill"] is not None:
        out["ttft"] = out["queue"] + out["prefill"]  # TGI: queue + prefill forward is the proxy
    if out["prefill"] is None and out["ttft"] is not None and out["queue"] is not None:
        out["prefill"] = max(0.0, out["ttft"] - out["queue"])  # SGLang: no prefill histogram
    return out, finished


def _split(
    client_ms: float | None, engine_s: dict[str, float | None], total: str, parts: tuple[str, ...]
) -> dict | None:
    """client mean -> outside + parts + other (model ms), with shares of the client's mean."""
    engine = engine_s.get(total)
    if client_ms is None or engine is None:
        return None
    client = client_ms
    outside = client - engine * 1000
    values: dict[str, float | None] = {"client_ms": client, "engine_ms": engine * 1000, "outside_ms": outside}
    known = 0.0
    for part in parts:
        value = engine_s.get(part)
        values[f"{part}_ms"] = None if value is None else value * 1000
        known += value or 0.0
    values["engine_other_ms"] = (engine - known) * 1000 if any(engine_s.get(p) is not None for p in parts) else None
    values["outside_share"] = outside / client if client > 0 else None
    return values


def _scrape_window(signals: Signals, start: float, end: float) -> tuple[float, float] | None:
    """(t_a, t_b]: the observations a histogram delta over [start, end] really holds.

    Signals.histogram subtracts the last scrape at or before `start` (else the first one inside)
    from the last scrape at or before `end`: with a scrape every few seconds that can be much
    narrower than the phase, so the client records are matched to the same (t_a, t_b]."""
    stamps = [signals.samples(c)["ts"] for c in _CONCEPTS.values() if signals.has(c)]
    ts = np.unique(np.concatenate([s.to_numpy(dtype=float) for s in stamps])) if stamps else np.array([])
    ts = ts[ts <= end]
    if ts.size == 0:
        return None
    before = ts[ts <= start]
    t_a = float(before.max()) if before.size else float(ts.min())
    t_b = float(ts.max())
    return (t_a, t_b) if t_b > t_a else None


def phase_split(requests: pd.DataFrame, signals: Signals, start: float, end: float) -> dict:
    """One window's split: {"ttft": {...} | None, "e2e": {...} | None, client/engine counts}.

    The client side is the ok records the engine observed in the same scrape window: TTFT by the
    moment of their first token, E2E by their end (the engine records each histogram then)."""
    window = _scrape_window(signals, start, end)
    read = [c for c in ("start_wall", "ttft_ms", "e2e_ms") if c in requests.columns]  # not a whole-width copy
    ok = requests.loc[(requests["status"] == Status.OK).to_numpy(), read] if len(requests) else requests
    if window is None or ok.empty:
        return {"client_requests": 0, "engine_requests": 0.0, "ttft": None, "e2e": None}
    t_a, t_b = window
    begin = pd.to_numeric(ok["start_wall"], errors="coerce")
    first = begin + pd.to_numeric(ok["ttft_ms"], errors="coerce") / 1000
    last = begin + pd.to_numeric(ok["e2e_ms"], errors="coerce") / 1000
    ttft_rows = ok[(first > t_a) & (first <= t_b)]
    e2e_rows = ok[(last > t_a) & (last <= t_b)]
    engine, finished = _engine_means(signals, start, end)
    ttft = _split(_mean(ttft_rows["ttft_ms"]), engine, "ttft", ("queue", "prefill"))
    e2e = _split(_mean(e2e_rows["e2e_ms"]), engine, "e2e", PARTS)
    return {
        "client_requests": int(len(e2e_rows)),
        "engine_requests": float(finished),
        "ttft": ttft,
        "e2e": e2e,
        "window": [t_a, t_b],
    }


def time_split(
    requests: pd.DataFrame,
    phases: pd.DataFrame,
    server_metrics: pd.DataFrame | None,
    floor_model_ms: float | None = None,
    noise_floor_ms: float = Thresholds.noise_floor_ms,
) -> dict:
    """verdict.json["time_split"]: per phase and over the whole run, plus the outside-engine call.

    `floor_model_ms`: the client's own measurement floor (validity), part of the outside share that
    is not the path to the engine; `noise_floor_ms` (model time): a gap smaller than this is noise.
    """
    signals = Signals(server_metrics)
    present = [k for k, c in _CONCEPTS.items() if signals.has(c)]
    if not present:
        return {
            "available": False,
            "why": "the engine's latency histograms were not scraped (`loadline run -- --scrape-url URL`)",
            "phases": [],
            "run": None,
            "dominant": None,
            "sentence": "",
        }
    rows = []
    for phase in phases.itertuples(index=False):
        start, end = float(phase.start_wall), float(phase.end_wall)
        if np.isnan(start) or np.isnan(end):
            continue
        split = phase_split(requests, signals, start, end)
        if split["client_requests"]:
            rows.append({"phase": str(phase.label), **split})
    starts = pd.to_numeric(phases["start_wall"], errors="coerce")
    ends = pd.to_numeric(phases["end_wall"], errors="coerce")
    # the whole run ends with its last phase, like every phase: requests still in flight then (the
    # ones the client cancels at the stop) are on neither side; an open end let the engine's side
    # count the cancelled requests it went on to finish while the client's side had no row for them
    whole = phase_split(requests, signals, float(starts.min()), float(ends.max())) if len(phases) else None
    dominant, sentence = _dominant(whole, floor_model_ms or 0.0, noise_floor_ms)
    return {
        "available": True,
        "concepts": present,
        "phases": rows,
        "run": whole,
        "dominant": dominant,
        "sentence": sentence,
        "caveat": negative_caveat(rows, whole),
        "method": "means of the engine's own histograms (_sum/_count) against the client records' means, "
        "same window, model time",
    }


def negative_caveat(rows: list[dict], whole: dict | None) -> str:
    """An outside share below zero is the comparison's limit, not time: said with its size and where."""
    seen = [
        (str(label), split[metric]["outside_ms"])
        for label, split in [*((r["phase"], r) for r in rows), *([("whole run", whole)] if whole else [])]
        for metric in ("ttft", "e2e")
        if split.get(metric) and split[metric]["outside_ms"] < 0
    ]
    if not seen:
        return ""
    worst = min(value for _, value in seen)
    where = ", ".join(dict.fromkeys(label for label, _ in seen))
    return (
        f"outside the engine reads below zero in {where} (down to {worst:,.0f} ms, model time): the engine's "
        "histogram means and the client's records cover slightly different requests (the histograms are read "
        "at scrapes, the records at their own times), so a gap that small is about zero, not time"
    )


def _dominant(whole: dict | None, floor_ms: float, noise_floor_ms: float) -> tuple[str | None, str]:
    if not whole:
        return None, ""
    metric = "ttft" if whole.get("ttft") else "e2e" if whole.get("e2e") else None
    if metric is None:
        return None, ""
    split = whole[metric]
    outside, client = split["outside_ms"], split["client_ms"]
    beyond_floor = outside - floor_ms
    name = metric.upper()
    gap = (
        f"{outside:,.0f} ms ({split['outside_share']:.0%}) outside the engine"
        if outside >= 0
        else f"about 0 ms outside the engine (measured {outside:,.0f} ms: within the comparison's error)"
    )
    numbers = f"client {name} mean {client:,.0f} ms vs the engine's own {split['engine_ms']:,.0f} ms: {gap}"
    if (split["outside_share"] or 0) >= OUTSIDE_DOMINATES and beyond_floor >= noise_floor_ms:
        floor_note = f", of which the client's own measurement floor is {floor_ms:,.0f} ms" if floor_ms else ""
        return "outside-engine", (
            f"outside-engine: {numbers}{floor_note} (network, gateway, proxy, auth); "
            "time each hop between the client and the engine"
        )
    if (split["outside_share"] or 0) >= OUTSIDE_DOMINATES:
        return "client-floor", (
            f"{numbers}, but the client's own measurement floor is {floor_ms:,.0f} ms of it: "
            "the gap is the load generator's, not the path's (lower --time-scale or add workers)"
        )
    biggest = max(
        ((p, split.get(f"{p}_ms") or 0.0) for p in ("queue", "prefill", "decode") if f"{p}_ms" in split),
        key=lambda item: item[1],
        default=(None, 0.0),
    )
    if biggest[0] is None:
        return None, numbers
    return biggest[0], f"{numbers}; the largest engine part is {biggest[0]} ({biggest[1]:,.0f} ms)"
