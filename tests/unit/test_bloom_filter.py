"""Bloom filter behaviour: no false negatives through every operation, exact removal,
shards, resize thresholds, reseed, the byte format and the vectorized audit kernels."""

import random
from dataclasses import dataclass

import mmh3
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raims_node.bloom import (
    FULL,
    MAX_LEVEL,
    BloomDecodeError,
    BloomError,
    BloomFilter,
    GeometryMismatch,
    InvalidGeometry,
    InvalidShard,
    NotInFilter,
    ReplicaError,
    Shard,
    SubjectHashes,
    bit_positions,
    bit_positions_of,
    capacity,
    decode_image,
    match_filters,
    prefix_hash,
    shard_of,
    size_bits_for,
    subject_hash,
)
from raims_node.subject import Pattern, Syntax, compile_pattern


@dataclass(frozen=True)
class Sub:
    """One subscription and the subjects it must let through."""

    subject: str | None
    pattern: Pattern | None
    shard: Shard | None
    matched: tuple[str, ...]

    def add(self, f: BloomFilter) -> bool:
        if self.pattern is None:
            assert self.subject is not None
            return f.add_subject(self.subject)
        return f.add_pattern(self.pattern, self.shard)

    def remove(self, f: BloomFilter) -> bool:
        if self.pattern is None:
            assert self.subject is not None
            return f.remove_subject(self.subject)
        return f.remove_pattern(self.pattern, self.shard)

    def must_pass(self) -> list[str]:
        if self.shard is None:
            return list(self.matched)
        return [s for s in self.matched if self.shard.holds(subject_hash(s.encode()))]


# Mostly short segments, sometimes long ones so prefixes and suffixes pass the 63-byte cap.
SEGMENT = st.one_of(
    st.text(alphabet="abcxyz_", min_size=1, max_size=4),
    st.text(alphabet="ab", min_size=60, max_size=70),
)
SEGMENTS = st.lists(SEGMENT, min_size=1, max_size=5)
GLOB_SPECIAL = set("*?[]\\")


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in GLOB_SPECIAL else c for c in text)


@st.composite
def rv_sub(draw: st.DrawFn) -> tuple[str, list[str]]:
    segs = draw(SEGMENTS)
    pat = [("*" if draw(st.booleans()) else s) for s in segs]
    cut = draw(st.integers(0, len(segs)))
    if 0 < cut < len(segs):
        pat = pat[:cut] + [">"]
    return ".".join(pat), [".".join(segs)]


@st.composite
def sbus_sub(draw: st.DrawFn) -> tuple[str, list[str]]:
    segs = draw(SEGMENTS)
    pat = [("*" if draw(st.booleans()) else s) for s in segs]
    cut = draw(st.integers(0, len(segs)))
    if 0 < cut < len(segs):
        pat = pat[:cut] + [""]  # a trailing '/' matches the rest
    return "/".join(pat), ["/".join(segs)]


@st.composite
def glob_sub(draw: st.DrawFn) -> tuple[str, list[str]]:
    subject = draw(st.text(alphabet="ab.c*?", min_size=0, max_size=12))
    i = draw(st.integers(0, len(subject)))
    mode = draw(st.sampled_from(["star", "optional", "class"]))
    if mode == "star" or i == len(subject):
        j = draw(st.integers(i, len(subject)))
        middle = "*"
    else:
        j = i + 1
        middle = "?" if mode == "optional" else "[" + subject[i] + "z]"
    return _glob_escape(subject[:i]) + middle + _glob_escape(subject[j:]), [subject]


@st.composite
def subscription(draw: st.DrawFn) -> Sub:
    kind = draw(st.sampled_from(["subject", "rv", "glob", "sbus", "literal"]))
    if kind == "subject":
        subject = draw(st.one_of(SEGMENTS.map(".".join), st.text(max_size=70)))
        return Sub(subject, None, None, (subject,))
    syntax: Syntax
    if kind == "literal":
        syntax, (text, matched) = "rv", draw(SEGMENTS.map(lambda s: (".".join(s), [".".join(s)])))
    else:
        syntax = kind  # type: ignore[assignment]
        text, matched = draw({"rv": rv_sub(), "glob": glob_sub(), "sbus": sbus_sub()}[kind])
    pattern = compile_pattern(text, syntax)
    assert all(pattern.matches(m) for m in matched), (text, matched)
    shard = None
    if draw(st.integers(0, 3)) == 0:
        count = draw(st.integers(1, 4))
        shard = Shard(draw(st.integers(1, count)), count)
    return Sub(None, pattern, shard, tuple(matched))


