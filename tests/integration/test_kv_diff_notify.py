"""The `n` keyspace event ("new": a key was created, redis-server's dbAdd) of the node's
map against Debian's redis-server 7.0.15: every command that can create a key, run on
both with `notify-keyspace-events` set, its replies and every event (channel, payload
and order) compared byte for byte (kv_diff.py). Redis's TCL unit/pubsub.tcl
"Keyspace notifications: new key test" is the reference for the flag alone."""

from __future__ import annotations

from tests.integration.kv_diff import Pair, RawClient, cmds

# Every way a key comes to be, and the overwrites that must not say "new".
CREATORS = """
SET s v
SET s w
SET s v NX
SET s2 v XX
SET s3 v GET
SET s3 w GET
SETNX s4 v
SETNX s4 w
SETEX s5 100 v
PSETEX s6 100000 v
GETSET s7 v
MSET m1 a m2 b m1 c
MSETNX m3 a m4 b
MSETNX m3 a m5 b
APPEND ap x
APPEND ap y
SETRANGE sr 3 x
SETRANGE sr0 0 ""
EXISTS sr0
INCR i1
INCRBY i2 5
DECR i3
DECRBY i4 2
INCRBYFLOAT f1 1.5
INCR i1
SETBIT b1 7 1
SETBIT b1 9 1
BITFIELD bf1 SET u8 0 255
BITFIELD bf2 GET u8 0
BITFIELD bf3 OVERFLOW FAIL INCRBY u2 0 9
EXISTS bf2 bf3
BITOP OR bo b1 s
BITOP OR bo b1
BITOP AND be nosuch
PFADD h1 a
PFADD h1 b
PFADD h2
PFMERGE h3 h1
PFMERGE h3 h1 h2
LPUSH l1 a
RPUSH l1 b
RPUSH l2 a b
LPUSHX l3 a
RPUSHX l3 a
LINSERT l1 BEFORE a z
LMOVE l1 l4 LEFT RIGHT
RPOPLPUSH l1 l5
LMOVE l2 l2 LEFT RIGHT
RPUSH one a
LMOVE one one LEFT RIGHT
RPOPLPUSH one one
LRANGE one 0 -1
LMOVE one onedst RIGHT LEFT
EXISTS one
BLMOVE l2 l6 LEFT LEFT 0
LMOVE l2 l6 LEFT LEFT
HSET h a 1
HSET h b 2
HSETNX hn a 1
HSETNX hn a 2
HMSET hm a 1 b 2
HINCRBY hi a 1
HINCRBYFLOAT hf a 1.5
HINCRBYFLOAT hg a nan
HINCRBY hj a x
EXISTS hg hj
SADD st a b
SADD st c
SMOVE st st2 a
SMOVE st st2 b
SMOVE st st c
SINTERSTORE si st st2
SUNIONSTORE su st st2
SUNIONSTORE su st
SDIFFSTORE sd st2 st
SINTERSTORE empty st nosuch
ZADD z 1 a
ZADD z 2 b
ZADD z2 NX 1 a 2 b
ZADD z3 XX 1 a
ZADD z4 GT CH 1 a
ZADD z5 INCR 1 a
ZADD z6 x a
ZINCRBY z7 2 a
EXISTS z3 z6
ZUNIONSTORE zu 2 z z2
ZUNIONSTORE zu 1 z
ZINTERSTORE zi 2 z z2
ZDIFFSTORE zd 2 z z2
ZRANGESTORE zr z 0 -1
ZRANGESTORE zr z 0 0
ZRANGESTORE zr2 z 5 10
GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania
GEOADD g 13.361389 38.115556 Palermo
GEOSEARCHSTORE gs g FROMLONLAT 15 37 BYRADIUS 200 km
GEORADIUS g 15 37 200 km STORE gr
GEORADIUS g 15 37 200 km STOREDIST gr
XADD x1 1-1 f v
XADD x1 2-1 f v
XADD x2 NOMKSTREAM * f v
XADD x3 MAXLEN 0 1-1 f v
XADD x4 0-0 f v
XADD x7 0 f v
EXISTS x2 x3 x4
XGROUP CREATE x5 g $ MKSTREAM
XGROUP CREATE x1 g $ MKSTREAM
XGROUP CREATE x6 g $
SORT l1 ALPHA STORE so
SORT l1 ALPHA STORE so
SORT nosuch STORE so
RENAME s rn
RENAME rn m1
RENAME m1 m1
RENAMENX m2 rnx
RENAMENX rnx m3
COPY m3 cp
COPY m3 cp
COPY m3 cp REPLACE
COPY m3 cp DB 1
MOVE m4 1
SELECT 1
SET m4 other
SELECT 0
SWAPDB 0 1
SWAPDB 0 1
EVAL "redis.call('set',KEYS[1],'v')" 1 lua1
EVAL "redis.call('set',KEYS[1],'v')" 1 lua1
MULTI
SET tx1 v
RPUSH tx2 a
EXEC
EXPIRE l4 100
PERSIST l4
DEL l4
SET done 1
"""


def _events(sub: RawClient, last: bytes) -> list[bytes]:
    """The frames `sub` received up to the keyevent of `last` ("set" of it), bounded."""
    out = []
    for _ in range(2000):
        frame = sub.read()
        out.append(frame)
        if frame.endswith(b"__keyevent@0__:set\r\n$%d\r\n%s\r\n" % (len(last), last)):
            return out
    raise AssertionError(f"no event of {last!r} in {out[-5:]!r}")


