"""PFADD / PFCOUNT / PFMERGE and SORT / SORT_RO of the node's map against Debian's
redis-server: the same commands to both, replies compared byte for byte in RESP2 and
RESP3 (kv_diff.py), GET of the HyperLogLog strings included (sparse and dense)."""

from __future__ import annotations

import functools
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.kv_diff import Pair, RawClient, cmds


def _b(*args: object) -> list[bytes]:
    return [a if isinstance(a, bytes) else str(a).encode() for a in args]


HLL_BASICS = """
PFADD h
GET h
PFCOUNT h
GET h
PFADD h a b c d
PFADD h a b
PFCOUNT h
GET h
PFADD h a
PFCOUNT h
PFADD n
PFADD n
PFCOUNT n nosuch
PFCOUNT nosuch
PFCOUNT nosuch other
TYPE h
STRLEN h
PFADD
PFCOUNT
PFMERGE
PFADD x1 1 2 3
PFADD x2 3 4 5 6
PFMERGE m x1 x2
GET m
PFCOUNT m
PFCOUNT x1 x2
PFCOUNT x1 x2 nosuch
PFMERGE m
GET m
PFMERGE x1 x1
PFMERGE empty
GET empty
PFMERGE empty2 nosuch
PFCOUNT empty2
SET s hello
PFADD s a
PFCOUNT s
PFCOUNT s h
PFMERGE s h
PFMERGE m s
SET short HYLL
PFADD short a
SET i 123456789012345678
PFCOUNT i
LPUSH l a
PFADD l a
PFCOUNT l
PFCOUNT h l
PFMERGE l h
PFMERGE m l
EXPIRE x2 1000
PFADD x2 zz
TTL x2
PFMERGE x2 x1
TTL x2
COPY h hcopy
PFCOUNT hcopy
RENAME hcopy h2
PFCOUNT h2
OBJECT ENCODING h
OBJECT ENCODING m
OBJECT ENCODING empty
SCAN 0 TYPE string COUNT 1000
"""

SORT_BASICS = """
RPUSH l 3 1 2 10 -1 2.5
SORT l
SORT l DESC
SORT l ASC
SORT l LIMIT 1 2
SORT l LIMIT -5 2
SORT l LIMIT 2 -1
SORT l LIMIT 10 3
SORT l LIMIT 0 0
SORT l LIMIT 1
SORT l LIMIT a 1
SORT l LIMIT 1 b
SORT l ALPHA
SORT l ALPHA DESC LIMIT 0 3
SORT l DESC ASC
SORT l foo
SORT l STORE
SORT l BY
SORT l GET
SORT nosuch
SORT nosuch STORE dst
SORT nosuch LIMIT 0 1 GET # BY w_*
RPUSH words banana apple Cherry apple2
SORT words
SORT words ALPHA
SORT words ALPHA DESC
SORT words LIMIT 0 1
SET s v
SORT s
SORT s BY nosort
HSET h f 1
SORT h
SORT l STORE out
LRANGE out 0 -1
TYPE out
SORT l STORE out LIMIT 1 2 DESC
LRANGE out 0 -1
SET dst x
EXPIRE dst 1000
SORT l STORE dst
TTL dst
LRANGE dst 0 -1
SORT nosuch STORE dst
EXISTS dst
SORT l LIMIT 5 0 STORE out
EXISTS out
SORT_RO l
SORT_RO l DESC LIMIT 0 2 ALPHA
SORT_RO l STORE x
SORT_RO s
SORT_RO nosuch
SORT_RO
SORT
SADD st 5 3 9 1
SORT st
SORT st DESC
SORT st BY nosort STORE o2
LRANGE o2 0 -1
SADD st2 10 9 100
SORT st2 BY nosort STORE o3
LRANGE o3 0 -1
SADD sw b c a d
SORT sw BY nosort STORE o4 DESC LIMIT 1 2
LRANGE o4 0 -1
SORT sw BY nosort STORE o4 GET #
LRANGE o4 0 -1
ZADD z 3 c 1 a 2 b 5 e 4 d
SORT z ALPHA
SORT z BY nosort
SORT z BY nosort DESC
SORT z BY nosort LIMIT 1 2
SORT z BY nosort DESC LIMIT 1 2
SORT z BY nosort LIMIT 7 2
SORT z BY nosort DESC LIMIT 3 10
SORT z BY nosort GET #
SORT_RO z BY nosort DESC LIMIT 0 3 STORE
"""

