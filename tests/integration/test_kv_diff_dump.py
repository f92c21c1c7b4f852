"""DUMP and RESTORE against Debian's redis-server 7.0.15 (kv_diff.py): payloads cross in
both directions. Each value is built on both servers; redis-server's DUMP is RESTOREd on
both (redis-server's own reading of it is the reference for the node's), then the
node's DUMP likewise; the copies are compared with the type's read commands. Errors,
TTL handling and keyspace notifications are compared byte for byte."""

from __future__ import annotations

import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raims_node.kv.rdb import crc64, enc_len, frame
from tests.integration.kv_diff import Pair, RawClient, cmds, parse
from tests.unit.test_kv_dump import STREAM as STREAM_PAYLOAD


def _bulk(frame_: bytes) -> bytes:
    v = parse(frame_)
    assert isinstance(v, bytes), frame_
    return v


def _cross(pair: Pair, key: bytes, show: list[list[bytes]]) -> tuple[bytes, bytes]:
    """RESTORE redis-server's DUMP of `key`, then the node's, on both servers (as key:r
    and key:u) and compare the copies with `show` (KEY stands for the copy's name). The
    two payloads."""
    ref_payload = _bulk(pair.ref.call([b"DUMP", key]))
    us_payload = _bulk(pair.us.call([b"DUMP", key]))
    for suffix, payload in ((b":r", ref_payload), (b":u", us_payload)):
        copy = key + suffix
        pair.check([[b"RESTORE", copy, b"0", payload, b"REPLACE"]])
        for cmd in show:
            _check(pair, [copy if a == b"KEY" else a for a in cmd])
    return ref_payload, us_payload


def _check(pair: Pair, cmd: list[bytes]) -> None:
    """pair.check, HGETALL's pairs compared in any order (a hash-table hash has none)."""
    if cmd[0] != b"HGETALL":
        pair.check([cmd])
        return
    ref, us = (parse(c.call(cmd)) for c in (pair.ref, pair.us))
    pairs = [sorted(zip(v[1][0::2], v[1][1::2], strict=True)) for v in (ref, us)]
    assert pairs[0] == pairs[1] and ref[0] == us[0]


def _both(pair: Pair, text: str) -> None:
    pair.check(cmds(text))


SHOW = {
    "string": cmds("GET KEY\nSTRLEN KEY\nTYPE KEY"),
    "list": cmds("LRANGE KEY 0 -1\nLLEN KEY\nTYPE KEY"),
    "set": cmds("SMEMBERS KEY\nSCARD KEY\nTYPE KEY"),
    "hash": cmds("HGETALL KEY\nHLEN KEY\nTYPE KEY"),  # HGETALL compared as pairs (_check)
    "zset": cmds("ZRANGE KEY 0 -1 WITHSCORES\nZCARD KEY\nTYPE KEY"),
    "stream": cmds("XRANGE KEY - +\nXINFO STREAM KEY FULL\nXINFO GROUPS KEY\nTYPE KEY"),
}


@pytest.mark.parametrize("value", [
    b"hello", b"", b"0", b"-1", b"127", b"128", b"-128", b"-129", b"32767", b"-32769", b"2147483647",
    b"2147483648", b"-2147483648", b"-2147483649", b"9223372036854775807", b"-9223372036854775808",
    b"007", b"+5", b"-0", b"1.5", b"x" * 20, b"x" * 21, b"abcabcabcabcabcabcabcabcabc" * 50,
    bytes(range(256)) * 8, b"y" * 70000])
def test_strings_cross(pair: Pair, value: bytes) -> None:
    pair.check([[b"SET", b"s", value]])
    ref, us = _cross(pair, b"s", SHOW["string"])
    if len(value) <= 20:  # longer ones redis-server compresses with LZF, the node not
        assert us == ref


def test_hll_and_bitmap_cross(pair: Pair) -> None:
    _both(pair, "PFADD hll a b c d e f g\nSETBIT bm 1000 1\nSETBIT bm 7 1")
    pair.check([[b"PFADD", b"big", *[b"m%d" % i for i in range(3000)]]])
    for key in (b"hll", b"bm", b"big"):
        _cross(pair, key, [*SHOW["string"], [b"PFCOUNT", b"KEY"]] if key != b"bm" else SHOW["string"])


