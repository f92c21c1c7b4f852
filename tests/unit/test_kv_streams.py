"""The stream type's pure logic (kv/streams.py): id parsing as redis-server's
string2ull, listpack element sizes, the radix-tree node model, trims and the
entries-read estimate."""

from __future__ import annotations

import pytest

from raims_node.kv.errors import CommandError
from raims_node.kv.streams import (
    MAX_ID,
    NODE_MAX_ENTRIES,
    U64,
    Group,
    Stream,
    _rax_count,
    decr_id,
    elem_size,
    incr_id,
    parse_id,
    parse_interval,
    parse_xadd_id,
    string2ull,
)


@pytest.mark.parametrize(("raw", "value"), [
    (b"0", 0), (b"18446744073709551615", U64), (b"01", 1), (b"+8", 8), (b" 7", 7), (b"-01", U64),
    (b"-1", None), (b"", None), (b"18446744073709551616", None), (b"1x", None), (b"7 ", None), (b"+", None)])
def test_string2ull_is_redis_servers(raw: bytes, value: int | None) -> None:
    assert string2ull(raw) == value


def test_ids() -> None:
    assert parse_id(b"-") == (0, 0) and parse_id(b"+") == MAX_ID
    assert parse_id(b"5") == (5, 0) and parse_id(b"5", U64) == (5, U64) and parse_id(b"5-7") == (5, 7)
    for bad in (b"-5", b"5-", b"a-1", b"1-2-3", b"x" * 128):
        with pytest.raises(CommandError):
            parse_id(bad)
    with pytest.raises(CommandError):
        parse_id(b"+", strict=True)
    assert parse_xadd_id(b"5-*") == ((5, 0), False) and parse_xadd_id(b"5-3") == ((5, 3), True)
    assert parse_interval(b"(5-1", 0) == ((5, 1), True) and parse_interval(b"5", 9) == ((5, 9), False)
    assert incr_id((1, U64)) == (2, 0) and incr_id(MAX_ID) is None
    assert decr_id((2, 0)) == (1, U64) and decr_id((0, 0)) is None


@pytest.mark.parametrize(("value", "size"), [
    (b"1", 2), (b"127", 2), (b"128", 3), (b"-1", 3), (b"4095", 3), (b"4096", 4), (b"32768", 5),
    (b"8388608", 6), (b"2147483648", 10), (b"a", 3), (b"a" * 63, 65), (b"a" * 64, 67), (b"a" * 126, 130),
    (b"a" * 4096, 4103), (b"01", 4), (b"-0", 4)])
def test_listpack_element_sizes(value: bytes, size: int) -> None:
    assert elem_size(value) == size


def _filled(n: int, value: bytes = b"v") -> Stream:
    s = Stream()
    for i in range(1, n + 1):
        s.append((i, 0), [b"f", value])
    return s


def test_nodes_split_at_100_entries_and_4096_bytes() -> None:
    s = _filled(250)
    assert [n.live for n in s.nodes.values()] == [NODE_MAX_ENTRIES, NODE_MAX_ENTRIES, 50]
    big = _filled(10, b"x" * 1000)
    assert [n.live for n in big.nodes.values()] == [4, 4, 2]  # a node stops short of 4096 bytes


def test_trims_remove_whole_nodes_when_approximate() -> None:
    s = _filled(250)
    assert s.trim(120, None, True, 0) == 100 and len(s) == 150
    assert s.trim(120, None, False, 0) == 30 and len(s) == 120 and s.first_id == (131, 0)
    assert s.trim(None, (150, 0), True, 0) == 0  # the first node holds 200-0
    assert s.trim(None, (150, 0), False, 0) == 19 and s.first_id == (150, 0)
    assert s.trim(None, (201, 0), True, 0) == 51 and s.first_id == (201, 0)
    assert s.trim(0, None, True, 10) == 0  # LIMIT below a node's entries


def test_xdel_frees_a_node_left_empty_and_keeps_the_max_deleted_id() -> None:
    s = _filled(150)
    for i in range(101, 151):
        assert s.delete((i, 0))
    assert len(s.nodes) == 1 and s.max_deleted == (150, 0) and not s.delete((150, 0))
    assert s.last_id == (150, 0) and s.last_valid() == (100, 0)


def test_radix_tree_node_counts() -> None:
    key = bytes(16)
    assert _rax_count([key], 0) == 2
    two = [bytes(15) + b"\x01", bytes(15) + b"\x02"]
    assert _rax_count(two, 0) == 4  # compressed prefix, a branching node, two leaves
    assert Stream().radix_nodes() == 1


def test_entries_read_estimate_and_lag() -> None:
    s = _filled(5)
    g = Group((0, 0), -1)
    assert s.estimate_read((0, 0)) == 0 and s.lag(g) == 5
    assert s.estimate_read((5, 0)) == 5 and s.estimate_read((6, 0)) is None
    assert s.estimate_read((1, 0)) == 1 and s.estimate_read((3, 0)) is None
    s.delete((3, 0))
    assert s.has_tombstones((2, 0)) and not s.has_tombstones((4, 0))
    assert s.lag(Group((2, 0), 2)) is None and s.lag(Group((4, 0), 4)) == 1