SORT_PATTERNS = """
RPUSH l 1 2 3 4 5
MSET w_1 50 w_2 40 w_3 30 w_4 20 w_5 10
MSET o_1 one o_2 two o_3 three o_5 five
HSET h_1 f 5 name alice
HSET h_2 f 3 name bob
HSET h_3 f 4 name carol
HSET h_4 f 1
HSET h_5 f 2 name eve
SORT l BY w_*
SORT l BY w_* DESC
SORT l BY w_* LIMIT 1 3
SORT l BY w_* GET o_*
SORT l BY w_* GET # GET o_* GET h_*->name
SORT l BY h_*->f
SORT l BY h_*->f GET h_*->name
SORT l BY h_*->f GET h_*->name STORE names
LRANGE names 0 -1
SORT l BY h_*->missing
SORT l BY nokey_*
SORT l BY nosort GET o_*
SORT l BY nosort DESC LIMIT 1 2 GET # GET w_*
SORT l BY w_* GET h_*->
SORT l BY o_* ALPHA
SORT l BY o_* ALPHA DESC
SORT l BY o_*
SORT l GET o_* GET nostar
SORT l GET h_*->f->x
SORT l BY h_*->f GET w_*->f
SORT l BY w_*->f
SORT l GET #
SORT l GET *
SET 3 x
SORT l GET *
SORT l BY *
RPUSH l 0
SORT l BY w_*
SADD s 1 2 3 4 5
SORT s BY w_*
SORT s BY w_* GET o_* GET h_*->name
SORT s BY h_*->f DESC LIMIT 0 3
ZADD z 1 1 2 2 3 3 4 4 5 5
SORT z BY w_*
SORT z BY w_* DESC GET h_*->f
SORT z BY w_* STORE zs
LRANGE zs 0 -1
"""

SORT_SCORES = """
RPUSH n 0x10 " 7" 1e3 -inf Infinity .5 5. 12 "" 00012
SORT n
SORT n DESC
RPUSH bad 1 abc 2
SORT bad
SORT bad ALPHA
SORT bad STORE out
EXISTS out
SORT bad LIMIT 0 1
RPUSH nan 1 nan
SORT nan
RPUSH trail "1 " 2
SORT trail
RPUSH l 1 2 3
SET w_1 x
SORT l BY w_*
SORT l BY w_* ALPHA
"""


def _plain(block: str) -> list[list[bytes]]:
    """The block's commands; a quoted argument may hold blanks ("" is the empty string)."""
    out = []
    for line in block.strip().splitlines():
        parts: list[bytes] = []
        rest = line.strip()
        while rest:
            if rest.startswith('"'):
                end = rest.index('"', 1)
                parts.append(rest[1:end].encode())
                rest = rest[end + 1:].lstrip()
            else:
                word, _, rest = rest.partition(" ")
                parts.append(word.encode())
                rest = rest.lstrip()
        out.append(parts)
    return out


@pytest.mark.parametrize("block", [HLL_BASICS, SORT_BASICS, SORT_PATTERNS, SORT_SCORES],
                         ids=["hll", "sort", "sort-patterns", "sort-scores"])
def test_block(pair: Pair, block: str) -> None:
    pair.check(_plain(block))


def test_pfadd_many_sparse_to_dense_byte_for_byte(pair: Pair) -> None:
    """Batches of elements take a HLL from sparse to dense; after each batch PFCOUNT and
    the value's bytes match (the sparse opcodes as redis-server writes them)."""
    rng = random.Random(7)
    elements = [rng.randbytes(rng.randint(0, 24)) for _ in range(12000)]
    sizes = [1, 1, 3, 10, 30, 100, 300, 500, 1000, 2000, 4000, 4055]
    pos = 0
    for n in sizes:
        pair.check([_b("PFADD", "big", *elements[pos:pos + n]), _b("GET", "big"), _b("PFCOUNT", "big"),
                    _b("GET", "big")])
        pos += n
    pair.check([_b("PFADD", "big", *elements[:500]), _b("PFCOUNT", "big"), _b("STRLEN", "big")])


