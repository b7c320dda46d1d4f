"""Per phase, the lengths asked for beside the lengths the server counted: is the workload the one planned?

Over the ok requests of each phase that carry what was asked (`prompt_tokens_requested`,
`output_tokens_requested`; folders from before those columns have none and give an empty table):
medians of asked and got for the prompt (the server's `usage.prompt_tokens`) and the reply
(`output_tokens`), the share of requests whose prompt and reply came out exactly as asked, and how
the prompts were counted (`token_counter`).
"""

from __future__ import annotations

import pandas as pd

from loadline.analysis.data.load import RunData
from loadline.analysis.stats.phases import assign_phases
from loadline.core.records import Status

LENGTH_COLUMNS = (
    "phase_index",
    "label",
    "requests",
    "counter",
    "prompt_asked_p50",
    "prompt_got_p50",
    "prompt_exact_share",
    "reply_asked_p50",
    "reply_got_p50",
    "reply_exact_share",
)


_LENGTH_INPUTS = [
    "token_counter",
    "prompt_tokens_requested",
    "prompt_tokens",
    "output_tokens_requested",
    "output_tokens",
]


def _share_equal(asked: pd.Series, got: pd.Series) -> float:
    both = asked.notna() & got.notna()
    return float((asked[both] == got[both]).mean()) if both.any() else float("nan")


def _median(values: pd.Series) -> float:
    values = values.dropna()
    return float(values.median()) if len(values) else float("nan")


def length_table(run: RunData) -> pd.DataFrame:
    """One row per phase with LENGTH_COLUMNS; empty when no record says what it asked for."""
    requests = run.requests
    if (
        not run.has_records
        or "prompt_tokens_requested" not in requests
        or requests["prompt_tokens_requested"].isna().all()
        and requests["output_tokens_requested"].isna().all()
    ):
        return pd.DataFrame(columns=list(LENGTH_COLUMNS))
    where = assign_phases(run)
    is_ok = (requests["status"] == Status.OK).to_numpy()
    inputs = [c for c in _LENGTH_INPUTS if c in requests.columns]
    rows = []
    for position in range(len(run.phases)):
        ok = requests.loc[(where == position) & is_ok, inputs]  # the columns read, not a whole-width copy
        counters = sorted(c for c in ok["token_counter"].astype(str).unique() if c)
        prompt_asked, prompt_got = ok["prompt_tokens_requested"], ok["prompt_tokens"]
        reply_asked, reply_got = ok["output_tokens_requested"], ok["output_tokens"].astype(float)
        rows.append(
            {
                "phase_index": position,
                "label": run.phases.iloc[position]["label"],
                "requests": len(ok),
                "counter": "+".join(counters),
                "prompt_asked_p50": _median(prompt_asked),
                "prompt_got_p50": _median(prompt_got),
                "prompt_exact_share": _share_equal(prompt_asked, prompt_got),
                "reply_asked_p50": _median(reply_asked),
                "reply_got_p50": _median(reply_got[reply_asked.notna()]),
                "reply_exact_share": _share_equal(reply_asked, reply_got),
            }
        )
    return pd.DataFrame(rows, columns=list(LENGTH_COLUMNS))
