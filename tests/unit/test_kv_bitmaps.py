"""The pure logic of the bitmap commands and LCS (kv/bitmaps.py, bitfield.py, lcs.py)
against naive references, the node's size limits, and the map file's replay of them."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raims_node.kv import lcs as lcs_mod
from raims_node.kv import open_kv
from raims_node.kv.bitfield import FAIL, SAT, WRAP, get_field, overflowed, set_field
from raims_node.kv.bitmaps import bit_op, find_bit, parse_bit_offset, popcount, splice
from raims_node.kv.commands import Engine, KVClient
from raims_node.kv.errors import CommandError
from raims_node.kv.lcs import table_too_big, walk
from raims_node.kv.persist import init_map
from raims_node.kv.reply import Err
from raims_node.kv.store import KVStore
from raims_node.kv.strings import MAX_STRING


def bits_of(v: bytes) -> list[int]:
    return [(byte >> (7 - k)) & 1 for byte in v for k in range(8)]


def run(e: Engine, c: KVClient, *args: bytes) -> Any:
    return e.execute(c, list(args))


# ------------------------------------------------------------------ counting and searching

@settings(max_examples=300, deadline=None)
@given(v=st.binary(min_size=1, max_size=40), data=st.data())
def test_find_bit_and_popcount_match_a_bit_list(v: bytes, data: st.DataObject) -> None:
    bits = bits_of(v)
    sbit = data.draw(st.integers(0, len(bits) - 1))
    ebit = data.draw(st.integers(sbit, len(bits) - 1))
    for bit in (0, 1):
        want = next((p for p in range(sbit, ebit + 1) if bits[p] == bit), -1)
        assert find_bit(v, sbit, ebit, bit) == want
    lo = sbit >> 3
    hi = data.draw(st.integers(lo, len(v)))
    assert popcount(v, lo, hi) == sum(bits[lo * 8:hi * 8])


def test_search_and_count_cross_the_scan_chunks() -> None:
    """Offsets past numpy's 1 MiB scan chunks and unaligned 8-byte words."""
    v = bytearray(3 << 20)
    v[(2 << 20) + 5] = 0x10
    b = bytes(v)
    assert find_bit(b, 3, len(b) * 8 - 1, 1) == ((2 << 20) + 5) * 8 + 3
    ones = bytes(x ^ 0xFF for x in b)
    assert find_bit(ones, 9, len(b) * 8 - 2, 0) == ((2 << 20) + 5) * 8 + 3
    assert popcount(b, 3, len(b) - 1) == 1 and popcount(ones, 3, len(b) - 1) == (len(b) - 4) * 8 - 1


@settings(max_examples=200, deadline=None)
@given(sources=st.lists(st.binary(max_size=20), min_size=1, max_size=4),
       op=st.sampled_from([b"and", b"or", b"xor"]))
def test_bit_op_pads_shorter_sources_with_zeros(sources: list[bytes], op: bytes) -> None:
    n = max(map(len, sources))
    if not n:
        return
    padded = [s + bytes(n - len(s)) for s in sources]
    want = bytearray(padded[0])
    for s in padded[1:]:
        for k in range(n):
            want[k] = want[k] & s[k] if op == b"and" else want[k] | s[k] if op == b"or" else want[k] ^ s[k]
    assert bit_op(op, sources) == bytes(want)
    assert bit_op(b"not", sources[:1]) == bytes(x ^ 0xFF for x in sources[0])


@settings(max_examples=300, deadline=None)
@given(old=st.binary(max_size=20), lo=st.integers(0, 30), patch=st.binary(min_size=1, max_size=8),
       extra=st.integers(0, 10))
def test_splice_replaces_pads_and_cuts(old: bytes, lo: int, patch: bytes, extra: int) -> None:
    length = max(len(old), lo + 1) + extra
    want = bytearray(old + bytes(max(0, lo + len(patch) - len(old))))
    want[lo:lo + len(patch)] = patch
    want = want[:length] + bytes(max(0, length - len(want)))
    if length < len(old):
        return
    assert splice(old, lo, patch, length) == bytes(want)