def test_pfcount_sweep_to_sixty_thousand(pair: Pair) -> None:
    """The estimate at every thousand elements up to 60 000 (the estimator's ranges)."""
    commands = []
    for start in range(0, 60000, 1000):
        commands += [_b("PFADD", "sweep", *(f"s{i}" for i in range(start, start + 1000))), _b("PFCOUNT", "sweep")]
    commands.append(_b("GET", "sweep"))
    pair.check(commands)


def test_blocked_client_is_served_by_sort_store(pair: Pair, servers: tuple[int, int]) -> None:
    """SORT ... STORE into a list a client waits on in BLPOP serves that client."""
    other = Pair(servers[0], servers[1], pair.ref.resp)
    try:
        other.check(cmds("RPUSH src 3 1 2"))
        for c in (pair.ref, pair.us):
            c.send([b"BLPOP", b"dst", b"5"])
        other.wait_blocked(1)
        other.check(cmds("SORT src DESC STORE dst"))
        assert pair.us.read() == pair.ref.read() == b"*2\r\n$3\r\ndst\r\n$1\r\n3\r\n"
        pair.check(cmds("LRANGE dst 0 -1"))
    finally:
        other.close()


def test_pfadd_one_by_one_keeps_the_sparse_opcodes(pair: Pair) -> None:
    """Single-element PFADDs split and merge the sparse runs as redis-server does."""
    commands = []
    for i in range(1500):
        commands.append(_b("PFADD", "one", f"e{i % 1200}"))
        if i % 97 == 0:
            commands += [_b("GET", "one"), _b("PFCOUNT", "one")]
    commands += [_b("GET", "one"), _b("PFCOUNT", "one")]
    pair.check(commands)


def test_pfmerge_and_pfcount_across_keys(pair: Pair) -> None:
    """Merges of sparse and dense HLLs, into new, sparse and dense destinations; the
    union count over several keys."""
    rng = random.Random(11)
    commands = []
    for k, n in (("a", 40), ("b", 700), ("c", 5000), ("d", 20000)):
        els = [b"%s%d" % (k.encode(), rng.randrange(10 * n)) for _ in range(n)]
        for i in range(0, n, 2000):
            commands.append(_b("PFADD", k, *els[i:i + 2000]))
        commands.append(_b("PFCOUNT", k))
    commands += cmds("""
PFCOUNT a b
PFCOUNT a b c d
PFCOUNT d c nosuch
PFMERGE ab a b
GET ab
PFCOUNT ab
PFMERGE a2 a
GET a2
PFMERGE a b
GET a
PFCOUNT a
PFMERGE abc ab c
PFCOUNT abc
GET abc
PFMERGE b d
PFCOUNT b
PFMERGE all a b c d nosuch
PFCOUNT all
PFCOUNT all a b c d
""")
    pair.check(commands)


def test_values_move_between_servers(pair: Pair) -> None:
    """A HLL made by redis-server, SET into the map, reads and grows the same (and the
    other way round)."""
    pair.check(cmds("PFADD src x y z\nPFADD dsrc " + " ".join(f"v{i}" for i in range(3000))))
    pair.check(cmds("PFCOUNT dsrc"))
    for key in (b"src", b"dsrc"):
        value = pair.ref.call([b"GET", key])
        raw = value.split(b"\r\n", 1)[1][:-2]
        pair.check([[b"SET", key + b"2", raw], [b"PFCOUNT", key + b"2"], [b"PFADD", key + b"2", b"new"],
                    [b"GET", key + b"2"], [b"PFCOUNT", key + b"2", key]])
        ours = pair.us.call([b"GET", key]).split(b"\r\n", 1)[1][:-2]
        assert ours == raw


def test_invalid_and_corrupted_values(pair: Pair) -> None:
    """Strings that are not HLLs get WRONGTYPE; sparse registers that do not add up to
    16384 get INVALIDOBJ where redis-server checks them."""
    sparse_head = b"HYLL\x01\x00\x00\x00" + b"\x00" * 7 + b"\x80"
    dense_head = b"HYLL\x00\x00\x00\x00" + b"\x00" * 8
    values = {
        b"short": sparse_head[:15],
        b"badmagic": b"HYLX" + sparse_head[4:] + b"\x7f\xff",
        b"enc2": b"HYLL\x02" + sparse_head[5:] + b"\x7f\xff",
        b"denselen": dense_head + b"\x00" * 100,
        b"few": sparse_head + b"\x7f\xfe",  # 16383 registers
        b"many": sparse_head + b"\x7f\xff\x80",  # 16385
        b"valonly": sparse_head + b"\x83" * 4096,  # 4 x 4096 registers of 1
        b"dense": dense_head + bytes(range(256)) * 48,
        b"cachedok": b"HYLL\x01\x00\x00\x00" + (12345).to_bytes(8, "little") + b"\x7f\xff",
    }
    commands = []
    for k, v in values.items():
        commands += [[b"SET", k, v], [b"PFCOUNT", k], [b"PFADD", k, b"a", b"b"], [b"PFCOUNT", k, b"nosuch"],
                     [b"PFMERGE", b"dst", k], [b"GET", k]]
    commands += [[b"PFCOUNT", b"valonly", b"dense"], [b"PFMERGE", b"valonly", b"dense"], [b"GET", b"valonly"],
                 [b"PFCOUNT", b"valonly"]]
    pair.check(commands)