SUBS = st.lists(subscription(), min_size=1, max_size=30)


def assert_no_false_negatives(f: BloomFilter, subs: list[Sub]) -> None:
    for sub in subs:
        for s in sub.must_pass():
            assert f.matches(s), (sub, s)


def owner_with(subs: list[Sub], seed: int = 0) -> BloomFilter:
    f = BloomFilter(seed=seed)
    for sub in subs:
        sub.add(f)
    return f


# -- no false negatives ------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(
    SUBS,
    st.lists(
        st.one_of(
            st.tuples(st.just("resize"), st.integers(0, MAX_LEVEL)),
            st.tuples(st.just("reseed"), st.integers(0, 2**32 - 1)),
            st.tuples(st.just("bytes"), st.just(0)),
            st.tuples(st.just("union"), st.integers(1, 3)),
        ),
        max_size=4,
    ),
)
def test_no_false_negatives_through_operations(subs: list[Sub], ops: list[tuple[str, int]]) -> None:
    f = owner_with(subs)
    assert_no_false_negatives(f, subs)
    for op, arg in ops:
        if op == "resize":
            f.resize(arg)
            assert f.size_bits == size_bits_for(arg)
        elif op == "reseed":
            f.reseed(arg)
            assert f.seed == arg
        elif op == "bytes":
            replica = BloomFilter.from_bytes(f.to_bytes())
            assert replica.is_replica and replica.to_bytes() == f.to_bytes()
            assert_no_false_negatives(replica, subs)
        else:
            parts = [owner_with(subs[i::arg], seed=f.seed) for i in range(arg)]
            f = BloomFilter.union(parts)
            assert f.count == len(subs)
        assert_no_false_negatives(f, subs)


@settings(max_examples=60, deadline=None)
@given(SUBS, st.data())
def test_removal_is_exact(subs: list[Sub], data: st.DataObject) -> None:
    f = owner_with(subs, seed=7)
    replica = BloomFilter.from_bytes(f.to_bytes())
    gone = data.draw(st.sets(st.integers(0, len(subs) - 1)))
    for i in sorted(gone):
        subs[i].remove(f)
        subs[i].remove(replica)
    kept = [s for i, s in enumerate(subs) if i not in gone]
    assert_no_false_negatives(f, kept)
    assert_no_false_negatives(replica, kept)
    # The replica applied the same deltas without resizing: it equals an owner holding
    # only what is left, built at the replica's size.
    fresh = owner_with(kept, seed=7)
    fresh.resize(replica.size_bits.bit_length() - 1 - 18)
    assert replica.to_bytes() == fresh.to_bytes()
    for sub in kept:
        sub.remove(f)
    assert (f.count, f.prefix_mask, f.detail_mask, f.level) == (0, 0, 0, 0)
    assert f.to_bytes() == BloomFilter(seed=7).to_bytes()


def test_remove_unknown_raises() -> None:
    f = BloomFilter()
    f.add_subject("a.b")
    f.add_pattern(compile_pattern("a.*", "rv"))
    with pytest.raises(NotInFilter):
        f.remove_subject("a.c")
    with pytest.raises(NotInFilter):
        f.remove_pattern(compile_pattern("a.>", "rv"))  # same prefix key, different pattern
    with pytest.raises(NotInFilter):
        f.remove_pattern(compile_pattern("a.*", "rv"), Shard(1, 2))
    with pytest.raises(NotInFilter):
        f.remove_pattern(compile_pattern("a.b", "rv"))  # a literal pattern is not the subject
    replica = BloomFilter.from_bytes(f.to_bytes())
    with pytest.raises(NotInFilter):
        replica.remove_subject("zz.top")
    with pytest.raises(NotInFilter):
        replica.remove_pattern(compile_pattern("q.*.r", "rv"))
    assert f.count == 2 and replica.count == 2


def test_duplicate_subscriptions_are_counted() -> None:
    f = BloomFilter()
    p = compile_pattern("a.*.z", "rv")
    for _ in range(3):
        f.add_subject("a.b")
        f.add_pattern(p)
    for _ in range(2):
        f.remove_subject("a.b")
        f.remove_pattern(p)
    assert f.matches("a.b") and f.matches("a.q.z")
    assert (f.subject_count, f.pattern_count) == (1, 1)


# -- suffix and shard detail ---------------------------------------------------------------


