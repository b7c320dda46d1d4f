"""Synthetic Mooncake-format traces with known block reuse, for tests, benchmarks and demos.

Conversations arrive as a Poisson process; each turn's prompt is one of a few shared system prompts
(its leading blocks), the conversation so far, and new blocks; later turns follow after a think
time. So the trace has what the prefix cache feeds on: system prompts shared by everyone, histories
shared by a conversation's turns; and what it cannot: each turn's new text.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

BLOCK = 512


def mooncake_rows(
    requests: int,
    rate: float,
    seed: int = 1,
    system_prompts: int = 4,
    system_blocks: tuple[int, int] = (1, 3),
    new_blocks: tuple[int, int] = (1, 3),
    turns: tuple[int, int] = (1, 4),
    output: tuple[int, int] = (16, 128),
    think_s: float = 5.0,
) -> list[dict[str, Any]]:
    """`requests` rows at about `rate` requests/s (timestamps in ms, in time order)."""
    rng = random.Random(seed)
    next_id = 0

    def fresh(n: int) -> list[int]:
        nonlocal next_id
        ids = list(range(next_id, next_id + n))
        next_id += n
        return ids

    systems = [fresh(rng.randint(*system_blocks)) for _ in range(system_prompts)]
    rows: list[tuple[float, dict[str, Any]]] = []
    t = 0.0
    mean_turns = sum(turns) / 2
    while len(rows) < requests:
        t += rng.expovariate(rate / mean_turns)
        history = list(rng.choice(systems))
        at = t
        for _ in range(rng.randint(*turns)):
            history += fresh(rng.randint(*new_blocks))
            # the last block is rarely full, and its hash is its own: completed in the next turn, its
            # text (so its hash) differs, as in Mooncake's traces
            ids = history + fresh(1)
            length = len(history) * BLOCK + rng.randint(1, BLOCK)
            rows.append((at, {"input_length": length, "output_length": rng.randint(*output), "hash_ids": ids}))
            at += rng.expovariate(1 / think_s)
    rows.sort(key=lambda row: row[0])
    return [{"timestamp": round(at * 1000), **row} for at, row in rows[:requests]]


def write_mooncake(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path
