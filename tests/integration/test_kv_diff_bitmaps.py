"""The bitmap commands (SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD, BITFIELD_RO) and
LCS of ms_server's Redis transport against Debian's redis-server: the same commands to
both, replies compared byte for byte in RESP2 and RESP3 (kv_diff.py); their keyspace
notifications compared too."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.kv_diff import Pair, RawClient, cmds, parse

SETBIT_GETBIT = """
SETBIT b 7 1
GET b
SETBIT b 7 1
SETBIT b 7 0
SETBIT b 0 1
GET b
SETBIT b 100 1
STRLEN b
GETBIT b 100
GETBIT b 99
GETBIT b 0
GETBIT b 1000000
GETBIT nosuch 5
SETBIT z 9 0
GET z
SETBIT b 4294967295 2
SETBIT b 4294967296 1
SETBIT b -1 1
SETBIT b 01 1
SETBIT b +1 1
SETBIT b 1.0 1
SETBIT b x 1
SETBIT b 1 -1
SETBIT b 1 2
SETBIT b 1 x
SETBIT b 1 01
SETBIT b 1 9223372036854775808
GETBIT b 4294967295
GETBIT b 4294967296
GETBIT b -1
GETBIT b #1
SET s 1234
SETBIT s 2 1
GET s
GETBIT s 2
LPUSH l a
SETBIT l 1 1
GETBIT l 1
SETBIT b 1
SETBIT b 1 1 1
GETBIT b
GETBIT b 1 1
SET t abc EX 100
SETBIT t 0 1
TTL t
SETBIT t 100 1
TTL t
GETBIT t 100
SET e ""
GETBIT e 0
SETBIT e 3 1
GET e
"""


def test_setbit_getbit(pair: Pair) -> None:
    pair.check(cmds(SETBIT_GETBIT))


BITCOUNT = """
BITCOUNT nosuch
BITCOUNT nosuch 0
BITCOUNT nosuch a b c d e
BITCOUNT nosuch 0 1 FOO
SET s foobar
BITCOUNT s
BITCOUNT s 0 0
BITCOUNT s 1 1
BITCOUNT s 1 -1
BITCOUNT s -1 -1
BITCOUNT s -2 -1
BITCOUNT s -1 -2
BITCOUNT s -100 -50
BITCOUNT s -100 100
BITCOUNT s 5 100
BITCOUNT s 6 100
BITCOUNT s 3 1
BITCOUNT s 0 -100
BITCOUNT s 0 0 BYTE
BITCOUNT s 0 0 byte
BITCOUNT s 0 0 BIT
BITCOUNT s 1 5 BIT
BITCOUNT s 5 30 bit
BITCOUNT s 3 3 BIT
BITCOUNT s -1 -1 BIT
BITCOUNT s -5 -1 BIT
BITCOUNT s -3 -10 BIT
BITCOUNT s -100 100 BIT
BITCOUNT s 7 8 BIT
BITCOUNT s 47 47 BIT
BITCOUNT s 48 100 BIT
BITCOUNT s 0 0 BITS
BITCOUNT s 0 0 BIT x
BITCOUNT s 0
BITCOUNT s a 1
BITCOUNT s 1 a
BITCOUNT s 0 9223372036854775807
BITCOUNT s -9223372036854775808 -1
BITCOUNT s 0 9223372036854775808
SET n 12345
BITCOUNT n
BITCOUNT n 1 2
SET e ""
BITCOUNT e
BITCOUNT e 0 -1
BITCOUNT e 0 -1 BIT
LPUSH l a
BITCOUNT l
BITCOUNT l 0 1 FOO
BITCOUNT
"""


def test_bitcount(pair: Pair) -> None:
    pair.check(cmds(BITCOUNT))


BITPOS = """
BITPOS nosuch 1
BITPOS nosuch 0
BITPOS nosuch 0 a b c d e
BITPOS nosuch 2
BITPOS nosuch x
BITPOS nosuch -1
SET z \x00\x00\x00
BITPOS z 1
BITPOS z 0
SET s foobar
BITPOS s 1
BITPOS s 0
BITPOS s 1 2
BITPOS s 1 2 -1
BITPOS s 1 -1
BITPOS s 1 -2 -1
BITPOS s 1 -1 -2
BITPOS s 1 7 3
BITPOS s 1 100
BITPOS s 0 100
BITPOS s 1 -100
BITPOS s 1 0 -100
BITPOS s 1 7 15 BIT
BITPOS s 1 7 15 bit
BITPOS s 0 7 15 BIT
BITPOS s 1 0 0 BYTE
BITPOS s 1 9 9 BIT
BITPOS s 1 -3 -1 BIT
BITPOS s 0 -3 -1 BIT
BITPOS s 1 3 2 BIT
BITPOS s 1 0 100 BIT
BITPOS s 0 45 47 BIT
BITPOS s 1 45 47 BIT
BITPOS s 1 0 0 BITS
BITPOS s 1 0 0 BIT x
BITPOS s 1 a
BITPOS s 1 0 a
BITPOS s 1.0
BITPOS s 1 0 9223372036854775807
BITPOS s 1 -9223372036854775808
LPUSH l a
BITPOS l 1
BITPOS l 2
BITPOS
BITPOS s
SET e ""
BITPOS e 0
BITPOS e 1
BITPOS e 0 0
BITPOS e 0 0 -1
"""

ONES = """
SETBIT f 0 1
BITPOS f 0
BITPOS f 0 0
BITPOS f 0 0 -1
BITPOS f 0 0 -1 BIT
BITPOS f 0 0 6 BIT
BITPOS f 0 0 7 BIT
BITPOS f 1 1 7 BIT
BITPOS f 1 1 BIT
"""


def test_bitpos(pair: Pair) -> None:
    pair.check(cmds(BITPOS))


def test_bitpos_clear_bit_in_all_ones(pair: Pair) -> None:
    """The special cases of a bit 0 search: past the range without an explicit end, -1
    with one."""
    ff = [[b"SET", b"f", b"\xff\xff\xff"], [b"BITPOS", b"f", b"0"], [b"BITPOS", b"f", b"0", b"1"],
          [b"BITPOS", b"f", b"0", b"1", b"-1"], [b"BITPOS", b"f", b"0", b"1", b"2"],
          [b"BITPOS", b"f", b"0", b"3", b"20", b"BIT"], [b"BITPOS", b"f", b"0", b"3", b"BIT"],
          [b"BITPOS", b"f", b"1", b"3", b"2"], [b"SET", b"g", b"\xff\xf0\xff"],
          [b"BITPOS", b"g", b"0"], [b"BITPOS", b"g", b"0", b"2"], [b"BITPOS", b"g", b"0", b"0", b"1"],
          [b"BITPOS", b"g", b"0", b"10", b"11", b"BIT"], [b"BITPOS", b"g", b"0", b"12", b"13", b"BIT"],
          [b"BITPOS", b"g", b"1", b"12", b"15", b"BIT"], [b"BITPOS", b"g", b"1", b"12", b"16", b"BIT"]]
    pair.check(ff + cmds(ONES))


BITOP = """
SET a foobar
SET b abcdef
SET c x
BITOP AND d a b
GET d
BITOP and d a b c
GET d
BITOP OR d a b c
GET d
BITOP XOR d a c
GET d
BITOP NOT d c
GET d
BITOP NOT d a b
BITOP NOT d
BITOP NAND d a
BITOP d a
BITOP AND d nosuch
EXISTS d
SET d 1
BITOP OR d nosuch other
EXISTS d
BITOP OR d a nosuch
GET d
BITOP AND d a nosuch
GET d
BITOP XOR a a a
GET a
LPUSH l x
BITOP AND d a l
BITOP OR l a
TYPE l
GET l
SET t v EX 100
BITOP OR t a
TTL t
BITOP NOT a a
GET a
SET e ""
BITOP NOT d e
EXISTS d
BITOP AND e a
GET e
"""


def test_bitop(pair: Pair) -> None:
    pair.check(cmds(BITOP))


def test_bitop_binary(pair: Pair) -> None:
    pair.check([[b"SET", b"x", b"\x00\xff\x0f\xf0\x80"], [b"SET", b"y", b"\xaa\x55"],
                [b"BITOP", b"XOR", b"z", b"x", b"y"], [b"GET", b"z"], [b"BITOP", b"NOT", b"z", b"x"],
                [b"GET", b"z"], [b"BITOP", b"AND", b"z", b"x", b"y", b"x"], [b"GET", b"z"],
                [b"BITOP", b"AND\x00x", b"z", b"x"], [b"GET", b"z"], [b"BITCOUNT", b"x"],
                [b"BITCOUNT", b"x", b"0", b"1", b"BIT\x00x"]])


BITFIELD = """
BITFIELD k
BITFIELD k GET u8 0
BITFIELD k SET u8 0 255
GET k
BITFIELD k GET u8 0 GET i8 0 GET u4 4 GET i4 4 GET u1 7 GET i1 7
BITFIELD k SET i8 0 -1 GET u8 0
BITFIELD k INCRBY u2 100 1 OVERFLOW SAT INCRBY u2 102 1
BITFIELD k INCRBY u2 100 1 OVERFLOW SAT INCRBY u2 102 1
BITFIELD k INCRBY u2 100 1 OVERFLOW SAT INCRBY u2 102 1
BITFIELD k INCRBY u2 100 1 OVERFLOW SAT INCRBY u2 102 1
BITFIELD k OVERFLOW FAIL INCRBY u2 102 1
STRLEN k
BITFIELD k SET i8 #1 100 GET i8 #1 GET u8 8
BITFIELD k SET u8 #2 200 INCRBY u8 #2 100 OVERFLOW SAT INCRBY u8 #2 100 OVERFLOW FAIL INCRBY u8 #2 1
BITFIELD k SET i5 3 100 GET i5 3
BITFIELD k OVERFLOW SAT SET i5 3 100 GET i5 3 SET i5 3 -100 GET i5 3
BITFIELD k OVERFLOW FAIL SET i5 3 100 GET i5 3
BITFIELD k OVERFLOW SAT SET u5 3 -1 GET u5 3
BITFIELD k OVERFLOW WRAP SET u5 3 -1 GET u5 3
BITFIELD k OVERFLOW FAIL SET u5 3 -1 GET u5 3
BITFIELD k SET i64 0 -9223372036854775808 GET i64 0 GET u63 0 GET u63 1
BITFIELD k INCRBY i64 0 -1
BITFIELD k OVERFLOW SAT INCRBY i64 0 -1 INCRBY i64 0 1
BITFIELD k SET i64 0 9223372036854775807 INCRBY i64 0 1 OVERFLOW SAT INCRBY i64 0 5
BITFIELD k OVERFLOW FAIL INCRBY i64 0 -9223372036854775808 INCRBY i64 0 9223372036854775807
BITFIELD k SET u63 0 9223372036854775807 OVERFLOW SAT INCRBY u63 0 5 OVERFLOW WRAP INCRBY u63 0 5
BITFIELD k SET u63 1 -9223372036854775808 GET u63 1
BITFIELD k OVERFLOW SAT INCRBY u8 0 -300 INCRBY i8 0 -300 INCRBY i8 0 300
BITFIELD k OVERFLOW WRAP INCRBY u8 0 -300 INCRBY i8 0 -300 INCRBY i8 0 300
BITFIELD k GET i64 7 GET u63 13 GET i1 0 GET u1 1
GET k
BITFIELD k GET u64 0
BITFIELD k GET i65 0
BITFIELD k GET u0 0
BITFIELD k GET i0 0
BITFIELD k GET x8 0
BITFIELD k GET i 0
BITFIELD k GET i08 0
BITFIELD k GET i-8 0
BITFIELD k GET U8 0 GET I8 0
BITFIELD k GET u8 -1
BITFIELD k GET u8 #-1
BITFIELD k GET u8 #
BITFIELD k GET u8 ##1
BITFIELD k GET u8 4294967295
BITFIELD k GET u8 4294967296
BITFIELD k GET u8 #536870911
BITFIELD k GET u8 #536870912
BITFIELD k GET u8 #1152921504606846976
BITFIELD k GET u8 x
BITFIELD k SET u8 0 x
BITFIELD k SET u8 0 1.5
BITFIELD k SET u8 0
BITFIELD k GET u8
BITFIELD k INCRBY u8 0
BITFIELD k OVERFLOW
BITFIELD k OVERFLOW foo GET u8 0
BITFIELD k OVERFLOW SAT
BITFIELD k overflow fail get u8 0 set u8 0 1 incrby u8 0 1
BITFIELD k FOO u8 0
BITFIELD k GET u8 0 junk
BITFIELD k SET u8 0 1 GET u64 0
GET k
BITFIELD
BITFIELD_RO k GET u8 0 GET i16 #1
BITFIELD_RO k
BITFIELD_RO k SET u8 0 1
BITFIELD_RO k INCRBY u8 0 1
BITFIELD_RO k OVERFLOW SAT GET u8 0
BITFIELD_RO k SET u8 0 x
BITFIELD_RO k GET u64 0 SET u8 0 1
BITFIELD_RO nosuch GET u8 0
BITFIELD_RO
LPUSH l a
BITFIELD l GET u8 0
BITFIELD l SET u8 0 1
BITFIELD_RO l GET u8 0
BITFIELD l
BITFIELD l OVERFLOW SAT
BITFIELD f OVERFLOW FAIL SET u4 20 99
GET f
EXISTS f
BITFIELD g OVERFLOW FAIL SET u4 20 99 GET u4 20
SET t abc EX 100
BITFIELD t SET u8 100 1
TTL t
STRLEN t
"""


def test_bitfield(pair: Pair) -> None:
    pair.check(cmds(BITFIELD))


def test_bitfield_nul_words(pair: Pair) -> None:
    """Option words end at a NUL byte (redis-server compares them with strcasecmp)."""
    pair.check([[b"BITFIELD", b"k", b"SET\x00x", b"u8\x00y", b"0", b"7"], [b"GET", b"k"],
                [b"BITFIELD", b"k", b"GET", b"u\x008", b"0"], [b"BITFIELD", b"k", b"OVERFLOW", b"sat\x00", b"GET", b"u8", b"0"],
                [b"BITFIELD", b"k", b"GET", b"\x00", b"0"], [b"BITFIELD", b"k", b"GET", b"", b"0"]])


NOTIFIED = """
SETBIT b 3 1
SETBIT b 3 1
SETBIT b 3 0
SETBIT b 40 0
SET s foobar
BITOP NOT d s
BITOP AND d nosuch
BITOP AND d nosuch
BITFIELD f GET u8 0
BITFIELD f SET u8 0 1 GET u8 0
BITFIELD f OVERFLOW FAIL SET u2 0 9
BITFIELD g OVERFLOW FAIL SET u2 0 9
BITFIELD_RO f GET u8 0
"""


def test_keyspace_notifications(pair: Pair, servers: tuple[int, int]) -> None:
    """setbit for SETBIT and BITFIELD, set / del for BITOP, nothing for a SETBIT that
    changes no bit: the same messages from both servers, in the same order."""
    subs = [RawClient(port, pair.ref.resp) for port in servers]
    try:
        for client, sub in zip((pair.ref, pair.us), subs, strict=True):
            assert client.call([b"CONFIG", b"SET", b"notify-keyspace-events", b"KEA"]) == b"+OK\r\n"
            sub.call([b"PSUBSCRIBE", b"__key*__:*"])
        for cmd in cmds(NOTIFIED):
            pair.run(cmd)
        got = []
        for client, sub in zip((pair.ref, pair.us), subs, strict=True):
            client.call([b"SET", b"sentinel", b"1"])
            frames = []
            while not frames or b"sentinel" not in frames[-1]:
                frames.append(sub.read())
                assert len(frames) < 200, frames
            got.append(frames)
        assert got[1] == got[0], "\n".join(map(repr, got[0] + [b"--"] + got[1]))
        assert any(b"setbit" in f for f in got[0])
    finally:
        for client, sub in zip((pair.ref, pair.us), subs, strict=True):
            client.call([b"CONFIG", b"SET", b"notify-keyspace-events", b""])
            sub.close()


def _bit_command() -> st.SearchStrategy[list[bytes]]:
    k = st.sampled_from([b"a", b"b", b"c"])
    off = st.integers(0, 70).map(lambda n: b"%d" % n)
    idx = st.integers(-12, 12).map(lambda n: b"%d" % n)
    bit = st.sampled_from([b"0", b"1"])
    typ = st.sampled_from([b"u1", b"u3", b"i4", b"u8", b"i8", b"i13", b"u63", b"i64"])
    num = st.integers(-(1 << 64), 1 << 64).map(lambda n: b"%d" % n)
    unit = st.sampled_from([b"BIT", b"BYTE"])
    forms = [
        st.tuples(st.just(b"SETBIT"), k, off, bit).map(list),
        st.tuples(st.just(b"GETBIT"), k, off).map(list),
        st.tuples(st.just(b"BITCOUNT"), k, idx, idx, unit).map(list),
        st.tuples(st.just(b"BITCOUNT"), k, idx, idx).map(list),
        st.tuples(st.just(b"BITPOS"), k, bit, idx).map(list),
        st.tuples(st.just(b"BITPOS"), k, bit, idx, idx, unit).map(list),
        st.tuples(st.just(b"BITOP"), st.sampled_from([b"AND", b"OR", b"XOR"]), k, k, k).map(list),
        st.tuples(st.just(b"BITOP"), st.just(b"NOT"), k, k).map(list),
        st.tuples(st.just(b"BITFIELD"), k, st.sampled_from([b"SET", b"INCRBY"]), typ, off, num,
                  st.just(b"OVERFLOW"), st.sampled_from([b"WRAP", b"SAT", b"FAIL"]),
                  st.sampled_from([b"SET", b"INCRBY"]), typ, off, num, st.just(b"GET"), typ, off).map(list),
        st.tuples(st.just(b"BITFIELD_RO"), k, st.just(b"GET"), typ, off).map(list),
        st.tuples(st.just(b"SET"), k, st.sampled_from([b"", b"foobar", b"\xff\xf0", b"\x00\x00\x01"])).map(list),
        st.tuples(st.just(b"GET"), k).map(list),
        st.tuples(st.just(b"LCS"), k, k, st.sampled_from([b"LEN", b"IDX", b"WITHMATCHLEN"])).map(list),
        st.tuples(st.just(b"LCS"), k, k, st.just(b"IDX"), st.just(b"MINMATCHLEN"), st.sampled_from([b"0", b"2"]),
                  st.just(b"WITHMATCHLEN")).map(list),
    ]
    return st.one_of(forms)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=st.lists(_bit_command(), min_size=1, max_size=25))
def test_generated_sequences(pair: Pair, sequence: list[list[bytes]]) -> None:
    pair.reset()
    pair.check(sequence)


LCS = """
MSET a ohmytext b mynewtext
LCS a b
LCS a b LEN
LCS a b IDX
LCS a b IDX WITHMATCHLEN
LCS a b IDX MINMATCHLEN 4
LCS a b IDX MINMATCHLEN 4 WITHMATCHLEN
LCS a b IDX MINMATCHLEN -5 WITHMATCHLEN
LCS a b idx minmatchlen 0 withmatchlen len
LCS a b LEN IDX
LCS a b MINMATCHLEN 2
LCS a b WITHMATCHLEN
LCS a b LEN MINMATCHLEN x
LCS a b MINMATCHLEN
LCS a b IDX MINMATCHLEN
LCS a b FOO
LCS b a IDX WITHMATCHLEN
LCS a a IDX WITHMATCHLEN
LCS a nosuch
LCS a nosuch IDX
LCS nosuch nosuch2 LEN
LCS nosuch a IDX WITHMATCHLEN
LCS nosuch a FOO
LPUSH l x
LCS a l
LCS l a LEN
LCS l a FOO
LCS a
LCS
MSET x ACCGGTCGAGTGCGCGGAAGCCGGCCGAA y GTCGTTCGGAATGCCGTTGCTCTGTAAA
LCS x y
LCS x y IDX WITHMATCHLEN
LCS y x IDX WITHMATCHLEN
LCS x y IDX MINMATCHLEN 3 LEN
MSET p aaaa q aa
LCS p q IDX WITHMATCHLEN
LCS q p IDX WITHMATCHLEN
MSET p abcabcabc q cbacbacba
LCS p q IDX WITHMATCHLEN
LCS q p IDX WITHMATCHLEN
"""


def test_lcs(pair: Pair) -> None:
    pair.check(cmds(LCS))


def test_lcs_random_strings(pair: Pair) -> None:
    """Longer strings over small alphabets (many ties in the table): the same LCS and
    ranges as redis-server's walk, for either order of the keys and both shapes."""
    import random

    rng = random.Random(7)
    commands = []
    for n, m, alphabet in ((1, 300, b"ab"), (40, 900, b"abc"), (200, 200, b"ab"), (700, 30, b"acgt"),
                           (2000, 1500, b"acgt"), (1, 1, b"a"), (5000, 3, b"xyz")):
        a = bytes(rng.choice(alphabet) for _ in range(n))
        b = bytes(rng.choice(alphabet) for _ in range(m))
        commands.append([b"MSET", b"a", a, b"b", b])
        commands += [[b"LCS", x, y, *opts] for x, y in ((b"a", b"b"), (b"b", b"a"))
                     for opts in ([], [b"LEN"], [b"IDX", b"WITHMATCHLEN"], [b"IDX", b"MINMATCHLEN", b"3"])]
    pair.check(commands)


