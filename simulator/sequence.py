"""One request inside an engine: its token counts, KV blocks, timestamps and where its tokens go."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


class Sink(Protocol):
    """Receives a sequence's progress; the HTTP layer implements it (one socket write per call)."""

    def deliver(self, seq: Sequence) -> None: ...


@dataclass(slots=True, eq=False)
class Sequence:
    request_id: str
    prompt_len: int
    output_target: int  # tokens to generate before finishing
    finish_reason_target: str  # "stop" or "length", reported when output_target is reached
    sink: Sink
    hashes: list[int] = field(default_factory=list)  # prefix-cache hashes of full prompt blocks
    fault_at: int | None = None  # fail after this many tokens (error-rate fault)
    replica: int = 0
    # vLLM's bookkeeping: num_tokens = prompt + output so far; num_computed = tokens with KV in cache
    num_tokens: int = 0
    num_computed: int = 0
    generated: int = 0
    private_blocks: int = 0
    shared: list[int] = field(default_factory=list)
    preempted: int = 0
    published: bool = False  # prompt blocks offered to the prefix cache since the last (re)compute
    # monotonic instants (loop.time()) for metrics; wall clock is taken by the sink when writing
    arrival_m: float = 0.0
    queued_m: float = 0.0
    scheduled_m: float | None = None
    first_m: float | None = None
    last_m: float = 0.0  # the last token's instant; read only after the first token set it
    queue_start_wall: float | None = None
    queue_end_wall: float | None = None
    finish_reason: str | None = None  # set when done: stop | length | abort | error
    error: str | None = None  # set when failed by a fault
    error_outcome: str = "fault"  # the truth log's outcome when failed: fault, or error (shutdown)
    done: bool = False
    cached_tokens: int | None = (
        None  # prompt tokens the prefix cache served when first scheduled (vLLM's num_cached_tokens)
    )

    def __post_init__(self) -> None:
        self.num_tokens = self.prompt_len

    @property
    def blocks_held(self) -> int:
        return self.private_blocks + len(self.shared)
