"""The measurement floor: how much the client side (sockets, event loop, stamping) adds to what it
measures, per phase. It is a property of the generator's machine, so it is measured on the wall
clock, from the run as recorded, and each figure is also given in model time by the one rule
(loadline.core.runsettings.model_value: a run compressed 20x multiplies the client's milliseconds
by 20 too).
- With the embedded simulator: records minus the truth log (the simulator's own arrival,
  first-token and last-token times, same machine, same wall clock). Exact per request.
- Against a real target there is no truth. We use the event-loop lag the generator's self-check
  sampled in the same process during the same phase (how late a `gevent.sleep` returned, which
  is how late a token arrival can be stamped). Why not the floor of TTFB or a cheap request:
  those include the network and the target's front end, which are part of what users get, not
  a measurement error; and a calibration request before the load cannot see the lag the load
  itself causes in the generator. The fastest TTFB is reported beside it, as the fixed cost of
  the path (network + front end + client), for reference.
The floor is material when it takes >= 1/4 of an SLO criterion's margin (|measured - limit|) or
of the verdict rules' noise floor (Thresholds.noise_floor_ms): the 4:1 test accuracy ratio of
metrology (ANSI/NCSL Z540.3; MIL-STD-45662A): an instrument should be at least four times finer
than the tolerance it judges.

Pure functions: run data in, the floor out (verdict.json["validity"]["floor"]).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from loadline.analysis.verdict.thresholds import Thresholds
from loadline.core.records import Status
from loadline.core.runsettings import model_value

ACCURACY_RATIO = 4.0  # test accuracy ratio 4:1 (module docstring)
FLOOR_QUANTILE = 95.0  # the floor quoted per phase: its P95, as the SLO judges P95s


def _phase_of(times: np.ndarray, phases: pd.DataFrame) -> np.ndarray:
    """Index (0..n-1) of the phase each wall time falls in, -1 when in none (phases sorted by start)."""
    starts = pd.to_numeric(phases["start_wall"], errors="coerce").to_numpy(dtype=float)
    ends = pd.to_numeric(phases["end_wall"], errors="coerce").to_numpy(dtype=float)
    ends = np.where(np.isnan(ends), np.inf, ends)
    if not len(starts):  # a run stopped before its first phase: generator samples but no phase
        return np.full(len(times), -1)
    pos = np.searchsorted(starts, times, side="right") - 1
    inside = (pos >= 0) & (times < ends[np.clip(pos, 0, None)])
    return np.where(inside, pos, -1)


def q(values: pd.Series | np.ndarray, q: float) -> float | None:
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    return float(np.percentile(values, q)) if values.size else None


def client_overhead(requests: pd.DataFrame, truth: pd.DataFrame) -> pd.DataFrame:
    """Per ok request: start_wall, ttft_overhead_ms, e2e_overhead_ms = client's time - the server's own."""
    ok = requests.loc[(requests["status"] == Status.OK).to_numpy(), ["request_id", "start_wall", "ttft_ms", "e2e_ms"]]
    served = truth[truth["first_token"].notna() & truth["arrival"].notna()]
    merged = ok.astype({"request_id": str}).merge(served, on="request_id", how="inner")
    return pd.DataFrame(
        {
            "start_wall": merged["start_wall"].astype(float),
            "ttft_overhead_ms": pd.to_numeric(merged["ttft_ms"], errors="coerce")
            - (merged["first_token"] - merged["arrival"]) * 1000,
            "e2e_overhead_ms": pd.to_numeric(merged["e2e_ms"], errors="coerce")
            - (merged["last_token"] - merged["arrival"]) * 1000,
        }
    )


def _floor_rows_truth(requests: pd.DataFrame, truth: pd.DataFrame, phases: pd.DataFrame, scale: float) -> list[dict]:
    over = client_overhead(requests, truth)
    where = _phase_of(over["start_wall"].to_numpy(dtype=float), phases) if len(over) else np.array([], dtype=int)
    rows = []
    for i, phase in enumerate(phases.itertuples(index=False)):
        mine = over[where == i]
        if mine.empty:
            continue
        # streaming runs: the TTFT overhead; non-streaming ones have only E2E
        column = "ttft_overhead_ms" if mine["ttft_overhead_ms"].notna().any() else "e2e_overhead_ms"
        p50, p95 = q(mine[column], 50), q(mine[column], FLOOR_QUANTILE)
        rows.append(
            {
                "phase": str(phase.label),
                "samples": int(mine[column].notna().sum()),
                "measure": column[:-12],
                "p50_ms": p50,
                "p95_ms": p95,
                "e2e_p95_ms": q(mine["e2e_overhead_ms"], FLOOR_QUANTILE),
                "floor_ms": p95,
                "floor_model_ms": None if p95 is None else model_value("floor_ms", p95, scale),
            }
        )
    return rows


def _floor_rows_loop_lag(generator: pd.DataFrame | None, phases: pd.DataFrame, scale: float) -> list[dict]:
    if generator is None or len(generator) == 0:
        return []
    ts = pd.to_numeric(generator["ts"], errors="coerce").to_numpy(dtype=float)
    lag = pd.to_numeric(generator["loop_lag_ms"], errors="coerce").to_numpy(dtype=float)
    where = _phase_of(ts, phases)
    rows = []
    for i, phase in enumerate(phases.itertuples(index=False)):
        mine = lag[where == i]
        p95 = q(mine, FLOOR_QUANTILE)
        if p95 is None:
            continue
        rows.append(
            {
                "phase": str(phase.label),
                "samples": int(np.sum(~np.isnan(mine))),
                "measure": "loop lag",
                "p50_ms": q(mine, 50),
                "p95_ms": p95,
                "floor_ms": p95,
                "floor_model_ms": model_value("floor_ms", p95, scale),
            }
        )
    return rows


def measurement_floor(
    requests: pd.DataFrame,
    phases: pd.DataFrame,
    scale: float,
    truth: pd.DataFrame | None,
    generator: pd.DataFrame | None,
) -> dict:
    """The floor per phase (wall and model ms) and how it was measured."""
    rows, method = [], None
    if truth is not None and len(truth) and len(requests):
        rows, method = _floor_rows_truth(requests, truth, phases, scale), "truth"
        why = (
            "records minus the embedded simulator's truth log (its own arrival and first/last-token "
            "times on the same clock): what sockets, event loop and stamping add, per request"
        )
    if not rows:
        rows, method = _floor_rows_loop_lag(generator, phases, scale), "loop-lag"
        why = (
            "no truth log (a real target): the event-loop lag the generator sampled during each phase, "
            "i.e. how late a token arrival can be stamped; the fastest TTFB, beside it, is the path's "
            "fixed cost (network, front end), part of what users get rather than a measurement error"
        )
    if method == "loop-lag" and rows and _mostly_kernel_clock(requests):
        why += (
            "; most arrivals here were stamped by the kernel (clock=kernel), which a late loop does not delay, "
            "so this is an upper bound"
        )
    if not rows:
        return {
            "method": None,
            "why": "neither a truth log nor generator samples: the floor is unknown",
            "phases": [],
            "floor_ms": None,
            "floor_model_ms": None,
            "time_scale": scale,
        }
    worst = max(rows, key=lambda r: r["floor_ms"])
    ttfb = pd.to_numeric(requests.get("ttfb_ms", pd.Series(dtype=float)), errors="coerce")
    ttfb = ttfb[requests["status"] == Status.OK] if len(requests) else ttfb
    fastest = float(ttfb.min()) if ttfb.notna().any() else None
    floors = [r["floor_ms"] for r in rows]
    return {
        "method": method,
        "why": why,
        "phases": rows,
        "time_scale": scale,
        "floor_ms": worst["floor_ms"],
        "floor_model_ms": model_value("floor_ms", worst["floor_ms"], scale),
        "worst_phase": worst["phase"],
        # the rules compare phases with a baseline: a floor that moves between phases moves their ratios
        "floor_spread_model_ms": model_value("floor_spread_ms", max(floors) - min(floors), scale),
        "ttfb_min_model_ms": None if fastest is None else model_value("ttfb_min_ms", fastest, scale),
    }


def _mostly_kernel_clock(requests: pd.DataFrame) -> bool:
    clock = requests.get("clock") if len(requests) else None
    return clock is not None and float((clock.astype(str) == "kernel").mean()) > 0.5


def floor_materiality(floor: dict, criteria: list[dict], noise_floor_ms: float = Thresholds.noise_floor_ms) -> dict:
    """Where the floor (model ms) takes >= 1/ACCURACY_RATIO of an SLO margin or of the rules' noise floor.

    Latency criteria in ms on TTFT or E2E only: the floor is measured on those. A failed criterion
    whose excess is within the floor `may_flip`: the failure may be the client's own."""
    by_phase = {
        r["phase"]: r["floor_model_ms"] for r in floor.get("phases") or [] if r.get("floor_model_ms") is not None
    }
    overall = floor.get("floor_model_ms")
    checks, reasons = [], []
    for c in criteria:
        name = str(c.get("name", ""))
        if c.get("unit") != "ms" or c.get("measured") is None or not name.upper().startswith(("TTFT", "E2E")):
            continue
        at = by_phase.get(str(c.get("where") or ""), overall)
        if at is None:
            continue
        margin = abs(float(c["measured"]) - float(c["limit"]))
        share = at / margin if margin > 0 else float("inf")
        flip = c.get("passed") is False and float(c["measured"]) - at < float(c["limit"])
        checks.append(
            {
                "criterion": name,
                "limit_ms": c["limit"],
                "measured_ms": c["measured"],
                "margin_ms": margin,
                "floor_model_ms": at,
                "share_of_margin": share,
                "may_flip": flip,
            }
        )
        if flip:
            reasons.append(
                f"{name} failed by {margin:,.0f} ms, within the client's own floor of {at:,.0f} ms "
                f"(model time) in {c.get('where') or 'the run'}: the failure may be the client's"
            )
        elif share >= 1 / ACCURACY_RATIO:
            reasons.append(
                f"the client's floor of {at:,.0f} ms (model time) is {share:.0%} of {name}'s margin "
                f"({c['measured']:,.0f} vs {c['limit']:,.0f} ms)"
            )
    spread = floor.get("floor_spread_model_ms")
    rules_share = (spread / noise_floor_ms) if spread is not None and noise_floor_ms > 0 else None
    if rules_share is not None and rules_share >= 1 / ACCURACY_RATIO:
        reasons.append(
            f"the client's floor moved by {spread:,.0f} ms (model time) between phases, "
            f"{rules_share:.0%} of the {noise_floor_ms:g} ms the verdict rules take as noise"
        )
    return {
        "material": bool(reasons),
        "reasons": reasons,
        "criteria": checks,
        "rules_noise_floor_ms": noise_floor_ms,
        "share_of_rules_noise_floor": rules_share,
    }