WATCHED = """
SETBIT w 1 1
WATCH w
SETBIT w 1 1
BITFIELD w OVERFLOW FAIL SET u2 0 9
GETBIT w 1
BITCOUNT w
MULTI
GET w
EXEC
WATCH w
SETBIT w 1 0
MULTI
GET w
EXEC
WATCH w
BITFIELD w SET u2 0 1
MULTI
GET w
EXEC
WATCH d
BITOP AND d nosuch
MULTI
GET d
EXEC
WATCH d
BITOP OR d w
MULTI
GET d
EXEC
"""


def test_watch_sees_changes_only(pair: Pair) -> None:
    """A SETBIT that sets no new bit, a BITFIELD whose writes all FAIL inside the string
    and a BITOP that deletes nothing leave a WATCHed key untouched; the others touch it."""
    pair.check(cmds(WATCHED))


def _doc_fields(frame: bytes) -> dict[bytes, Any]:
    name_doc = parse(frame)[1]
    doc = name_doc[1][1]
    fields = {doc[i]: doc[i + 1] for i in range(0, len(doc), 2)}
    return {k: fields[k] for k in (b"summary", b"since", b"group")}


def test_command_docs_name_the_commands_as_redis_server(pair: Pair) -> None:
    for name in (b"setbit", b"getbit", b"bitcount", b"bitpos", b"bitop", b"bitfield", b"bitfield_ro", b"lcs"):
        ref, us = (_doc_fields(c.call([b"COMMAND", b"DOCS", name])) for c in (pair.ref, pair.us))
        assert us == ref, name