def test_bit_offsets_are_redis_servers() -> None:
    assert parse_bit_offset(b"4294967295") == (1 << 32) - 1
    assert parse_bit_offset(b"#3", True, 16) == 48
    with pytest.raises(CommandError):  # `#` offsets are BITFIELD's only
        parse_bit_offset(b"#3")
    for bad in (b"4294967296", b"-1", b"01", b"#", b"x"):
        with pytest.raises(CommandError, match="bit offset is not an integer"):
            parse_bit_offset(bad, True, 8)
    with pytest.raises(CommandError):  # #n times the width, wrapped as redis-server's int64 is
        parse_bit_offset(b"#1152921504606846976", True, 8)


# ------------------------------------------------------------------ bitfields

@settings(max_examples=300, deadline=None)
@given(v=st.binary(max_size=12), offset=st.integers(0, 100), bits=st.integers(1, 64),
       value=st.integers(-(1 << 64), 1 << 64))
def test_fields_read_and_write_the_bits_they_name(v: bytes, offset: int, bits: int, value: int) -> None:
    padded = bits_of(v) + [0] * (offset + bits + 8)
    raw = int("".join(map(str, padded[offset:offset + bits])), 2)
    assert get_field(v, offset, bits, False) == raw
    assert get_field(v, offset, bits, True) == (raw - (1 << bits) if raw >> (bits - 1) else raw)
    buf = bytearray(v + bytes(max(0, (offset + bits + 7) // 8 - len(v))))
    before = bits_of(bytes(buf))
    set_field(buf, offset, bits, value)
    after = bits_of(bytes(buf))
    assert get_field(buf, offset, bits, False) == value & ((1 << bits) - 1)
    assert after[:offset] == before[:offset] and after[offset + bits:] == before[offset + bits:]


def _c_signed(value: int, incr: int, bits: int, mode: int) -> tuple[bool, int]:
    """redis-server's checkSignedBitfieldOverflow, in its int64 arithmetic."""
    mx = (1 << 63) - 1 if bits == 64 else (1 << (bits - 1)) - 1
    mn = -mx - 1
    total = value + incr
    if mn <= total <= mx:
        return False, total
    if mode == SAT:
        return True, mx if total > mx else mn
    c = total & ((1 << 64) - 1)
    if bits < 64:
        c = c | (((1 << 64) - 1) << bits) if c >> (bits - 1) & 1 else c & ((1 << bits) - 1)
        c &= (1 << 64) - 1
    return True, c - (1 << 64) if c >> 63 else c


@settings(max_examples=300, deadline=None)
@given(bits=st.integers(1, 64), old=st.integers(-(1 << 63), (1 << 63) - 1),
       incr=st.integers(-(1 << 63), (1 << 63) - 1), mode=st.sampled_from([WRAP, SAT, FAIL]))
def test_signed_overflow_is_redis_servers(bits: int, old: int, incr: int, mode: int) -> None:
    old = get_field(old.to_bytes(8, "big", signed=True), 64 - bits, bits, True)  # a value of the type
    assert overflowed(old + incr, bits, True, mode) == _c_signed(old, incr, bits, mode)


def test_unsigned_overflow_saturates_and_wraps() -> None:
    assert overflowed(256, 8, False, SAT) == (True, 255)
    assert overflowed(-1, 8, False, SAT) == (True, 0)
    assert overflowed(-1, 8, False, WRAP) == (True, 255)
    assert overflowed((1 << 64) - 1, 63, False, SAT) == (True, (1 << 63) - 1)  # SET u63 -1 SAT
    assert overflowed(5, 3, False, FAIL) == (False, 5)


# ------------------------------------------------------------------ LCS

def _redis_lcs(a: bytes, b: bytes, min_len: int, with_len: bool) -> tuple[bytes, list[Any], int]:
    """redis-server's lcsCommand walk over its full table (the reference)."""
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            table[i][j] = (table[i - 1][j - 1] + 1 if a[i - 1] == b[j - 1]
                           else max(table[i - 1][j], table[i][j - 1]))
    out, ranges = bytearray(), []
    i, j = len(a), len(b)
    start = len(a)
    aend = bstart = bend = 0
    while i > 0 and j > 0:
        emit = False
        if a[i - 1] == b[j - 1]:
            out.append(a[i - 1])
            if start == len(a):
                start, aend, bstart, bend = i - 1, i - 1, j - 1, j - 1
            elif start == i and bstart == j:
                start, bstart = start - 1, bstart - 1
            else:
                emit = True
            if start == 0 or bstart == 0:
                emit = True
            i, j = i - 1, j - 1
        else:
            if table[i - 1][j] > table[i][j - 1]:
                i -= 1
            else:
                j -= 1
            if start != len(a):
                emit = True
        n = aend - start + 1
        if emit:
            if min_len == 0 or n >= min_len:
                ranges.append([[start, aend], [bstart, bend], n] if with_len else [[start, aend], [bstart, bend]])
            start = len(a)
    return bytes(reversed(out)), ranges, table[len(a)][len(b)]


@settings(max_examples=300, deadline=None)
@given(a=st.binary(max_size=60).map(lambda s: bytes(97 + x % 3 for x in s)),
       b=st.binary(max_size=60).map(lambda s: bytes(97 + x % 3 for x in s)),
       min_len=st.integers(0, 3), with_len=st.booleans())
def test_lcs_walk_is_redis_servers(a: bytes, b: bytes, min_len: int, with_len: bool) -> None:
    assert walk(a, b, True, min_len, with_len) == _redis_lcs(a, b, min_len, with_len)


def test_lcs_walk_runs_across_numpy_blocks() -> None:
    """Long runs along the longer string (vector scans, several 64 Ki-column blocks)."""
    rng = random.Random(3)
    a = bytes(rng.choice(b"ab") for _ in range(6))
    b = bytes(rng.choice(b"abcdefgh") for _ in range(150_000))
    got = walk(a, b, True, 0, True)
    assert got[2] == len(walk(a, b, False, 0, False)[0])
    assert walk(b[-300:], a, True, 0, True) == _redis_lcs(b[-300:], a, 0, True)
    assert got == _redis_lcs(a, b, 0, True)


def test_lcs_bound_is_redis_servers_table_of_4_byte_cells() -> None:
    limit = lcs_mod.MAX_TABLE_BYTES // 4
    assert not table_too_big(11584, 11584) and table_too_big(11585, 11585)
    assert not table_too_big(0, limit - 1) and table_too_big(1, limit // 2)
    e, c = Engine(KVStore()), KVClient()
    run(e, c, b"MSET", b"a", b"x" * 11585, b"b", b"y" * 11585)
    for opts in ([], [b"LEN"], [b"IDX"]):
        assert run(e, c, b"LCS", b"a", b"b", *opts) == Err(lcs_mod.TOO_BIG)


# ------------------------------------------------------------------ the node's limits and the map

def test_strings_grow_to_max_string_at_most() -> None:
    e, c = Engine(KVStore()), KVClient()
    too_large = Err(b"ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    last = b"%d" % (MAX_STRING * 8 - 1)
    assert run(e, c, b"SETBIT", b"k", b"%d" % (MAX_STRING * 8), b"1") == too_large
    assert run(e, c, b"BITFIELD", b"k", b"SET", b"u8", b"%d" % (MAX_STRING * 8 - 7), b"1") == too_large
    assert e.store.lookup(0, b"k") is None
    assert run(e, c, b"SETBIT", b"k", last, b"1") == 0
    assert len(e.store.lookup(0, b"k")) == MAX_STRING
    assert run(e, c, b"BITCOUNT", b"k") == 1 and run(e, c, b"BITPOS", b"k", b"1") == MAX_STRING * 8 - 1
    assert run(e, c, b"GETBIT", b"k", b"4294967295") == 0


def test_bit_writes_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "map"
    init_map(path)
    e, mf = open_kv(str(path))
    assert mf is not None
    c = KVClient()
    run(e, c, b"SETBIT", b"b", b"100", b"1")
    run(e, c, b"SET", b"s", b"foobar")
    run(e, c, b"BITOP", b"NOT", b"n", b"s")
    run(e, c, b"BITFIELD", b"f", b"SET", b"i8", b"#1", b"-3", b"INCRBY", b"u4", b"0", b"9")
    run(e, c, b"BITFIELD", b"g", b"OVERFLOW", b"FAIL", b"SET", b"u2", b"20", b"9")
    want = {k: e.store.lookup(0, k) for k in (b"b", b"s", b"n", b"f", b"g")}
    mf.close()
    e2, mf2 = open_kv(str(path))
    assert mf2 is not None
    assert {k: e2.store.lookup(0, k) for k in want} == want
    assert want[b"g"] == b"\0\0\0"
    mf2.close()