@pytest.mark.parametrize("n", [1, 5, 200, 1000])
def test_lists_cross(pair: Pair, n: int) -> None:
    items = [b"%d" % i if i % 3 else b"item-%d" % i for i in range(n)]
    items += [b"-70000", b"4294967296", b"-4097", b"x" * 5000] if n > 1 else []
    pair.check([[b"RPUSH", b"l", *items]])
    ref, us = _cross(pair, b"l", SHOW["list"])
    if n == 1:
        assert us == ref  # one small listpack node, as redis-server writes it


def test_big_list_element_cross(pair: Pair) -> None:
    pair.check([[b"RPUSH", b"l", b"a", b"z" * 100000, b"b"]])
    _cross(pair, b"l", SHOW["list"])


@pytest.mark.parametrize("members", [
    [b"1", b"2", b"3"], [b"-5", b"70000", b"-9223372036854775808"], [b"a", b"b", b"1"],
    [b"%d" % i for i in range(600)], [b"m%d" % i for i in range(300)], [b"01", b"1"]])
def test_sets_cross(pair: Pair, members: list[bytes]) -> None:
    pair.check([[b"SADD", b"s", *members]])
    _cross(pair, b"s", SHOW["set"])


@pytest.mark.parametrize("n,width", [(1, 1), (10, 10), (600, 3), (5, 100)])
def test_hashes_cross(pair: Pair, n: int, width: int) -> None:
    flat = [x for i in range(n) for x in (b"f%d" % i, (b"%d" % i) * width)]
    pair.check([[b"HSET", b"h", *flat]])
    _cross(pair, b"h", SHOW["hash"])


@pytest.mark.parametrize("n", [1, 10, 200])
def test_zsets_cross(pair: Pair, n: int) -> None:
    flat = [x for i in range(n) for x in (b"%r" % (i / 7 - 3), b"m%d" % i)]
    flat += [b"inf", b"top", b"-inf", b"bottom", b"0", b"zero", b"1e300", b"huge"]
    pair.check([[b"ZADD", b"z", *flat]])
    _cross(pair, b"z", SHOW["zset"])
    pair.check([[b"ZADD", b"long", b"1", b"x" * 100, b"2", b"y"]])
    _cross(pair, b"long", SHOW["zset"])


def test_geo_cross(pair: Pair) -> None:
    _both(pair, "GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania")
    _cross(pair, b"g", [*SHOW["zset"], *cmds("GEOPOS KEY Palermo Catania\nGEODIST KEY Palermo Catania")])


STREAM = """
XADD x 1-1 a 1 b 2
XADD x 1-2 a 3 b 4
XADD x 2-0 c 5
XADD x 2-5 a 6 b 7
XADD x 3-0 a 1 b 2 c 3
XADD x 18446744073709551615-0 a 1 b big-value-here
XDEL x 1-2
XGROUP CREATE x g1 0
XGROUP CREATE x g2 2-0
XGROUP CREATE x g3 $
XGROUP CREATECONSUMER x g1 carol
"""


def test_streams_cross(pair: Pair) -> None:
    _both(pair, STREAM)
    # the reads stamp delivery and seen times: they differ between the servers, not in the copies
    for c in (pair.ref, pair.us):
        c.call([b"XREADGROUP", b"GROUP", b"g1", b"alice", b"COUNT", b"2", b"STREAMS", b"x", b">"])
        c.call([b"XREADGROUP", b"GROUP", b"g1", b"bob", b"COUNT", b"1", b"STREAMS", b"x", b">"])
        c.call([b"XCLAIM", b"x", b"g1", b"bob", b"0", b"1-1"])
    _cross(pair, b"x", SHOW["stream"])