def test_large_strings_cross_the_scan_chunks(pair: Pair) -> None:
    """Strings of a few MiB with sparse bits: counts and searches across the node's 1 MiB
    scan chunks and unaligned words, BITOP of unequal lengths, SETBIT far in."""
    n = (3 << 20) + 5  # built by SETBIT: a request holds one max_payload (1 MB) at most
    last = b"%d" % (n * 8 - 1)
    commands = [[b"SETBIT", b"s", last, b"0"], [b"BITOP", b"NOT", b"d", b"s"], [b"SET", b"short", b"\xf0" * 1000]]
    for pos in (0, 1 << 20, (2 << 20) + 3, n - 1):
        commands += [[b"SETBIT", b"s", b"%d" % (pos * 8 + 2), b"1"], [b"SETBIT", b"d", b"%d" % (pos * 8 + 7), b"0"]]
    for key in (b"s", b"d"):
        commands += [[b"BITCOUNT", key], [b"BITCOUNT", key, b"1", b"-2"], [b"BITCOUNT", key, b"7", last, b"BIT"],
                     [b"BITCOUNT", key, b"1048577", b"2097155"], [b"BITCOUNT", key, b"-5", b"-1", b"BIT"]]
        for bit in (b"0", b"1"):
            commands += [[b"BITPOS", key, bit], [b"BITPOS", key, bit, b"1"], [b"BITPOS", key, bit, b"1048577"],
                         [b"BITPOS", key, bit, b"1048577", b"2097154"], [b"BITPOS", key, bit, b"-3"],
                         [b"BITPOS", key, bit, b"9", last, b"BIT"], [b"BITPOS", key, bit, b"16777250", b"-2", b"BIT"]]
    for op in (b"AND", b"OR", b"XOR"):
        commands += [[b"BITOP", op, b"r", b"s", b"d", b"short"], [b"BITCOUNT", b"r"], [b"BITPOS", b"r", b"1", b"999"],
                     [b"GETRANGE", b"r", b"995", b"1004"], [b"GETRANGE", b"r", b"-4", b"-1"]]
    commands += [[b"BITOP", b"NOT", b"r", b"s"], [b"GET", b"r"], [b"SETBIT", b"s", b"40000000", b"1"],
                 [b"STRLEN", b"s"], [b"BITCOUNT", b"s"], [b"BITPOS", b"s", b"1", b"3145730"],
                 [b"BITFIELD", b"s", b"INCRBY", b"u63", b"39999990", b"7", b"GET", b"i64", b"#624999"],
                 [b"GETRANGE", b"s", b"4999995", b"-1"]]
    pair.check(commands)


def test_lcs_refuses_a_table_past_proto_max_bulk_len(pair: Pair) -> None:
    """11585 x 11585 bytes: a table of 4-byte cells past 512 MiB, refused by both (redis-server
    before it allocates), whatever the options; the node's bound is the same."""
    pair.check([[b"MSET", b"a", b"x" * 11585, b"b", b"y" * 11585], [b"LCS", b"a", b"b"],
                [b"LCS", b"b", b"a", b"LEN"], [b"LCS", b"a", b"b", b"IDX", b"WITHMATCHLEN"],
                [b"LCS", b"a", b"b", b"LEN", b"IDX"], [b"LCS", b"a", b"b", b"FOO"],
                [b"SET", b"a", b"x"], [b"LCS", b"a", b"b", b"LEN"]])
