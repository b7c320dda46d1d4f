"""The KV cache as a pool of fixed-size blocks, with optional prefix caching.

Only counts are tracked, not block ids: a sequence holds `private` blocks (its own) and references
to shared, hashed prompt blocks (prefix caching). A hashed block whose last user finished stays
cached but evictable (LRU) until a new allocation needs the room, as in vLLM's block pool.
Leaked blocks (the memory-leak fault) are taken out of the pool and never come back until the
replica restarts.
"""

from __future__ import annotations

from collections import OrderedDict


def blocks_for(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


def prefix_hashes(tokens: list[str], block_size: int) -> list[int]:
    """Chained hashes of the full blocks of a prompt: equal hashes mean equal prefixes."""
    hashes: list[int] = []
    previous = 0
    for start in range(0, len(tokens) - block_size + 1, block_size):
        previous = hash((previous, tuple(tokens[start : start + block_size])))
        hashes.append(previous)
    return hashes


class BlockPool:
    def __init__(self, num_blocks: int, prefix_caching: bool) -> None:
        self.total = num_blocks
        self.prefix_caching = prefix_caching
        self.private_used = 0
        self.leaked = 0
        self.shared_refs: dict[int, int] = {}  # hash -> users (> 0)
        self.evictable: OrderedDict[int, None] = OrderedDict()  # cached hashes nobody uses, LRU first

    @property
    def in_use(self) -> int:
        return self.private_used + len(self.shared_refs)

    @property
    def free(self) -> int:
        return self.total - self.leaked - self.in_use - len(self.evictable)

    def usage(self) -> float:
        """Fraction of the pool unavailable to new work (leaked blocks included: that is the symptom)."""
        return (self.in_use + self.leaked) / self.total

    def _make_room(self, n: int) -> bool:
        if n > self.free + len(self.evictable):
            return False
        while self.free < n:
            self.evictable.popitem(last=False)
        return True

    def allocate(self, n: int) -> bool:
        if n <= 0:
            return True
        if not self._make_room(n):
            return False
        self.private_used += n
        return True

    def release(self, private: int, shared: list[int]) -> None:
        self.private_used -= private
        for h in shared:
            users = self.shared_refs[h] - 1
            if users:
                self.shared_refs[h] = users
            else:
                del self.shared_refs[h]
                self.evictable[h] = None

    def acquire_prefix(self, hashes: list[int]) -> list[int]:
        """Take references on the longest cached prefix; returns the hashes now held."""
        if not self.prefix_caching:
            return []
        held: list[int] = []
        for h in hashes:
            if h in self.shared_refs:
                self.shared_refs[h] += 1
            elif h in self.evictable:
                del self.evictable[h]
                self.shared_refs[h] = 1
            else:
                break
            held.append(h)
        return held

    def publish(self, hashes: list[int]) -> list[int]:
        """Turn a sequence's private prompt blocks into cached ones; returns the hashes published."""
        if not self.prefix_caching:
            return []
        published = []
        for h in hashes:
            if h in self.shared_refs or h in self.evictable:
                continue  # another sequence computed the same block first; ours stays private
            self.shared_refs[h] = 1
            self.private_used -= 1
            published.append(h)
        return published

    def leak(self, n: int) -> bool:
        """Lose n blocks; False when there is no memory left to lose (the replica runs out: OOM)."""
        if not self._make_room(n):
            return False
        self.leaked += n
        return True
