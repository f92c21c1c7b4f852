"""The hash set of a subject: its full hash and its prefix and suffix hashes.

Manual "Wildcard Matching": "the prefix of the subject is hashed with different seeds
based on the prefix lengths used ... hs = hash(subject, seed = 0), h3 = hash(subject[1..3],
seed = 3) ...", and the hash set "is computed in groups before any routing".

Exact rules (the wire header's subject hash and the Spark audit depend on them):
- full hash:       mmh3.hash(subject_bytes, seed=0, signed=False)   (32 bit)
- prefix hash n:   mmh3.hash(subject_bytes[:n], seed=n, signed=False), 0 <= n <= 63
- suffix hash n:   mmh3.hash(subject_bytes[len - n:], seed=n, signed=False), 1 <= n <= 63
where subject_bytes is the subject's UTF-8 encoding (surrogateescape for raw bytes, see
`raims_node.subject.text`). Prefix and suffix lengths are capped at MAX_HASHED_LEN = 63
because a filter records the prefix lengths in use as a 64-bit mask (manual "show blooms":
"prefix: a bit mask of the prefix match length"); a longer literal prefix or suffix is
hashed on its first (last) 63 bytes, which any matching subject shares.

`SubjectHashes` computes the full hash once (or takes it from the frame header) and the
prefix/suffix hashes on demand, caching them, so matching one subject against many filters
hashes each length once.
"""

from typing import Final

import mmh3

from raims_node.subject import subject_bytes

SUBJECT_SEED: Final = 0
MAX_HASHED_LEN: Final = 63


def subject_hash(subject: bytes) -> int:
    return mmh3.hash(subject, SUBJECT_SEED, False)


def prefix_hash(subject: bytes, n: int) -> int:
    return mmh3.hash(subject[:n], n, False)


def suffix_hash(subject: bytes, n: int) -> int:
    return mmh3.hash(subject[len(subject) - n :], n, False)


class SubjectHashes:
    """The hash set of one subject, shared by every filter it is tested against."""

    __slots__ = ("subject", "full", "length", "_cache")

    def __init__(self, subject: str | bytes, full: int | None = None) -> None:
        self.subject = subject_bytes(subject)
        # A router passes the frame header's hash here instead of hashing again.
        self.full = subject_hash(self.subject) if full is None else full
        self.length = len(self.subject)
        # Prefix hashes under n, suffix hashes under -n (suffix lengths are >= 1).
        self._cache: dict[int, int] = {}

    def prefix(self, n: int) -> int:
        """Prefix hash of length n; the caller ensures n <= length."""
        h = self._cache.get(n)
        if h is None:
            h = self._cache[n] = prefix_hash(self.subject, n)
        return h

    def suffix(self, n: int) -> int:
        """Suffix hash of length n; the caller ensures 1 <= n <= length."""
        h = self._cache.get(-n)
        if h is None:
            h = self._cache[-n] = suffix_hash(self.subject, n)
        return h
