"""The subscription bloom filter of a peer: subjects, patterns, shards, resize and reseed.

Manual "Networking" and "Wildcard Matching": a peer's filter holds every subscription and
pattern of its clients, about 2 bytes a subscription at about 0.05% false positives; the
filter records the prefix lengths its patterns use, a subject is tested with its full hash
and one prefix hash per length in use, and a prefix hit is confirmed by the suffix (A.*.B
needs both ends) or by the shard. Manual "_Z.BLM": the filter is resized "when crossing
powers of two subscription counts (currently at 31, 62, 124, 248, ...)". Console
"reseed": a new seed moves every entry so a low-rate subscription stops colliding with a
high-rate one. Console "show blooms": subs (subjects), total (with patterns), prefix
(mask of prefix lengths) and detail (mask of lengths with suffix or shard detail).

Design decisions (the manual gives the targets, not the structure):

- A single hash function (k = 1) in a large, sparse bit space, sent compressed. Level i
  has capacity 31 * 2**i entries and 2**(18 + i) bits (about 8456 bits per entry at
  capacity). A subject that is not subscribed passes with probability (set bits) / M,
  at most 1/8456 (0.012%) at capacity and half that just after a resize. The last level,
  14, has 2**32 bits (the whole 32-bit hash space) and a capacity of 507,904; past it the
  rate grows as n / 2**32 (0.023% at a million entries), the 32-bit collision floor the
  manual's "reseed" mentions. Elias-Fano coded (`codec.py`), a position costs L + 2 to
  L + 3 bits with L = floor(log2(M / n)) = 13 or 14, so a filter travels in 1.9 to 2.1
  bytes a subscription at every fill level. This is the compressed bloom filter result
  (Mitzenmacher): for a given transmitted size, few hash functions over many bits beat
  the classic k = ln2 * m / n filter. A classic filter with doubling thresholds swings
  between 2 and 4 bytes an entry; this one stays near 2 at every count, well below the
  classic floor at 16 bits an entry (0.046%). `num_hashes` stays a parameter of the
  geometry and of the byte format (any k from 1 to 8 works and is tested).
- Removal is exact by counting: the filter keeps a count per set position (a counting
  bloom filter with unbounded counters), and each detail record has a refcount. The
  owner (a filter built by add calls) also keeps its subscriptions (subject bytes and
  compiled patterns with their counts), so resize and reseed rebuild the positions
  exactly from them. A replica (`from_bytes`) holds only positions, details and counts: it
  applies add/remove deltas (`_S.JOIN`, `_P.PSUB` ...) and matches exactly like its owner,
  but cannot resize or reseed (`ReplicaError`); the owner sends new bytes with `_Z.BLM`.
- Owners resize automatically: up when the count exceeds the level's capacity (crossing
  31, 62, 124, ...), down when it falls to a quarter of it (hysteresis, so a count
  wobbling around a threshold does not resize on every change). add/remove return True
  when the call resized, which is when the owner broadcasts `_Z.BLM`.
- A key length is the prefix length 0..63, or FULL (64) for the whole subject. A subject
  longer than a prefix length is tested against it; one shorter is not.
"""

import secrets
from collections import OrderedDict
from collections.abc import Iterable
from typing import Final, TypeVar

from raims_node.bloom.codec import DetailRecord, FilterImage, decode_image, encode_image
from raims_node.bloom.entry import FULL, Detail, Entry, pattern_entry, subject_entry
from raims_node.bloom.errors import (
    GeometryMismatch,
    InvalidGeometry,
    NotInFilter,
    ReplicaError,
)
from raims_node.bloom.hashing import SubjectHashes
from raims_node.bloom.positions import (
    MAX_SIZE_SHIFT,
    bit_position,
    bit_positions,
    check_geometry,
    hash_seeds,
)
from raims_node.bloom.shard import Shard
from raims_node.subject import Pattern, subject_bytes

RESIZE_BASE: Final = 31
BASE_SIZE_SHIFT: Final = 18
MAX_LEVEL: Final = MAX_SIZE_SHIFT - BASE_SIZE_SHIFT
SHRINK_FACTOR: Final = 4
DEFAULT_NUM_HASHES: Final = 1
KEY_LENGTHS: Final = FULL + 1