@pytest.mark.parametrize("n", [150, 700])
def test_big_streams_cross(pair: Pair, n: int) -> None:
    for i in range(1, n + 1):
        flat = [b"f", b"%d" % i, b"g", b"v" * (i % 50)] if i % 11 else [b"other", b"%d" % i]
        pair.check([[b"XADD", b"x", b"%d-%d" % (i, i % 4), *flat]])
    _both(pair, "XDEL x 3-3 150-2 100-0\nXTRIM x MINID 20\nXGROUP CREATE x g 50-0 ENTRIESREAD 10")
    _cross(pair, b"x", [*SHOW["stream"], *cmds("XLEN KEY\nXADD KEY 99999-1 new 1\nXTRIM KEY MAXLEN ~ 10\nXLEN KEY")])


def test_empty_stream_cross(pair: Pair) -> None:
    _both(pair, "XADD x 5-5 a 1\nXDEL x 5-5\nXADD e 1-1 a 1\nXTRIM e MAXLEN 0\nXGROUP CREATE e g $")
    _cross(pair, b"x", SHOW["stream"])
    _cross(pair, b"e", SHOW["stream"])


_elem = st.one_of(st.integers(-(1 << 63), (1 << 63) - 1).map(lambda v: b"%d" % v),
                  st.integers(-200, 200).map(lambda v: b"%d" % v), st.binary(max_size=40),
                  st.sampled_from([b"x" * 70, b"abc" * 30, b"007", b"-0", b" 1"]))


