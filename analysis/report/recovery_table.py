"""The report's Recovery table (loadline.analysis.stats.recovery's entries as plain text cells)."""

from __future__ import annotations

from loadline.analysis.report import formatting as f

RECOVERY_HEADER = [
    "event",
    "phase",
    "clock starts",
    "baseline TTFT/E2E P95",
    "peak TTFT/E2E P95",
    "impact after",
    "recovered after",
    "back to baseline after",
    "failed (by class)",
    "faults",
]


def recovery_rows(entries: list[dict]) -> list[list[str]]:
    """The report's Recovery table (plain text cells; the renderers escape them)."""

    def pair(level: dict) -> str:
        return f"{f.num(level.get('ttft_p95_ms'))} / {f.num(level.get('e2e_p95_ms'))} ms"

    def seconds(value: float | None, none: str) -> str:
        return none if value is None else f"{f.num(value)} s"

    rows = []
    for e in entries:
        classes = ", ".join(f"{name} {n}" for name, n in e["errors_by_class"].items())
        rows.append(
            [
                e["event"],
                e["phase"],
                f"+{f.num(e['disturbance_at_s'])} s",
                pair(e["baseline"]) + (f" ({e['baseline']['phase']})" if e["baseline"].get("phase") else ""),
                pair(e["peak"]),
                seconds(e["impact_s"], "no impact"),
                seconds(e["recovery_s"], "not within the phase")
                + (f" (then {f.num(e['relapse_s'])} s unhealthy)" if e.get("relapse_s") else ""),
                seconds(e.get("baseline_recovery_s"), "not within the phase"),
                f"{e['failed']:,}" + (f" ({classes})" if classes else ""),
                "; ".join(e["faults"]) or "-",
            ]
        )
    return rows


RECOVERY_NOTE = (
    "Model time. Windows of {window} s by request start (failures by when they ended); healthy = no more errors than the "
    "baseline and rolling P95 TTFT/E2E within 1.5x the baseline or under the SLO; recovered = "
    "healthy for {hold} s in a row after the first unhealthy window, counted from the clock start "
    "(the surge, or the last fault action sent); back to baseline = the same without the SLO allowance."
)