# An owner's subscription: subject bytes, or a compiled pattern with its shard.
SubKey = bytes | tuple[Pattern, Shard | None]
K = TypeVar("K")


def capacity(level: int) -> int:
    return RESIZE_BASE << level


def level_for(count: int) -> int:
    """The smallest level whose capacity holds `count` entries (at most MAX_LEVEL)."""
    level = 0
    while level < MAX_LEVEL and capacity(level) < count:
        level += 1
    return level


def size_bits_for(level: int) -> int:
    return 1 << (BASE_SIZE_SHIFT + level)


def _entry_of(key: SubKey) -> Entry:
    return subject_entry(key) if isinstance(key, bytes) else pattern_entry(*key)


def _bump(counts: dict[K, int], key: K, delta: int) -> None:
    c = counts.get(key, 0) + delta
    if c:
        counts[key] = c
    else:
        del counts[key]


class BloomFilter:
    """A counting, single-hash bloom filter of subjects and patterns (see module doc)."""

    __slots__ = (
        "_size_bits",
        "_seed",
        "_num_hashes",
        "_hash_seeds",
        "_level",
        "_subs",
        "_plain_hashes",
        "_positions",
        "_details",
        "_plain",
        "_detailed",
        "_steps",
        "_subject_count",
        "_pattern_count",
    )

    _size_bits: int
    _seed: int
    _num_hashes: int
    _hash_seeds: tuple[int, ...]
    _level: int | None
    _subs: dict[SubKey, int] | None
    _plain_hashes: dict[SubKey, int]  # an owner's plain (no detail) entries' key hashes, for _rebuild
    _positions: dict[int, int]
    _details: dict[tuple[int, int], dict[Detail, int]]
    _plain: list[int]
    _detailed: list[int]
    # (key length, has plain entries, has detail entries): FULL first, then prefix lengths
    # ascending, so matching stops at the first length longer than the subject.
    _steps: tuple[tuple[int, bool, bool], ...]
    _subject_count: int
    _pattern_count: int

    def __init__(self, seed: int = 0, num_hashes: int = DEFAULT_NUM_HASHES, level: int = 0) -> None:
        if not 0 <= level <= MAX_LEVEL:
            raise InvalidGeometry(f"level {level} is outside 0..{MAX_LEVEL}")
        self._reset(size_bits_for(level), seed, num_hashes)
        self._level = level
        self._subs = {}

    def _set_geometry(self, size_bits: int, seed: int, num_hashes: int) -> None:
        check_geometry(size_bits, seed, num_hashes)
        self._size_bits = size_bits
        self._seed = seed
        self._num_hashes = num_hashes
        self._hash_seeds = hash_seeds(seed, num_hashes)

    def _reset(self, size_bits: int, seed: int, num_hashes: int) -> None:
        self._set_geometry(size_bits, seed, num_hashes)
        self._positions = {}
        self._plain_hashes = {}
        self._details = {}
        self._plain = [0] * KEY_LENGTHS
        self._detailed = [0] * KEY_LENGTHS
        self._steps = ()
        self._subject_count = 0
        self._pattern_count = 0

    @classmethod
    def _replica(cls, size_bits: int, seed: int, num_hashes: int) -> "BloomFilter":
        f = cls.__new__(cls)
        f._reset(size_bits, seed, num_hashes)
        f._level = None
        f._subs = None
        return f

    # -- what the console and the LSDB show --------------------------------------------

    @property
    def size_bits(self) -> int:
        return self._size_bits

    @property
    def seed(self) -> int:
        return self._seed

    @property
    def num_hashes(self) -> int:
        return self._num_hashes

    @property
    def level(self) -> int | None:
        """The resize level of an owner; None for a replica."""
        return self._level

    @property
    def is_replica(self) -> bool:
        return self._subs is None

    @property
    def subject_count(self) -> int:
        return self._subject_count

    @property
    def pattern_count(self) -> int:
        return self._pattern_count

    @property
    def count(self) -> int:
        return self._subject_count + self._pattern_count

    def __len__(self) -> int:
        return self.count

    @property
    def prefix_lengths(self) -> tuple[int, ...]:
        return tuple(n for n, _, _ in self._steps if n != FULL)

    @property
    def prefix_mask(self) -> int:
        return sum(1 << n for n in self.prefix_lengths)

    @property
    def detail_mask(self) -> int:
        """Bit n set when key length n has detail entries (bit 64: literal with a shard)."""
        return sum(1 << n for n in range(KEY_LENGTHS) if self._detailed[n])

    # -- subscriptions -------------------------------------------------------------------

    def add_subject(self, subject: str | bytes) -> bool:
        s = subject_bytes(subject)
        return self._change(s, subject_entry(s), 1)

    def remove_subject(self, subject: str | bytes) -> bool:
        s = subject_bytes(subject)
        return self._change(s, subject_entry(s), -1)

    def add_pattern(self, pattern: Pattern, shard: Shard | None = None) -> bool:
        return self._change((pattern, shard), pattern_entry(pattern, shard), 1)

    def remove_pattern(self, pattern: Pattern, shard: Shard | None = None) -> bool:
        return self._change((pattern, shard), pattern_entry(pattern, shard), -1)

    def _change(self, key: SubKey, entry: Entry, delta: int) -> bool:
        if delta < 0:
            is_subject = isinstance(key, bytes)
            held = self._subs.get(key, 0) > 0 if self._subs is not None else self._holds(entry)
            if not held or (self._subject_count if is_subject else self._pattern_count) == 0:
                kind = "subject" if is_subject else "pattern"
                raise NotInFilter(f"filter does not hold {kind} {key!r}")
        self._record(key, entry, delta)
        return self._autosize()

    def _record(self, key: SubKey, entry: Entry, delta: int) -> None:
        self._apply(entry, delta)
        if isinstance(key, bytes):
            self._subject_count += delta
        else:
            self._pattern_count += delta
        if self._subs is not None:
            _bump(self._subs, key, delta)
            if entry.detail is None:
                if key in self._subs:
                    self._plain_hashes[key] = entry.key_hash
                else:
                    self._plain_hashes.pop(key, None)

    def _positions_of(self, h: int) -> list[int]:
        return [bit_position(h, s, self._size_bits) for s in self._hash_seeds]

    def _holds(self, entry: Entry) -> bool:
        if entry.detail is not None:
            recs = self._details.get((entry.key_len, entry.key_hash), {})
            return recs.get(entry.detail, 0) > 0
        if not self._plain[entry.key_len]:
            return False
        wanted: dict[int, int] = {}
        for p in self._positions_of(entry.key_hash):
            wanted[p] = wanted.get(p, 0) + 1
        return all(self._positions.get(p, 0) >= c for p, c in wanted.items())

    def _apply(self, entry: Entry, delta: int) -> None:
        n = entry.key_len
        was = (self._plain[n] > 0, self._detailed[n] > 0)
        if entry.detail is None:
            for p in self._positions_of(entry.key_hash):
                _bump(self._positions, p, delta)
            self._plain[n] += delta
        else:
            key = (n, entry.key_hash)
            recs = self._details.setdefault(key, {})
            recs[entry.detail] = recs.get(entry.detail, 0) + delta
            if not recs[entry.detail]:
                del recs[entry.detail]
                if not recs:
                    del self._details[key]
            self._detailed[n] += delta
        if was != (self._plain[n] > 0, self._detailed[n] > 0):
            self._restep()

    def _restep(self) -> None:
        self._steps = tuple(
            (n, self._plain[n] > 0, self._detailed[n] > 0)
            for n in (FULL, *range(FULL))
            if self._plain[n] or self._detailed[n]
        )

    # -- matching ------------------------------------------------------------------------

    def _detail_hit(self, key_len: int, h: int, hs: SubjectHashes) -> bool:
        recs = self._details.get((key_len, h))
        return recs is not None and any(d.accepts(hs) for d in recs)

    def might_match(self, hs: SubjectHashes) -> bool:
        """True when the subject may be subscribed; never False for a subscribed one."""
        positions, size_bits, seeds = self._positions, self._size_bits, self._hash_seeds
        length, prefix = hs.length, hs.prefix
        for n, plain, detailed in self._steps:
            if n == FULL:
                h = hs.full
            elif n > length:
                break
            else:
                h = prefix(n)
            if plain:
                for s in seeds:
                    if bit_position(h, s, size_bits) not in positions:
                        break
                else:
                    return True
            if detailed and self._detail_hit(n, h, hs):
                return True
        return False

    def matches(self, subject: str | bytes) -> bool:
        return self.might_match(SubjectHashes(subject))

    # -- geometry ------------------------------------------------------------------------

    def _owned(self, what: str) -> dict[SubKey, int]:
        if self._subs is None:
            raise ReplicaError(f"cannot {what} a filter decoded from bytes; its owner must")
        return self._subs

    def _autosize(self) -> bool:
        if self._level is None:
            return False
        n = self.count
        grow = n > capacity(self._level) and self._level < MAX_LEVEL
        shrink = self._level > 0 and n <= capacity(self._level) // SHRINK_FACTOR
        if grow or shrink:
            self._rebuild(level_for(n), self._seed)
            return True
        return False

    def _rebuild(self, level: int, seed: int) -> None:
        """Every plain entry's positions again, for a new size or seed: vectorized, as a
        filter doubles while tens of thousands of subscriptions arrive (a Python loop
        held the event loop for about 0.25 s at 40,000)."""
        subs = self._owned("rebuild")
        self._set_geometry(size_bits_for(level), seed, self._num_hashes)
        self._level = level
        plain = self._plain_hashes
        if not plain:
            self._positions = {}
            return
        import numpy as np  # on first use, not at ms_server's start (issue 23)

        hashes = np.fromiter(plain.values(), dtype=np.uint32, count=len(plain))
        counts = np.fromiter((subs[k] for k in plain), dtype=np.int64, count=len(plain))
        positions = bit_positions(self._size_bits, seed, self._num_hashes, hashes).ravel()
        uniq, inverse = np.unique(positions, return_inverse=True)
        sums = np.bincount(inverse, weights=np.repeat(counts, self._num_hashes)).astype(np.int64)
        self._positions = dict(zip(uniq.tolist(), sums.tolist(), strict=True))

    def resize(self, level: int | None = None) -> bool:
        """Rebuild at `level` (default: the level that fits the count); True if it changed."""
        self._owned("resize")
        target = level_for(self.count) if level is None else level
        if not 0 <= target <= MAX_LEVEL:
            raise InvalidGeometry(f"level {target} is outside 0..{MAX_LEVEL}")
        if target == self._level:
            return False
        self._rebuild(target, self._seed)
        return True

    def reseed(self, seed: int | None = None) -> int:
        """Rebuild with `seed` (default: a random one that differs); returns the new seed."""
        self._owned("reseed")
        if seed is None:
            seed = self._seed
            while seed == self._seed:
                seed = secrets.randbits(32)
        self._rebuild(self._level or 0, seed)
        return seed

    # -- bytes ---------------------------------------------------------------------------

    def image(self) -> FilterImage:
        import numpy as np

        keys = np.fromiter(self._positions.keys(), dtype=np.uint64, count=len(self._positions))
        counts = np.fromiter(self._positions.values(), dtype=np.int64, count=len(keys))
        order = np.argsort(keys)
        details = sorted(
            (
                DetailRecord(k_len, k_hash, d, c)
                for (k_len, k_hash), recs in self._details.items()
                for d, c in recs.items()
            ),
            key=DetailRecord.sort_key,
        )
        return FilterImage(
            self._size_bits,
            self._seed,
            self._num_hashes,
            self._subject_count,
            self._pattern_count,
            tuple(
                (n, self._plain[n], self._detailed[n])
                for n in range(KEY_LENGTHS)
                if self._plain[n] or self._detailed[n]
            ),
            np.repeat(keys[order], counts[order]),
            tuple(details),
        )

    def to_bytes(self) -> bytes:
        return encode_image(self.image())

    @classmethod
    def from_image(cls, image: FilterImage) -> "BloomFilter":
        import numpy as np

        f = cls._replica(image.size_bits, image.seed, image.num_hashes)
        values, counts = np.unique(image.positions, return_counts=True)
        f._positions = dict(zip(values.tolist(), counts.tolist(), strict=True))
        for rec in image.details:
            f._details.setdefault((rec.key_len, rec.key_hash), {})[rec.detail] = rec.refcount
        for n, plain, detailed in image.key_counts:
            f._plain[n], f._detailed[n] = plain, detailed
        f._restep()
        f._subject_count, f._pattern_count = image.subject_count, image.pattern_count
        return f

    @classmethod
    def from_bytes(cls, data: bytes) -> "BloomFilter":
        return cls.from_image(decode_image(data))

    def copy(self) -> "BloomFilter":
        """An independent copy (of a shared replica, before a delta changes it)."""
        f = BloomFilter.__new__(BloomFilter)
        f._size_bits, f._seed, f._num_hashes, f._hash_seeds = self._size_bits, self._seed, self._num_hashes, \
            self._hash_seeds
        f._level, f._steps = self._level, self._steps
        f._subs = None if self._subs is None else dict(self._subs)
        f._plain_hashes = dict(self._plain_hashes)
        f._positions = dict(self._positions)
        f._details = {k: dict(recs) for k, recs in self._details.items()}
        f._plain, f._detailed = list(self._plain), list(self._detailed)
        f._subject_count, f._pattern_count = self._subject_count, self._pattern_count
        return f

    # -- union ---------------------------------------------------------------------------

    @classmethod
    def union(cls, filters: Iterable["BloomFilter"], seed: int | None = None) -> "BloomFilter":
        """One filter matching what any of `filters` matches (the console, ipc and sys
        filters into the one a peer advertises). Owners merge into an owner sized for the
        total, with `seed` (default: the first filter's) and the first filter's number of
        hash functions; replicas must share one geometry and give a replica."""
        fs = list(filters)
        if not fs:
            return cls(seed=0 if seed is None else seed)
        first = fs[0]
        seed = first._seed if seed is None else seed
        if all(f._subs is not None for f in fs):
            out = cls(seed, first._num_hashes, level_for(sum(f.count for f in fs)))
            for f in fs:
                for key, c in f._owned("union").items():
                    out._record(key, _entry_of(key), c)
            return out
        geometry = (first._size_bits, seed, first._num_hashes)
        for f in fs:
            if (f._size_bits, f._seed, f._num_hashes) != geometry:
                raise GeometryMismatch(
                    f"union of replicas needs one (size_bits, seed, num_hashes): {geometry} vs "
                    f"{(f._size_bits, f._seed, f._num_hashes)}"
                )
        out = cls._replica(*geometry)
        for f in fs:
            for p, c in f._positions.items():
                _bump(out._positions, p, c)
            for k, recs in f._details.items():
                mine = out._details.setdefault(k, {})
                for d, c in recs.items():
                    mine[d] = mine.get(d, 0) + c
            for n in range(KEY_LENGTHS):
                out._plain[n] += f._plain[n]
                out._detailed[n] += f._detailed[n]
            out._subject_count += f._subject_count
            out._pattern_count += f._pattern_count
        out._restep()
        return out


SHARED_LIMIT: Final = 4096  # decoded replicas kept by shared_replica
SHARED_MAX_BYTES: Final = 256  # larger filters are decoded per call (bounds the memory held)
_shared: OrderedDict[bytes, BloomFilter] = OrderedDict()


def shared_replica(data: bytes) -> BloomFilter:
    """`BloomFilter.from_bytes(data)`, decoded once per process while recently used:
    every peer state holding the same filter bytes (each node of a simulated network,
    sync replies and `_Z.BLM` floods repeating a filter) shares one replica. The result
    must not be changed: copy it before applying a delta."""
    if len(data) > SHARED_MAX_BYTES:
        return BloomFilter.from_bytes(data)
    f = _shared.get(data)
    if f is None:
        f = _shared[data] = BloomFilter.from_bytes(data)
        if len(_shared) > SHARED_LIMIT:
            _shared.popitem(last=False)
    else:
        _shared.move_to_end(data)
    return f
