"""Subscription bloom filters: the per-peer interest that routing tests each subject
against, with prefix hashes for wildcards, suffix and shard detail, resize, reseed,
serialization for the link-state database, union of local filters and matching one
subject against many filters.

Seed sections: manual "Networking" (about 2 bytes a subscription), "Wildcard Matching",
"Anycast and Shardcast", "_Z.BLM" (resize thresholds 31, 62, 124, ...), console "show
blooms" and "reseed". The exact hashing and bit layout, which the Spark audit
reproduces, are documented in `hashing.py` (subject hash set), `positions.py` (hash to
bit positions, with the numpy kernel `bit_positions`), `shard.py` and `codec.py` (bytes).
"""

from raims_node.bloom.codec import DetailRecord, FilterImage, decode_image, encode_image
from raims_node.bloom.entry import FULL, Detail
from raims_node.bloom.errors import (
    BloomDecodeError,
    BloomError,
    GeometryMismatch,
    InvalidGeometry,
    InvalidShard,
    NotInFilter,
    ReplicaError,
)
from raims_node.bloom.filter import (
    BASE_SIZE_SHIFT,
    MAX_LEVEL,
    RESIZE_BASE,
    BloomFilter,
    capacity,
    level_for,
    shared_replica,
    size_bits_for,
)
from raims_node.bloom.hashing import (
    MAX_HASHED_LEN,
    SubjectHashes,
    prefix_hash,
    subject_hash,
    suffix_hash,
)
from raims_node.bloom.match import match_filters
from raims_node.bloom.positions import bit_position, bit_positions, bit_positions_of
from raims_node.bloom.shard import MAX_SHARDS, Shard, shard_of

__all__ = [
    "BASE_SIZE_SHIFT",
    "FULL",
    "MAX_HASHED_LEN",
    "MAX_LEVEL",
    "MAX_SHARDS",
    "RESIZE_BASE",
    "BloomDecodeError",
    "BloomError",
    "BloomFilter",
    "Detail",
    "DetailRecord",
    "FilterImage",
    "GeometryMismatch",
    "InvalidGeometry",
    "InvalidShard",
    "NotInFilter",
    "ReplicaError",
    "Shard",
    "SubjectHashes",
    "bit_position",
    "bit_positions",
    "bit_positions_of",
    "capacity",
    "decode_image",
    "encode_image",
    "level_for",
    "match_filters",
    "shared_replica",
    "prefix_hash",
    "shard_of",
    "size_bits_for",
    "subject_hash",
    "suffix_hash",
]