def test_large_register_values(pair: Pair) -> None:
    """Dense registers past 32 (made by SET) and past 51, counted and merged."""
    dense = bytearray(b"HYLL\x00\x00\x00\x00" + b"\x00" * 7 + b"\x80" + b"\x00" * 12288)
    for i in range(0, 16384, 37):
        pos = i * 6
        val = 33 + i % 31
        dense[16 + pos // 8] |= (val << (pos % 8)) & 0xFF
        if pos % 8 > 2:
            dense[16 + pos // 8 + 1] |= val >> (8 - pos % 8)
    pair.check([[b"SET", b"d", bytes(dense)], [b"PFCOUNT", b"d"], [b"PFADD", b"sp", b"a"],
                [b"PFMERGE", b"sp", b"d"], [b"GET", b"sp"], [b"PFCOUNT", b"sp", b"d"]])


def test_sort_many_elements(pair: Pair) -> None:
    rng = random.Random(3)
    nums = [str(rng.randint(-1000, 1000) / 8) for _ in range(600)]
    commands = [_b("RPUSH", "big", *nums), _b("SADD", "bs", *nums), _b("SORT", "big"), _b("SORT", "big", "DESC"),
                _b("SORT", "big", "ALPHA", "LIMIT", 100, 50), _b("SORT", "bs", "DESC", "LIMIT", 0, 20),
                _b("SORT", "bs", "ALPHA"), _b("SORT", "big", "STORE", "o"), _b("LRANGE", "o", 0, -1)]
    pair.check(commands)


def test_notifications(pair: Pair, servers: tuple[int, int]) -> None:
    """PFADD and PFMERGE send "pfadd" (string class), SORT STORE "sortstore" (list) or
    "del"; PFCOUNT none."""
    subs = [RawClient(servers[0], pair.ref.resp), RawClient(servers[1], pair.ref.resp)]
    try:
        pair.check(cmds("CONFIG SET notify-keyspace-events KEA"))
        for s in subs:
            s.call([b"PSUBSCRIBE", b"__key*@0__:*"])
        pair.check(cmds("""
PFADD h a b
PFADD h a
PFCOUNT h
PFMERGE m h
RPUSH l 2 1
SORT l STORE out
SORT nosuch STORE out
SORT nosuch STORE out
SET done 1
"""))
        got = []
        for s in subs:
            frames = []
            for _ in range(20):  # bounded: the SET of "done" ends the stream
                frames.append(s.read())
                if frames[-1].endswith(b"done\r\n") and b"keyevent" in frames[-1]:
                    break
            got.append(frames)
        assert got[1] == got[0]
        assert any(b"sortstore" in f for f in got[0]) and any(b"pfadd" in f for f in got[0])
    finally:
        pair.check([[b"CONFIG", b"SET", b"notify-keyspace-events", b""]])
        for s in subs:
            s.close()


def test_watch_sees_pfcount_updating_the_cache(pair: Pair, servers: tuple[int, int]) -> None:
    """PFCOUNT rewrites a stale cached count: WATCH sees it (redis-server signals the key)."""
    pair.check(cmds("PFADD h a b c\nWATCH h\nPFCOUNT h\nMULTI\nPING\nEXEC\nWATCH h\nPFCOUNT h\nMULTI\nPING\nEXEC"))


_KEYS = st.sampled_from([b"h1", b"h2", b"h3", b"l", b"z"])
_ELS = st.lists(st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"1", b"2", b"3", b"10", b""]), max_size=6)