def test_suffix_needs_both_ends() -> None:
    f = BloomFilter()
    f.add_pattern(compile_pattern("A.*.B", "rv"))
    assert f.matches("A.x.B") and f.matches("A.xyz.B")
    # Detail entries are exact (no bits), so nothing else can pass by collision.
    assert not f.matches("A.x.C") and not f.matches("Z.x.B") and not f.matches("A.B")
    assert f.prefix_lengths == (2,) and f.prefix_mask == 1 << 2 and f.detail_mask == 1 << 2
    assert f.subject_count == 0 and f.pattern_count == 1


def test_prefix_as_long_as_the_subject() -> None:
    f = BloomFilter()
    f.add_pattern(compile_pattern("abc*", "glob"))
    f.add_pattern(compile_pattern("a/*", "sbus"))
    assert f.matches("abc") and f.matches("a/") and not f.matches("ab")


def test_long_prefix_and_suffix_are_capped_not_lost() -> None:
    head, tail = "h" * 80, "t" * 90
    f, g = BloomFilter(), BloomFilter()
    f.add_pattern(compile_pattern(f"{head}.*.{tail}", "rv"))
    g.add_pattern(compile_pattern(f"{head}x.>", "rv"))
    assert f.prefix_lengths == g.prefix_lengths == (63,)
    assert f.matches(f"{head}.q.{tail}") and g.matches(f"{head}x.q.r")
    # The suffix check still tells these apart; a capped plain prefix cannot (by design).
    assert not f.matches(f"{head}.q.{tail[:-1]}u")
    assert g.matches(f"{head}y")


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 8), st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=50))
def test_shards_partition_the_subject_space(count: int, tails: list[str]) -> None:
    pattern = compile_pattern("X.>", "rv")
    shards = [BloomFilter() for _ in range(count)]
    for k, f in enumerate(shards, start=1):
        f.add_pattern(pattern, Shard(k, count))
    replicas = [BloomFilter.from_bytes(f.to_bytes()) for f in shards]
    for tail in tails:
        subject = "X." + tail.replace(".", "_")
        hits = match_filters(subject, shards)
        assert len(hits) == 1
        assert hits == match_filters(subject, replicas)
        assert hits[0] + 1 == shard_of(subject_hash(subject.encode()), count)


def test_shard_rule_splits_not_reshuffles() -> None:
    rng = random.Random(3)
    for _ in range(2000):
        h = rng.getrandbits(32)
        assert shard_of(h, 4) == (shard_of(h, 8) + 1) // 2
        assert 1 <= shard_of(h, 3) <= 3
    assert shard_of(0, 2) == 1 and shard_of(2**32 - 1, 2) == 2 and shard_of(2**31, 2) == 2
    for bad in [(0, 2), (3, 2), (1, 0), (1, 2**16 + 1)]:
        with pytest.raises(InvalidShard):
            Shard(*bad)


def test_sharded_literal_uses_the_full_key() -> None:
    f = BloomFilter()
    subject = "X.Y"
    k = shard_of(subject_hash(b"X.Y"), 2)
    f.add_pattern(compile_pattern(subject, "rv"), Shard(k, 2))
    assert f.matches(subject) and f.detail_mask == 1 << FULL
    g = BloomFilter()
    g.add_pattern(compile_pattern(subject, "rv"), Shard(3 - k, 2))
    assert not g.matches(subject)


# -- resize and reseed ---------------------------------------------------------------------


def test_resizes_when_crossing_31_62_124_248() -> None:
    f = BloomFilter()
    resized_at = [n for n in range(1, 300) if f.add_subject(f"s.{n}")]
    assert resized_at == [32, 63, 125, 249]
    assert f.level == 4 and f.size_bits == size_bits_for(4) and capacity(4) == 496
    assert_no_false_negatives(f, [Sub(f"s.{n}", None, None, (f"s.{n}",)) for n in range(1, 300)])
    # Shrinks only at a quarter of capacity, to the level that fits.
    shrunk_at = [n for n in range(299, 0, -1) if f.remove_subject(f"s.{n}")]
    assert shrunk_at == [125, 32]
    assert f.level == 0


