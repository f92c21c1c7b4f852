"""The pure parts of kv/hll.py and kv/sort.py: the hash, the encodings, the sparse
opcode changes, the estimator and strtod's reading of scores."""

from __future__ import annotations

import math
import random

import pytest

from raims_node.kv.commands import Engine, KVClient
from raims_node.kv.hll import (
    DENSE_SIZE,
    HLL,
    REGISTERS,
    SPARSE_MAX_BYTES,
    VAL,
    XZERO,
    ZERO,
    decode_sparse,
    encode_sparse,
    estimate,
    is_hll,
    murmur64a,
    pack_dense,
    pat_len,
    unpack_dense,
)
from raims_node.kv.sort import strtod_score
from raims_node.kv.store import KVStore

# values redis-server 7.0 stored for `PFADD k <element>` on a new key
_HEAD = b"HYLL\x01\x00\x00\x00" + b"\x00" * 7 + b"\x80"
REDIS_VALUES = {
    b"hello": _HEAD + b"c\xff\x80[\xfe",
    b"": _HEAD + b"W1\x84h\xcc",
    b"abcdefghijkl": _HEAD + b"e\xde\x90Z\x1f",
}


def test_single_elements_match_redis_server_bytes() -> None:
    for element, value in REDIS_VALUES.items():
        h = HLL.empty()
        assert h.set(*pat_len(element)) == 1
        h.invalidate()
        assert h.value() == value


def test_murmur_is_64_bit_and_seeded() -> None:
    assert murmur64a(b"hello") != murmur64a(b"hello", seed=0)
    assert all(0 <= murmur64a(bytes([i]) * i) < 1 << 64 for i in range(40))
    assert pat_len(b"hello") == (9216, 1)


def test_empty_hll_is_sparse_and_counts_zero() -> None:
    h = HLL.empty()
    assert h.value() == b"HYLL\x01" + bytes(11) + b"\x7f\xff"
    assert h.cached() == 0
    assert estimate(h.histogram()) == 0
    assert is_hll(h.value())


def test_dense_pack_round_trips() -> None:
    for seed in range(20):
        body = random.Random(seed).randbytes(12288)
        regs = unpack_dense(body)
        assert len(regs) == REGISTERS and max(regs) < 64
        assert pack_dense(regs) == body


def test_sparse_opcodes_round_trip() -> None:
    ops = [(ZERO, 0, 64), (VAL, 32, 4), (XZERO, 0, 16384), (VAL, 1, 1), (ZERO, 0, 1)]
    assert decode_sparse(encode_sparse(ops)) == ops
    assert decode_sparse(b"\x7f") is None  # an XZERO cut short


def test_equal_neighbours_merge_within_four_registers() -> None:
    h = HLL.empty()
    for i in (0, 2, 1, 3):
        h.set(i, 5)
    assert h.ops[0] == (VAL, 5, 4)
    h.set(4, 5)
    assert h.ops[:2] == [(VAL, 5, 4), (VAL, 5, 1)]
    h.set(1, 6)  # split out of a run: VAL 5 x1, VAL 6 x1, VAL 5 x2, then merged with its neighbour
    assert h.ops[:4] == [(VAL, 5, 1), (VAL, 6, 1), (VAL, 5, 3), (XZERO, 0, 16379)]
    assert h.set(1, 6) == 0 and h.set(1, 2) == 0


def test_promotion_to_dense() -> None:
    h = HLL.empty()
    h.set(10, 33)  # past the sparse value limit
    assert h.regs is not None and h.regs[10] == 33 and len(h.value()) == DENSE_SIZE
    h2 = HLL.empty()
    rng = random.Random(1)
    while h2.regs is None:
        h2.set(rng.randrange(REGISTERS), rng.randint(1, 32))
        assert h2.regs is not None or h2.size <= SPARSE_MAX_BYTES
    assert len(h2.value()) == DENSE_SIZE


def test_estimate_is_close_and_monotone_in_practice() -> None:
    h = HLL.empty()
    counts = []
    for n in range(1, 20001):
        h.set(*pat_len(b"%d" % n))
        if n in (10, 100, 1000, 10000, 20000):
            counts.append((n, estimate(h.histogram())))
    for n, est in counts:
        assert abs(est - n) <= max(2, n * 0.03), (n, est)


def test_engine_pfadd_reply_and_wrongtype() -> None:
    e = Engine(KVStore())
    c = KVClient()
    assert e.execute(c, [b"PFADD", b"k"]) == 1
    assert e.execute(c, [b"PFADD", b"k"]) == 0
    assert e.execute(c, [b"PFADD", b"k", b"a"]) == 1
    assert e.execute(c, [b"PFCOUNT", b"k"]) == 1
    e.execute(c, [b"SET", b"s", b"x" * 20])
    assert e.execute(c, [b"PFADD", b"s", b"a"]).text.startswith(b"WRONGTYPE Key is not a valid HyperLogLog")


def test_strtod_scores() -> None:
    assert strtod_score(b"") == 0.0
    assert strtod_score(b" 7") == 7.0
    assert strtod_score(b"0x10") == 16.0
    assert strtod_score(b"-inf") == -math.inf
    assert strtod_score(b"1e3") == 1000.0
    assert strtod_score(b"12\x00junk") == 12.0
    for bad in (b"nan", b"1 ", b"abc", b"1e999", b"1e-310", b" ", b"1_0", b"0x"):
        assert strtod_score(bad) is None, bad


def test_long_sparse_string_is_corrupted_without_decoding() -> None:
    e = Engine(KVStore())
    c = KVClient()
    e.execute(c, [b"SET", b"k", _HEAD + b"\x7f\xff"])
    assert e.execute(c, [b"SETRANGE", b"k", b"40000", b"\x00"]) == 40001
    for cmd in ([b"PFADD", b"k", b"a"], [b"PFCOUNT", b"k"], [b"PFCOUNT", b"k", b"x"], [b"PFMERGE", b"d", b"k"]):
        assert e.execute(c, cmd).text == b"INVALIDOBJ Corrupted HLL object detected"


def test_sort_reply_size_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import raims_node.kv.sort as sort_mod

    monkeypatch.setattr(sort_mod, "MAX_REPLY", 10)
    e = Engine(KVStore())
    c = KVClient()
    e.execute(c, [b"RPUSH", b"l", *(b"%d" % i for i in range(6))])
    assert len(e.execute(c, [b"SORT", b"l", b"GET", b"#"])) == 6
    err = e.execute(c, [b"SORT", b"l", b"GET", b"#", b"GET", b"x_*", b"STORE", b"d"])
    assert err.text == b"ERR SORT reply of 12 entries exceeds the map's limit of 10"
    assert e.execute(c, [b"EXISTS", b"d"]) == 0
    assert len(e.execute(c, [b"SORT", b"l", b"LIMIT", b"0", b"5", b"GET", b"#", b"GET", b"x_*"])) == 10
