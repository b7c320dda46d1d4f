"""Failures that a drill's own fault caused are the drill's result, not a capacity limit.

A drill kills a replica (or injects another fault) during live traffic; the streams in flight on it
fail, and the error-rate criterion fails with them. With no layer showing a limit, the bottleneck
verdict is `unidentified` and its action was to read the server's log for the aborted requests,
though the run itself sent the fault. When every failed request of the run ended after a fault
action that went through, within that fault's phase (the recovery events, analysis/stats/recovery.py),
the verdict says so and points at the recovery, which is how a drill is judged (DOMAIN.md: bursts
and faults test recovery).
"""

from __future__ import annotations


def explain_by_faults(bottleneck: dict, recovered: list[dict], failed: int) -> dict:
    """`bottleneck` with the faults named when they account for all `failed` requests of the run;
    unchanged when it names a layer, when nothing failed, or when some failures came elsewhere."""
    if bottleneck.get("layer") != "unidentified" or failed <= 0:
        return bottleneck
    events = [e for e in recovered or [] if e.get("faults") and e.get("failed")]
    if sum(int(e["failed"]) for e in events) < failed:
        return bottleneck
    parts = []
    for e in events:
        came = f"recovered after {e['recovery_s']:g} s" if e.get("recovered") else "did not recover in the phase"
        parts.append(f"{e['failed']:,} after {'; '.join(e['faults'])} in {e['phase']} ({came})")
    line = (
        f"every failed request ({failed:,}) ended after a fault the run injected: "
        + "; ".join(parts)
        + ": the drill's fault, not a capacity limit"
    )
    action = "judge the drill by its recovery (the Recovery section; recovery_s_max in the SLO file gates it)"
    out = dict(bottleneck)
    out["evidence"] = [*bottleneck.get("evidence", [])[:1], line, *bottleneck.get("evidence", [])[1:]]
    out["actions"] = [action, *bottleneck.get("actions", [])]
    out["sentence"] = f"A limit was reached: the failures came with the fault the run injected; {action}."
    return out
