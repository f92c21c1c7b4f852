"""What one subscription contributes to a filter: a keyed hash, plain or with detail.

A key is (key_len, key_hash): key_len FULL (64) with the full subject hash for a subject
or a literal pattern, or a prefix length 0..63 with that prefix hash for a wildcard
pattern. A plain entry sets bit positions; an entry with a `Detail` does not. Its key is
stored exactly and a subject passes only when the key hash matches and the detail accepts
it (manual "Wildcard Matching": "if any of these are hash values present in the bloom
filter, then a check for the suffix matches are done"; "Anycast and Shardcast": the shard
"is a variation of suffix matching where the hash of the subject is used to discriminate").

Decision: detail entries keep no bits. The exact 32-bit key already identifies them, so bits
would only add false positives. A detail holds `min_len` (a matching subject is at least
prefix + suffix long), the suffix length and hash, and an optional shard.
"""

from dataclasses import dataclass
from typing import Final

from raims_node.bloom.hashing import (
    MAX_HASHED_LEN,
    SubjectHashes,
    prefix_hash,
    subject_hash,
    suffix_hash,
)
from raims_node.bloom.shard import Shard
from raims_node.subject import Pattern, subject_bytes

FULL: Final = MAX_HASHED_LEN + 1


@dataclass(frozen=True, slots=True)
class Detail:
    min_len: int
    suffix_len: int = 0
    suffix_hash: int = 0
    shard: Shard | None = None

    def accepts(self, hs: SubjectHashes) -> bool:
        if hs.length < self.min_len:
            return False
        if self.suffix_len and hs.suffix(self.suffix_len) != self.suffix_hash:
            return False
        return self.shard is None or self.shard.holds(hs.full)

    def sort_key(self) -> tuple[int, int, int, int, int]:
        shard = (0, 0) if self.shard is None else (self.shard.count, self.shard.index)
        return (self.min_len, self.suffix_len, self.suffix_hash, *shard)


@dataclass(frozen=True, slots=True)
class Entry:
    key_len: int
    key_hash: int
    detail: Detail | None = None


def subject_entry(subject: bytes) -> Entry:
    return Entry(FULL, subject_hash(subject))


def pattern_entry(pattern: Pattern, shard: Shard | None = None) -> Entry:
    prefix = subject_bytes(pattern.prefix)
    if pattern.literal:
        detail = None if shard is None else Detail(len(prefix), shard=shard)
        return Entry(FULL, subject_hash(prefix), detail)
    suffix = subject_bytes(pattern.suffix)
    n = min(len(prefix), MAX_HASHED_LEN)
    key = prefix_hash(prefix, n)
    if not suffix and shard is None:
        return Entry(n, key)
    s = min(len(suffix), MAX_HASHED_LEN)
    suffix_key = suffix_hash(suffix, s) if s else 0
    return Entry(n, key, Detail(len(prefix) + len(suffix), s, suffix_key, shard))
