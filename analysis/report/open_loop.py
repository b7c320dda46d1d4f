"""The report's open-loop section (analysis/stats/arrivals.py): one row per phase, shared by Markdown and HTML."""

from __future__ import annotations

from loadline.analysis.report import formatting as f

HEADER = [
    "phase",
    "target /s",
    "achieved /s",
    "lateness P50/P95/P99",
    "TTFT P95 sent / due",
    "E2E P95 sent / due",
    "sustained",
]
NOTE = (
    "Open loop: requests were sent on an arrival schedule. Lateness = due -> sent (the generator's delay, "
    "including waits for a free slot of `loadline run -- --max-inflight N`); 'due' latencies add it to what the server took: "
    "what a user would have felt. Rates and latencies in model time."
)


def rows(verdict: dict) -> list[list[str]]:
    section = verdict.get("open_loop") or {}
    out = []
    for p in section.get("phases") or []:
        out.append(
            [
                str(p["phase"]),
                f.num(p.get("target_rate")),
                f.num(p.get("achieved_rate")),
                " / ".join(f.ms(p.get(f"lateness_p{q}_ms")) for q in (50, 95, 99)),
                f"{f.ms(p.get('ttft_p95_ms'))} / {f.ms(p.get('ttft_from_due_p95_ms'))}",
                f"{f.ms(p.get('e2e_p95_ms'))} / {f.ms(p.get('e2e_from_due_p95_ms'))}",
                "yes" if p.get("sustained") else f"NO: {p.get('behind')}",
            ]
        )
    return out
