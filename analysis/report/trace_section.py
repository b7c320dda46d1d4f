"""The report's trace-replay section (analysis/stats/trace_replay.py), shared by Markdown and HTML."""

from __future__ import annotations

from loadline.analysis.report import formatting as f

SUMMARY_HEADER = ["measure", "trace / asked", "replayed / got"]
RATE_HEADER = ["from (s)", "trace /min", "offered /min", "sent /min"]
NOTE = (
    "Trace replay: each request sent at its time in the trace (/ --trace-speed, surges laid on top), with its "
    "input and output lengths; prompts that share hash_ids blocks share those prefix tokens. Trace reuse = "
    "the share of blocks (and of their tokens) seen in an earlier request: what an unbounded prefix cache "
    "could serve; the engine's hit rate counts tokens. Times and lateness in model time."
)


def summary_rows(verdict: dict) -> list[list[str]]:
    t = verdict.get("trace") or {}
    if not t:
        return []
    rates = t.get("rates") or {}
    lateness = " / ".join(f.ms(t.get(f"lateness_p{q}_ms")) for q in (50, 95, 99))
    return [
        ["requests", f.num(t.get("scheduled")), f"{f.num(t.get('sent'))} sent, {f.num(t.get('unsent'))} never sent"],
        [
            "seconds sending what was scheduled",
            f.num(rates.get("seconds")),
            f"{f.num(rates.get('seconds_matching'))} (largest gap {f.num(rates.get('max_second_diff'))} requests)",
        ],
        ["lateness P50 / P95 / P99 (max)", "-", f"{lateness} ({f.ms(t.get('lateness_max_ms'))})"],
        [
            "input tokens mean (exact)",
            f.num(t.get("input_asked_mean")),
            f"{f.num(t.get('input_got_mean'))} ({f.pct(t.get('input_exact'))})",
        ],
        [
            "output tokens mean (exact)",
            f.num(t.get("output_asked_mean")),
            f"{f.num(t.get('output_got_mean'))} ({f.pct(t.get('output_exact'))})",
        ],
        [
            "prefix cache: trace reuse (blocks / tokens) vs engine hit rate",
            f"{f.pct(t.get('trace_block_reuse'))} / {f.pct(t.get('trace_token_reuse'))}",
            f"{f.pct(t.get('engine_hit_rate'))}"
            + (f" (truth log {f.pct(t.get('truth_hit_rate'))})" if t.get("truth_hit_rate") is not None else ""),
        ],
        ["sustained", "-", "yes" if t.get("sustained") else "NO: " + "; ".join(t.get("notes") or [])],
    ]


def rate_rows(verdict: dict) -> list[list[str]]:
    rates = (verdict.get("trace") or {}).get("rates") or {}
    return [
        [f.num(b["from_s"]), f.num(b["trace_per_min"]), f.num(b["scheduled_per_min"]), f.num(b["sent_per_min"])]
        for b in rates.get("bins") or []
    ]