def _build(kind: str, items: list[bytes]) -> list[list[bytes]]:
    if kind == "string":
        return [[b"SET", b"k", b"".join(items)]]
    if kind == "list":
        return [[b"RPUSH", b"k", *items]]
    if kind == "set":
        return [[b"SADD", b"k", *items]]
    if kind == "hash":
        return [[b"HSET", b"k", *[x for i, v in enumerate(items) for x in (v, b"%d" % i)]]]
    if kind == "zset":
        return [[b"ZADD", b"k", *[x for i, v in enumerate(items) for x in (b"%r" % (i / 7 - 1), v)]]]
    return [[b"XADD", b"k", b"%d-%d" % (i // 3 + 1, i % 3), b"f", v] for i, v in enumerate(items)]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(sorted(SHOW)), st.lists(_elem, min_size=1, max_size=150))
def test_generated_values_cross(pair: Pair, kind: str, items: list[bytes]) -> None:
    pair.reset()
    pair.check(_build(kind, items))
    _cross(pair, b"k", SHOW[kind])


def _s(b: bytes) -> bytes:
    return enc_len(len(b)) + b


def _ziplist(items: list[bytes | int]) -> bytes:
    """A ziplist (the list, hash and sorted set blob of RDB before 7.0) of small items."""
    body, prev, last = b"", 0, 10
    for it in items:
        if isinstance(it, int):
            enc = bytes([0xF1 + it]) if 0 <= it <= 12 else (
                b"\xfe" + struct.pack("<b", it) if -128 <= it <= 127 else b"\xc0" + struct.pack("<h", it))
        else:
            enc = bytes([len(it)]) + it
        entry = bytes([prev]) + enc
        last, body, prev = 10 + len(body), body + entry, len(entry)
    return struct.pack("<IIH", 10 + len(body) + 1, last, len(items)) + body + b"\xff"


# the forms redis-server 7.0 no longer writes but still reads
OLD_FORMS = {
    b"list": b"\x01" + enc_len(3) + _s(b"a") + _s(b"b") + _s(b"12"),
    b"list-ziplist": b"\x0a" + _s(_ziplist([b"a", 5, -300, b"xyz", 100, 12, 13, -1])),
    b"quicklist": b"\x0e" + enc_len(3) + _s(_ziplist([b"a", 1])) + _s(_ziplist([])) + _s(_ziplist([b"b", 2000])),
    b"zipmap": b"\x09" + _s(b"\x02\x01f\x01\x00v\x01g\x02\x01xy\x00\xff"),
    b"hash-ziplist": b"\x0d" + _s(_ziplist([b"f", b"v", b"n", 7])),
    b"zset-ziplist": b"\x0c" + _s(_ziplist([b"c", -3, b"a", 1, b"b", b"2.5"])),
    b"zset": b"\x03" + enc_len(3) + _s(b"a") + b"\x031.5" + _s(b"b") + b"\xfe" + _s(b"c") + b"\xff",
    b"zset-nan": b"\x03" + enc_len(1) + _s(b"a") + b"\xfd",
    b"zset-text": b"\x03" + enc_len(1) + _s(b"a") + b"\x03abc",
    b"set-ints": b"\x02" + enc_len(2) + _s(b"1") + _s(b"x"),
    # redis-server's STREAM_LISTPACKS_2 DUMP less the 7.0 fields: STREAM_LISTPACKS (6.x)
    b"stream-v1": b"\x0f" + STREAM_PAYLOAD[1:-10].replace(b"\x02\x01\x02\x01\x01\x00\x00\x02\x01\x01g\x01\x01\x01",
                                                b"\x02\x01\x02\x01\x01g\x01\x01"),
}


@pytest.mark.parametrize("key", sorted(OLD_FORMS))
def test_old_forms(pair: Pair, key: bytes) -> None:
    pair.check([[b"RESTORE", key, b"0", frame(OLD_FORMS[key])], [b"TYPE", key]])
    kind = parse(pair.ref.call([b"TYPE", key]))[1].decode()
    if kind in SHOW:
        for cmd in SHOW[kind]:
            _check(pair, [key if a == b"KEY" else a for a in cmd])


RESTORE_ERRORS = """
DUMP
DUMP a b
DUMP nosuch
RESTORE
RESTORE k
RESTORE k 0
SET k v
SET dst v
"""


def test_restore_errors(pair: Pair) -> None:
    _both(pair, RESTORE_ERRORS)
    p = _bulk(pair.ref.call([b"DUMP", b"k"]))
    bad_crc = p[:-1] + bytes([p[-1] ^ 1])
    v11 = p[:-10] + b"\x0b\x00"  # RDB version 11, a good checksum
    v11 += struct.pack("<Q", crc64(v11))
    run = [
        [b"RESTORE", b"dst", b"0", p],
        [b"RESTORE", b"new", b"0", p, b"BOGUS"],
        [b"RESTORE", b"new", b"0", p, b"IDLETIME"],
        [b"RESTORE", b"new", b"0", p, b"IDLETIME", b"-1"],
        [b"RESTORE", b"new", b"0", p, b"IDLETIME", b"abc"],
        [b"RESTORE", b"new", b"0", p, b"FREQ", b"256"],
        [b"RESTORE", b"new", b"0", p, b"FREQ", b"-1"],
        [b"RESTORE", b"new", b"0", p, b"FREQ", b"x"],
        [b"RESTORE", b"new", b"0", p, b"FREQ"],
        [b"RESTORE", b"new", b"0", p, b"FREQ", b"5", b"IDLETIME", b"5"],
        [b"RESTORE", b"new", b"0", p, b"IDLETIME", b"5", b"FREQ", b"5"],
        [b"RESTORE", b"dst", b"0", p, b"BOGUS"],
        [b"RESTORE", b"dst", b"x", p],
        [b"RESTORE", b"new", b"x", p],
        [b"RESTORE", b"new", b"-1", p],
        [b"RESTORE", b"new", b"0", b"short"],
        [b"RESTORE", b"new", b"0", b""],
        [b"RESTORE", b"new", b"0", bad_crc],
        [b"RESTORE", b"new", b"0", v11],
        [b"RESTORE", b"new", b"0", b"x" * 40],
        [b"EXISTS", b"new"],
        [b"RESTORE", b"new", b"0", p, b"IDLETIME", b"5", b"IDLETIME", b"7", b"replace", b"absttl"],
        [b"RESTORE", b"new2", b"0", p, b"FREQ", b"255", b"FREQ", b"0"],
        [b"RESTORE", b"dst", b"0", p, b"REPLACE"],
        [b"GET", b"dst"],
        [b"SET", b"old", b"x", b"PX", b"1"],
    ]
    pair.check(run)
    time.sleep(0.01)  # "old" is past its deadline: RESTORE over it needs no REPLACE
    pair.check([[b"RESTORE", b"old", b"0", p], [b"GET", b"old"]])


# payloads both servers must refuse: the value part, framed with a good checksum
BAD_DATA = [
    b"", b"\x08", b"\x07", b"\x06" + b"\x00" * 9, b"\xc8", b"\x00", b"\x00\x05abc", b"\x00\xc4", b"\x00\xc3\x05",
    b"\x00\x80\xff\xff\xff\xff", b"\x00\xbf", b"\x02\x00", b"\x04\x00", b"\x05\x00", b"\x12\x00",
    b"\x05\x01\x01a" + b"\x00" * 6 + b"\xf8\x7f", b"\x02\x02\x01a\x01a", b"\x04\x02\x01a\x01b\x01a\x01c",
    b"\x05\x02\x01a" + b"\x00" * 8 + b"\x01a" + b"\x00" * 8, b"\x12\x01\x03\x01a", b"\x0b\x00",
    b"\x00\xc3\x02\x05\x00a", b"\x13\x00\x00", b"\x13\x01\x01a\x00",
]


def test_restore_bad_data(pair: Pair) -> None:
    for body in BAD_DATA:
        pair.check([[b"RESTORE", b"k", b"0", frame(body)], [b"EXISTS", b"k"]])


def test_restore_ttls(pair: Pair) -> None:
    _both(pair, "SET k v\nRPUSH l a b")
    p = _bulk(pair.ref.call([b"DUMP", b"k"]))
    lp = _bulk(pair.ref.call([b"DUMP", b"l"]))
    future = b"%d" % (int(time.time() * 1000) + 3_600_000)
    pair.check([
        [b"RESTORE", b"a", b"100000", p], [b"TTL", b"a"],
        [b"RESTORE", b"b", future, p, b"ABSTTL"], [b"PEXPIRETIME", b"b"],
        [b"RESTORE", b"c", b"1", p, b"ABSTTL"], [b"EXISTS", b"c"],
        [b"RESTORE", b"k", b"1", lp, b"ABSTTL", b"REPLACE"], [b"EXISTS", b"k"],
        [b"RESTORE", b"d", b"9223372036854775807", p], [b"EXISTS", b"d"],
        [b"RESTORE", b"e", b"9223372036854775807", p, b"ABSTTL"], [b"PEXPIRETIME", b"e"],
        [b"RESTORE", b"f", b"0", lp, b"ABSTTL"], [b"TTL", b"f"], [b"LRANGE", b"f", b"0", b"-1"],
        [b"RESTORE", b"a", b"0", lp, b"REPLACE"], [b"TTL", b"a"], [b"TYPE", b"a"],
    ])


def _events(c: RawClient, upto: bytes) -> list[bytes]:
    out: list[bytes] = []
    for _ in range(100):
        msg = parse(c.read())
        assert isinstance(msg, tuple)
        items = msg[1]
        out.append(b"%s %s" % (items[2], items[3]))
        if items[3] == upto:
            return out
    raise AssertionError(f"no {upto!r} event in {out!r}")


def test_restore_notifications(servers: tuple[int, int]) -> None:
    pair = Pair(servers[0], servers[1], 2)
    subs = [RawClient(port) for port in servers]
    try:
        pair.reset()
        _both(pair, "CONFIG SET notify-keyspace-events KEA\nSET k v\nSET gone v")
        for s in subs:
            s.call([b"PSUBSCRIBE", b"__keyevent@0__:*"])
        p = _bulk(pair.ref.call([b"DUMP", b"k"]))
        pair.check([[b"RESTORE", b"n", b"0", p], [b"RESTORE", b"n", b"5000", p, b"REPLACE"],
                    [b"RESTORE", b"gone", b"1", p, b"REPLACE", b"ABSTTL"], [b"RESTORE", b"n", b"0", p],
                    [b"RESTORE", b"x", b"1", p, b"ABSTTL"], [b"SET", b"marker", b"1"]])
        ref, us = (_events(s, b"marker") for s in subs)
        assert us == ref
    finally:
        for s in subs:
            s.close()
        pair.check([[b"CONFIG", b"SET", b"notify-keyspace-events", b""]])
        pair.close()