def test_sys_filter_example() -> None:
    """The manual's sys filter: the _I.<nonce>.> inbox and _M.> multicast patterns."""
    sys_f, console, ipc = BloomFilter(), BloomFilter(), BloomFilter()
    sys_f.add_pattern(compile_pattern("_I.L0MOCmhQpwX2JqsBjYBypA.>", "rv"))
    sys_f.add_pattern(compile_pattern("_M.>", "rv"))
    console.add_subject("_7500.RSF.REC.AVP.N")
    ipc.add_pattern(compile_pattern("RSF.*", "glob"))
    peer = BloomFilter.union([console, ipc, sys_f])
    assert (peer.subject_count, peer.pattern_count) == (1, 3)
    assert peer.prefix_lengths == (3, 4, 26)
    for s in ["_I.L0MOCmhQpwX2JqsBjYBypA.ping", "_M.x", "_7500.RSF.REC.AVP.N", "RSF.a"]:
        assert peer.matches(s)
        assert BloomFilter.from_bytes(peer.to_bytes()).matches(s)


def test_reseed_moves_every_entry() -> None:
    f = BloomFilter(seed=1)
    for i in range(2000):
        f.add_subject(f"sub.{i}")
    before = f.image().positions
    assert f.reseed() != 1
    after = f.image().positions
    # A position survives only by chance (1 in M ~ 2**24 here).
    assert len(np.intersect1d(before, after)) <= 2
    assert f.matches("sub.1999")


def test_reseed_separates_a_collision() -> None:
    size_bits = 1 << 8
    rng = random.Random(5)
    hashes = np.array([rng.getrandbits(32) for _ in range(300)], dtype=np.uint32)
    pos = bit_positions(size_bits, 11, 1, hashes)[:, 0]
    a, b = next((i, j) for i in range(300) for j in range(i + 1, 300) if pos[i] == pos[j])
    together = sum(
        int(np.ptp(bit_positions(size_bits, seed, 1, hashes[[a, b]])[:, 0]) == 0)
        for seed in range(12, 212)
    )
    assert together <= 10  # about 200 / 256 expected by chance


def test_replica_cannot_rebuild() -> None:
    f = BloomFilter()
    f.add_subject("a")
    replica = BloomFilter.from_bytes(f.to_bytes())
    with pytest.raises(ReplicaError):
        replica.reseed()
    with pytest.raises(ReplicaError):
        replica.resize(3)
    assert replica.level is None and not replica.add_subject("b")
    with pytest.raises(InvalidGeometry):
        BloomFilter(level=MAX_LEVEL + 1)
    with pytest.raises(InvalidGeometry):
        f.reseed(2**32)


def test_union_of_replicas() -> None:
    a, b = BloomFilter(seed=9), BloomFilter(seed=9)
    a.add_subject("x.1")
    b.add_pattern(compile_pattern("y.*.z", "rv"), Shard(1, 1))
    ra, rb = (BloomFilter.from_bytes(f.to_bytes()) for f in (a, b))
    u = BloomFilter.union([ra, rb])
    assert u.is_replica and u.matches("x.1") and u.matches("y.q.z") and u.count == 2
    assert u.to_bytes() == BloomFilter.union([a, b]).to_bytes()
    other = BloomFilter(seed=10)
    with pytest.raises(GeometryMismatch):
        BloomFilter.union([ra, BloomFilter.from_bytes(other.to_bytes())])
    assert BloomFilter.union([]).count == 0


# -- matching many filters -----------------------------------------------------------------


def test_match_filters_equals_each_filter() -> None:
    rng = random.Random(11)
    filters = []
    for i in range(60):
        f = BloomFilter(seed=rng.getrandbits(32))
        f.add_subject(f"peer{i}.inbox")
        f.add_pattern(compile_pattern(f"grp{i % 7}.*", "rv"))
        f.add_pattern(compile_pattern(f"t{i % 5}*x", "glob"))
        filters.append(f)
    for subject in ["peer3.inbox", "grp2.q", "t4yyx", "nothing.here", "grp6.q.r"]:
        hs = SubjectHashes(subject)
        want = [i for i, f in enumerate(filters) if f.matches(subject)]
        assert match_filters(subject, filters) == want == match_filters(hs, filters)
    assert 3 in match_filters("peer3.inbox", filters)
    assert set(match_filters("grp2.q", filters)) >= {2, 9, 16, 23, 30, 37, 44, 51, 58}


def test_subject_hashes_follow_the_contract() -> None:
    s = b"_7500.RSF.REC.AVP.N"
    hs = SubjectHashes(s)
    assert hs.full == mmh3.hash(s, seed=0, signed=False) == subject_hash(s)
    for n in (0, 3, 5, 10, 19):
        assert hs.prefix(n) == mmh3.hash(s[:n], seed=n, signed=False) == prefix_hash(s, n)
    assert hs.suffix(2) == mmh3.hash(b".N", seed=2, signed=False)
    # A router passes the frame header's hash and is trusted with it.
    assert SubjectHashes(s, full=123).full == 123