def _hll_command() -> st.SearchStrategy[list[bytes]]:
    return st.one_of(
        st.tuples(st.just(b"PFADD"), _KEYS, _ELS).map(lambda t: [t[0], t[1], *t[2]]),
        st.tuples(st.just(b"PFCOUNT"), st.lists(_KEYS, min_size=1, max_size=3)).map(lambda t: [t[0], *t[1]]),
        st.tuples(st.just(b"PFMERGE"), st.lists(_KEYS, min_size=1, max_size=3)).map(lambda t: [t[0], *t[1]]),
        st.tuples(st.just(b"GET"), _KEYS).map(list),
        st.tuples(st.just(b"RPUSH"), _KEYS, _ELS.filter(bool)).map(lambda t: [t[0], t[1], *t[2]]),
        st.tuples(st.just(b"ZADD"), _KEYS, st.sampled_from([b"1", b"2"]), st.sampled_from([b"a", b"b"])).map(list),
        st.tuples(st.just(b"SORT"), _KEYS, st.sampled_from([[], [b"DESC"], [b"ALPHA"], [b"LIMIT", b"1", b"2"],
                                                            [b"BY", b"nosort"], [b"STORE", b"h1"],
                                                            [b"ALPHA", b"STORE", b"l"]]))
        .map(lambda t: [t[0], t[1], *t[2]]),
    )


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=st.lists(_hll_command(), min_size=1, max_size=20))
def test_generated_sequences(pair: Pair, sequence: list[list[bytes]]) -> None:
    pair.reset()
    pair.check(sequence)


def test_map_restart_keeps_hll_bytes_and_sort_store(tmp_path: Path) -> None:
    """The map's log replays PFADD, the PFCOUNT cache rewrite, PFMERGE and SORT STORE
    (logged as DEL + RPUSH) to the same bytes (in-process)."""
    from raims_node.kv import open_kv
    from raims_node.kv.cli import main as ms_kv
    from raims_node.kv.commands import KVClient
    from raims_node.kv.reply import encode

    assert ms_kv(["init", str(tmp_path / "map")]) == 0
    engine, mf = open_kv(str(tmp_path / "map"))
    assert mf is not None
    c = KVClient()
    script = [_b("PFADD", "h", *range(200)), _b("PFCOUNT", "h"), _b("PFADD", "d", *range(5000)),
              _b("PFMERGE", "m", "h", "d"), _b("PFCOUNT", "m"), _b("SADD", "s", "b", "a", "c"),
              _b("SORT", "s", "BY", "nosort", "STORE", "out")]
    for cmd in script:
        engine.execute(c, cmd)
    before = {k: encode(engine.execute(c, _b("GET", k)), 2) for k in ("h", "d", "m")}
    assert before["h"].split(b"\r\n", 1)[1][15] & 0x80 == 0  # the cached count is stored
    mf.close()
    engine2, mf2 = open_kv(str(tmp_path / "map"))
    assert mf2 is not None
    after = {k: encode(engine2.execute(c, _b("GET", k)), 2) for k in ("h", "d", "m")}
    assert after == before
    assert engine2.execute(c, _b("LRANGE", "out", 0, -1)) == [b"a", b"b", b"c"]
    mf2.close()


@functools.cache
def _window_elements() -> dict[tuple[int, int], bytes]:
    """An element for each (register, value) of registers 0..15 and values 1..3."""
    from raims_node.kv.hll import pat_len

    want = {(r, v) for r in range(16) for v in (1, 2, 3)}
    table: dict[tuple[int, int], bytes] = {}
    for i in range(2_000_000):  # bounded; about 400 000 suffice
        el = b"w%d" % i
        rv = pat_len(el)
        if rv in want and rv not in table:
            table[rv] = el
            if len(table) == len(want):
                break
    assert len(table) == len(want)
    return table


def test_sparse_runs_split_and_merge_in_a_small_window(pair: Pair) -> None:
    """PFADDs into the first 16 registers in random orders: VAL runs split out of and
    merged back into their neighbours, byte for byte after every command."""
    table = _window_elements()
    commands = []
    for seed in range(30):
        rng = random.Random(seed)
        commands.append(_b("DEL", "w"))
        for _ in range(30):
            el = table[(rng.randrange(16), rng.choice((1, 1, 2, 3)))]
            commands += [[b"PFADD", b"w", el], [b"GET", b"w"]]
    pair.check(commands)
