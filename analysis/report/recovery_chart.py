"""The Recovery section's chart: rolling P95 TTFT and E2E after each surge or fault, with the
"back to normal" limits, the windows' failures, and where recovery was called (loadline.analysis.stats.recovery)."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

MAX_PANELS = 4  # a pulse run with many bursts: the first few tell the story


def recovery_chart(entries: list[dict], path: Path) -> Path | None:
    """One panel per event (model time from the clock start); None when there is nothing to draw."""
    entries = [e for e in entries if e.get("windows")][:MAX_PANELS]
    if not entries:
        return None
    fig, axes = plt.subplots(len(entries), 1, figsize=(10, 3.4 * len(entries)), squeeze=False)
    for ax, entry in zip(axes[:, 0], entries):
        windows = entry["windows"]
        t = [w["t_s"] for w in windows]
        for key, name, color in (("ttft_p95_ms", "TTFT", "tab:blue"), ("e2e_p95_ms", "E2E", "tab:orange")):
            ax.plot(t, [w[key] for w in windows], color=color, label=f"{name} P95 (rolling)")
            limit = entry["limits"].get(key)
            if limit is not None and not math.isnan(limit):  # NaN: that metric is not judged
                ax.axhline(limit, color=color, linestyle="--", linewidth=1, label=f"{name} back-to-normal limit")
        if entry.get("recovery_s") is not None:
            ax.axvline(
                entry["recovery_s"], color="tab:green", linewidth=1.5, label=f"recovered ({entry['recovery_s']:g} s)"
            )
        ax.set(title=f"{entry['event']} - {entry['phase']}", xlabel="model seconds since the clock start", ylabel="ms")
        errors = [w["errors"] for w in windows]
        if any(errors):
            twin = ax.twinx()
            twin.bar(t, errors, width=entry["window_s"], align="edge", color="tab:red", alpha=0.35, label="failed")
            twin.set_ylabel("failed requests per window")
            twin.legend(fontsize=8, loc="upper center")
        ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
