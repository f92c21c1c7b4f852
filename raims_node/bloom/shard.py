"""Shardcast: which shard of the subject space a subject falls in.

Manual "Anycast and Shardcast": "If A subscribes to X.* using shard 1/2 and B subscribes
to X.* using shard 2/2, then the subjects X.Y and X.Z is split between A and B based on the
hash of X.Y and the hash of X.Z." The manual leaves the split open; raims uses the full
subject hash h (the one in the frame header) and numbers shards from 1 as the manual does:

    shard_of(h, n) = ((h * n) >> 32) + 1

so shard k of n owns the hash range [ceil((k-1) * 2**32 / n), ceil(k * 2**32 / n)): the
shards of one n partition the 32-bit space exactly, and shard k of n is the union of
shards 2k-1 and 2k of 2n (growing the shard count splits shards, never reshuffles them).
"""

from dataclasses import dataclass
from typing import Final

from raims_node.bloom.errors import InvalidShard

MAX_SHARDS: Final = 1 << 16


def shard_of(subject_hash: int, count: int) -> int:
    return ((subject_hash * count) >> 32) + 1


@dataclass(frozen=True, slots=True)
class Shard:
    """Shard `index` of `count` (1 <= index <= count <= MAX_SHARDS)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.count <= MAX_SHARDS:
            raise InvalidShard(f"shard count {self.count} is outside 1..{MAX_SHARDS}")
        if not 1 <= self.index <= self.count:
            raise InvalidShard(f"shard {self.index} is outside 1..{self.count}")

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, subject_hash: int) -> bool:
        return shard_of(subject_hash, self.count) == self.index
