"""Production traces: one typed model for the formats Loadline replays (docs/trace-replay.md).

Formats (every timestamp is a time since any origin; the replay starts at the first request):
- mooncake: JSONL, one request a line: `timestamp` (ms), `input_length`, `output_length` (tokens),
  `hash_ids` (the prompt's blocks of `block_tokens` tokens, 512 in Mooncake's traces: requests
  that share leading ids share those prefix tokens);
- bailian: JSONL of Alibaba's Qwen Bailian traces: `timestamp` (seconds), `input_length`,
  `output_length`, `hash_ids` (16-token blocks), `chat_id`, `parent_chat_id` (-1 for a
  conversation's first request) and `turn`: a request's session is its conversation's first chat
  (followed up the parent links), and its input length already holds the history;
- azure: CSV with `TIMESTAMP` (a date-time), `ContextTokens`, `GeneratedTokens`; no blocks (every
  prompt its own);
- burstgpt: CSV with `Timestamp` (seconds), `Request tokens`, `Response tokens` (BurstGPT's
  release; `Model`, `Total tokens`, `Log Type` are not replayed); no blocks;
- loadline: JSONL or CSV with `timestamp` (ms), `input_tokens`, `output_tokens` and optional
  `hash_ids` (JSON list, or space-separated in CSV), `session` (text) and `turn` (0, 1, ...) for
  multi-turn traces.
The CSV-like formats may also come as Parquet with the same columns.

This module is pure Python (workers may import it); CSV and Parquet files are read in
loadline/core/trace_files.py and come here as rows to validate. Validation is strict: the first
bad row is a UsageError naming its line, before anything starts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadline.core.errors import UsageError

FORMATS = ("mooncake", "bailian", "azure", "burstgpt", "loadline")
# tokens per hash_ids block, by format (azure and burstgpt name no blocks: the option's default only)
BLOCK_TOKENS = {"mooncake": 512, "bailian": 16, "azure": 512, "burstgpt": 512, "loadline": 512}
# the columns of each format: (timestamp, input, output)
FIELDS = {
    "mooncake": ("timestamp", "input_length", "output_length"),
    "bailian": ("timestamp", "input_length", "output_length"),
    "azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    "burstgpt": ("Timestamp", "Request tokens", "Response tokens"),
    "loadline": ("timestamp", "input_tokens", "output_tokens"),
}
# seconds per timestamp unit; azure's are date-times (None)
TIME_UNIT_S: dict[str, float | None] = {
    "mooncake": 0.001, "bailian": 1.0, "azure": None, "burstgpt": 1.0, "loadline": 0.001
}  # fmt: skip
Window = tuple[float, float | None]  # (start, end) seconds from the trace's first request; end None = to its end
MAX_REQUESTS = 5_000_000  # a replay holds its schedule in memory: bounds a mistaken multi-GB file


@dataclass(frozen=True, slots=True)
class TraceRequest:
    at_s: float  # seconds since the trace's first request
    input_tokens: int  # the whole prompt, in the target's tokens
    output_tokens: int  # the reply's length (sent as max_tokens, with ignore_eos/min_tokens)
    hash_ids: tuple[int, ...] = ()  # the prompt's blocks; () = a prompt shared with no one
    session: str = ""  # multi-turn traces: the conversation (a session stays on one worker)
    turn: int = 0
    index: int = 0  # position in the file (0-based), for matching what was sent to the trace


@dataclass(frozen=True)
class Trace:
    source: str  # the file, for messages
    format: str  # one of FORMATS
    block_tokens: int
    requests: tuple[TraceRequest, ...]

    @property
    def duration_s(self) -> float:
        return self.requests[-1].at_s if self.requests else 0.0


def block_reuse(requests: Iterable[TraceRequest], block_tokens: int) -> tuple[float | None, float | None]:
    """(blocks, tokens): the share of hash_ids blocks (and of their prompt tokens) already seen in an
    earlier request - what an unbounded prefix cache could serve. None without any block."""
    seen: set[int] = set()
    blocks = reused_blocks = 0
    tokens = reused_tokens = 0
    for r in requests:
        for position, h in enumerate(r.hash_ids):
            blocks += 1
            size = block_size_at(r, position, block_tokens)
            tokens += size
            if h in seen:
                reused_blocks += 1
                reused_tokens += size
            seen.add(h)
    if not blocks:
        return None, None
    return reused_blocks / blocks, reused_tokens / tokens if tokens else None


def block_size_at(r: TraceRequest, position: int, block_tokens: int) -> int:
    """Tokens of block `position` of a request: full blocks, the last one what is left."""
    return max(0, min(block_tokens, r.input_tokens - position * block_tokens))


# a checked row: (timestamp: ms, or azure's date-time; input, output, hash_ids, session, turn)
Row = tuple[Any, int, int, tuple[int, ...], str, int]
# (line, row with its timestamp in seconds)
Checked = tuple[int, tuple[float, int, int, tuple[int, ...], str, int]]


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def check_row(row: Mapping[str, object], fmt: str, line: int, source: str, block_tokens: int) -> Row:
    """(timestamp, input, output, hash_ids, session, turn) of one row, or a UsageError naming its line."""
    where = f"trace {source} line {line}"
    ts_key, in_key, out_key = FIELDS[fmt]
    for key in (ts_key, in_key, out_key):
        if key not in row or _missing(row[key]):
            raise UsageError(f"{where}: missing field {key!r} (a {fmt} trace has {', '.join(FIELDS[fmt])})")
    timestamp = row[ts_key] if fmt == "azure" else _number(row[ts_key], ts_key, where)
    n_in, n_out = _count(row[in_key], in_key, where), _count(row[out_key], out_key, where)
    if n_in < 1:
        raise UsageError(f"{where}: {in_key} must be >= 1 token (got {n_in})")
    hash_ids = _hash_ids(row.get("hash_ids"), where)
    if len(hash_ids) > -(-n_in // block_tokens):
        raise UsageError(
            f"{where}: {len(hash_ids)} hash_ids for {n_in} tokens: more blocks than {block_tokens}-token blocks "
            f"hold (--trace-block-tokens says the trace's block size)"
        )
    session = row.get("session")
    session = "" if session is None or (isinstance(session, float) and math.isnan(session)) else str(session)
    turn = row.get("turn")
    turn = 0 if turn is None or (isinstance(turn, float) and math.isnan(turn)) else _count(turn, "turn", where)
    return timestamp, n_in, n_out, hash_ids, session, turn


def build(source: str, fmt: str, block_tokens: int, rows: Iterable[Checked], window: Window | None = None) -> Trace:
    """A Trace from checked rows ((line, check_row's tuple), timestamps in seconds); the order checked.
    With a window (seconds from the first request, END None = to the end) only its requests are kept
    and the rows after it are not read: a week-long file's hour is replayed without holding the week."""
    requests: list[TraceRequest] = []
    first = previous = None
    start, end = window or (0.0, None)
    for position, (line, (seconds, n_in, n_out, hash_ids, session, turn)) in enumerate(rows):
        if previous is not None and seconds < previous:
            raise UsageError(
                f"trace {source} line {line}: timestamp goes backwards ({seconds * 1000:.6g} ms after "
                f"{previous * 1000:.6g} ms): a trace must be in time order"
            )
        if first is None:
            first = seconds
        previous = seconds
        at = seconds - first
        if end is not None and at >= end:
            break
        if at < start:
            continue
        requests.append(TraceRequest(at, n_in, n_out, hash_ids, session, turn, position))
        if len(requests) > MAX_REQUESTS:
            raise UsageError(f"trace {source}: more than {MAX_REQUESTS:,} requests; replay a window (--trace-window)")
    if not requests and first is not None and window is not None:
        raise UsageError(
            f"--trace-window {start:g}s..{'' if end is None else f'{end:g}s'} holds none of the trace's requests "
            f"(it spans 0..{(previous or 0.0) - first:.6g} s)"
        )
    if not requests:
        raise UsageError(f"trace {source} has no requests")
    return Trace(source, fmt, block_tokens, tuple(requests))


def read_jsonl(path: Path, fmt: str, block_tokens: int, window: Window | None = None) -> Trace:
    """A Mooncake, Bailian or Loadline JSONL trace, checked line by line (up to the window's end)."""
    return build(str(path), fmt, block_tokens, _jsonl_rows(path, fmt, block_tokens), window)


def _jsonl_rows(path: Path, fmt: str, block_tokens: int) -> Iterator[Checked]:
    roots: dict[object, object] = {}  # bailian: chat_id -> its conversation's first chat_id
    try:
        handle = path.open(encoding="utf-8-sig")  # a BOM is not part of line 1
    except OSError as exc:
        raise UsageError(f"trace {path} unreadable: {exc.strerror or exc}") from None
    with handle:
        try:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                except ValueError:
                    raise UsageError(f"trace {path} line {number}: not JSON (a truncated file?)") from None
                if not isinstance(item, dict):
                    raise UsageError(f"trace {path} line {number}: not a JSON object")
                if fmt == "bailian":
                    item["session"] = _conversation(item, roots)
                checked = check_row(item, fmt, number, str(path), block_tokens)
                yield number, (checked[0] * (TIME_UNIT_S[fmt] or 0.001), *checked[1:])
        except UnicodeDecodeError:
            raise UsageError(f"trace {path}: not UTF-8 text") from None


def _conversation(item: dict[str, object], roots: dict[object, object]) -> str:
    """A Bailian request's session: the root of its parent chain (a parent not seen: the parent itself)."""
    chat, parent = item.get("chat_id"), item.get("parent_chat_id")
    root = chat if parent in (None, -1, "-1") else roots.get(parent, parent)
    roots[chat] = root
    return "" if root is None else str(root)


def sniff_jsonl(path: Path) -> str:
    """mooncake, bailian or loadline, from the first object's keys."""
    try:
        with path.open(encoding="utf-8-sig") as handle:
            for line in handle:
                if line.strip():
                    try:
                        item = json.loads(line)
                    except ValueError:
                        raise UsageError(f"trace {path} line 1: not JSON") from None
                    keys = set(item) if isinstance(item, dict) else set()
                    if "input_length" in keys and "chat_id" in keys:
                        return "bailian"
                    if "input_length" in keys:
                        return "mooncake"
                    if "input_tokens" in keys:
                        return "loadline"
                    raise UsageError(
                        f"trace {path}: its first line has neither input_length (Mooncake) nor input_tokens "
                        "(Loadline); give --trace-format"
                    )
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"trace {path} unreadable: {exc}") from None
    raise UsageError(f"trace {path} has no requests")


def _number(value: object, key: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UsageError(f"{where}: {key} must be a number (got {value!r})")
    if value < 0:
        raise UsageError(f"{where}: {key} must be >= 0 (got {value!r})")
    return float(value)


def _count(value: object, key: str, where: str) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{where}: {key} must be a whole number of tokens (got {value!r})")
    if value < 0:
        raise UsageError(f"{where}: {key} must be >= 0 (got {value})")
    return value


def _hash_ids(value: object, where: str) -> tuple[int, ...]:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
        return ()
    if isinstance(value, str):  # CSV: space- (or comma-) separated
        try:
            value = [int(x) for x in value.replace(",", " ").split()]
        except ValueError:
            raise UsageError(f"{where}: hash_ids must be whole numbers (got {value[:40]!r})") from None
    if not isinstance(value, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in value):
        raise UsageError(f"{where}: hash_ids must be a list of whole numbers")
    if any(h < 0 for h in value):
        raise UsageError(f"{where}: hash_ids must be >= 0")
    return tuple(value)