# -- the vectorized kernels and the byte format ------------------------------------------


@settings(max_examples=100, deadline=None)
@given(
    st.integers(1, 2**32),
    st.integers(0, 2**32 - 1),
    st.integers(1, 8),
    st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=20),
)
def test_vector_positions_equal_scalar(
    size_bits: int, seed: int, k: int, hashes: list[int]
) -> None:
    got = bit_positions(size_bits, seed, k, np.array(hashes, dtype=np.uint32))
    assert got.dtype == np.uint64 and got.shape == (len(hashes), k)
    assert [tuple(row) for row in got.tolist()] == [
        bit_positions_of(size_bits, seed, k, h) for h in hashes
    ]
    assert int(got.max()) < size_bits


def test_probe_hashes_equals_might_match() -> None:
    f = BloomFilter(seed=77, num_hashes=3, level=2)
    for i in range(100):
        f.add_subject(f"k.{i}")
    image = decode_image(f.to_bytes())
    subjects = [f"k.{i}" for i in range(0, 5000, 7)]
    hashes = np.array([subject_hash(s.encode()) for s in subjects], dtype=np.uint32)
    assert image.probe_hashes(hashes).tolist() == [f.matches(s) for s in subjects]
    assert image.probe_hashes(hashes)[:15].all()


def test_byte_layout_of_one_subject() -> None:
    """Pins the documented format: header, counts, Elias-Fano low bits MSB first, high bits."""
    f = BloomFilter(seed=0x01020304)
    f.add_subject("a")
    (pos,) = bit_positions_of(1 << 18, 0x01020304, 1, subject_hash(b"a"))
    # n = 1 in M = 2**18: L = 18 low bits (3 bytes, 6 pad bits), high vector 1 + 0 + 1 bits.
    expected = (
        bytes([1, 18, 1, 0x04, 0x03, 0x02, 0x01])  # version, size shift, k, seed LE
        + bytes([1, 0, 1, FULL, 1, 0])  # subjects, patterns, one key length: FULL 1 plain
        + (pos << 6).to_bytes(3, "big")
        + bytes([0x80, 0])  # high bit for high part 0; no detail records
    )
    assert f.to_bytes() == expected
    assert decode_image(expected).positions.tolist() == [pos]


@settings(max_examples=40, deadline=None)
@given(SUBS, st.integers(1, 3))
def test_bytes_round_trip_and_mutations(subs: list[Sub], k: int) -> None:
    f = BloomFilter(seed=3, num_hashes=k)
    for sub in subs:
        sub.add(f)
    data = f.to_bytes()
    replica = BloomFilter.from_bytes(data)
    assert replica.to_bytes() == data
    assert (replica.subject_count, replica.pattern_count) == (f.subject_count, f.pattern_count)
    assert (replica.prefix_mask, replica.detail_mask) == (f.prefix_mask, f.detail_mask)
    rng = random.Random(len(data))
    for _ in range(30):
        mutated = bytearray(data)
        mutated[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        for candidate in (bytes(mutated), data[: rng.randrange(len(data))], data + b"\x00"):
            try:
                BloomFilter.from_bytes(candidate)
            except BloomDecodeError:
                pass


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_decoding_garbage_raises_only_decode_errors(data: bytes) -> None:
    try:
        f = BloomFilter.from_bytes(data)
    except BloomDecodeError as exc:
        assert isinstance(exc, BloomError) and "offset" in str(exc)
    else:
        assert f.to_bytes() == data


def test_decode_rejects_specific_damage() -> None:
    f = BloomFilter()
    f.add_subject("a.b")
    f.add_pattern(compile_pattern("c.*.d", "rv"))
    data = f.to_bytes()
    cases = {
        "version": b"\x02" + data[1:],
        "shift": data[:1] + b"\x21" + data[2:],
        "hash count": data[:2] + b"\x00" + data[3:],
        "trailing": data + b"\x00",
        "truncated": data[:-1],
    }
    for name, bad in cases.items():
        with pytest.raises(BloomDecodeError, match="offset"):
            BloomFilter.from_bytes(bad)
        assert BloomFilter.from_bytes(data).count == 2, name