def _short(frames: list[bytes]) -> list[bytes]:
    """Each event as "channel payload", for a readable difference."""
    return [b" ".join(f.split(b"\r\n")[-4::2]) for f in frames]


def _quoted(text: str) -> list[list[bytes]]:
    """cmds() with the EVAL lines' script (in double quotes) kept as one argument."""
    out = []
    for line in cmds(text):
        if line[0] == b"EVAL":
            script = b" ".join(line[1:-2]).strip(b'"')
            out.append([b"EVAL", script, line[-2], line[-1]])
        else:
            out.append([b"" if x == b'""' else x for x in line])
    return out


def _run(pair: Pair, servers: tuple[int, int], flags: bytes, text: str, pattern: bytes = b"__key*") -> list[bytes]:
    subs = [RawClient(port, pair.ref.resp) for port in servers]
    try:
        pair.check([[b"CONFIG", b"SET", b"notify-keyspace-events", flags],
                    [b"CONFIG", b"GET", b"notify-keyspace-events"]])
        for s in subs:
            s.call([b"PSUBSCRIBE", pattern])
        pair.check(_quoted(text))
        ref, us = (_events(s, b"done") for s in subs)
        assert _short(us) == _short(ref)
        assert us == ref
        return ref
    finally:
        for s in subs:
            s.close()
        pair.check([[b"CONFIG", b"SET", b"notify-keyspace-events", b""]])


def test_new_key_events_of_every_creating_command(pair: Pair, servers: tuple[int, int]) -> None:
    """KEAn: the "new" event of each created key (never of an overwrite), in
    redis-server's order among the command's own events (before them: dbAdd runs
    first; MSET's interleaved; SMOVE's after the source's "srem")."""
    ref = _run(pair, servers, b"KEAn", CREATORS)
    assert sum(b"__keyevent@0__:new" in f for f in ref) >= 60


def test_new_key_flag_alone(pair: Pair, servers: tuple[int, int]) -> None:
    """Redis's TCL "Keyspace notifications: new key test": `En`, SET foo twice and SET
    bar give "new" of foo and of bar only (and the flag alone sends no other class)."""
    ref = _run(pair, servers, b"En", "SET foo bar\nSET foo baz\nSET bar bar\nLPUSH l a\nDEL l\nSET done 1\n"
               "CONFIG SET notify-keyspace-events E$\nSET done 1\n", b"*")
    assert [f.rsplit(b"\r\n", 2)[1] for f in ref if b":new\r\n" in f] == [b"foo", b"bar", b"l", b"done"]


def test_blocked_move_creates_its_destination(pair: Pair, servers: tuple[int, int]) -> None:
    """A BLMOVE served by a later push creates its destination then: "new" in the
    pushing command's events, before the destination's push event."""
    blockers = [RawClient(port, pair.ref.resp) for port in servers]
    subs = [RawClient(port, pair.ref.resp) for port in servers]
    try:
        pair.check(cmds("CONFIG SET notify-keyspace-events KEAn"))
        for s in subs:
            s.call([b"PSUBSCRIBE", b"__key*"])
        for b in blockers:
            b.send([b"BLMOVE", b"src", b"dst", b"LEFT", b"RIGHT", b"0"])
        pair.wait_blocked(1)
        pair.check(cmds("RPUSH src a b\nSET done 1"))
        assert blockers[0].read() == blockers[1].read()
        ref, us = (_events(s, b"done") for s in subs)
        assert us == ref
        assert any(f.endswith(b":new\r\n$3\r\ndst\r\n") for f in ref)
    finally:
        for c in blockers + subs:
            c.close()
        pair.check([[b"CONFIG", b"SET", b"notify-keyspace-events", b""]])


def test_restore_and_copy_over_a_key_are_new_keys(pair: Pair, servers: tuple[int, int]) -> None:
    """RESTORE (REPLACE over an existing key included: redis-server deletes it and adds
    the new one) says "new"; one already expired says "del" only."""
    pair.check(cmds("SET k v\nSET gone v"))
    payload = pair.ref.call([b"DUMP", b"k"]).split(b"\r\n", 1)[1][:-2]
    subs = [RawClient(port, pair.ref.resp) for port in servers]
    try:
        pair.check(cmds("CONFIG SET notify-keyspace-events KEAn"))
        for s in subs:
            s.call([b"PSUBSCRIBE", b"__key*"])
        pair.check([[b"RESTORE", b"n", b"0", payload], [b"RESTORE", b"n", b"5000", payload, b"REPLACE"],
                    [b"RESTORE", b"gone", b"1", payload, b"REPLACE", b"ABSTTL"],
                    [b"COPY", b"n", b"k", b"REPLACE"], [b"SET", b"done", b"1"]])
        ref, us = (_events(s, b"done") for s in subs)
        assert _short(us) == _short(ref)
        assert us == ref
        assert sum(f.endswith(b"new\r\n") for f in ref) == 4  # and "done"
    finally:
        for s in subs:
            s.close()
        pair.check([[b"CONFIG", b"SET", b"notify-keyspace-events", b""]])
