"""The `m` keyspace event ("keymiss": a read of a missing key, redis-server's lookupKey)
of the node's map against Debian's redis-server 7.0.15: each reading command (and the
writers that read nothing, which must stay quiet) run on an empty map beside a list `l`
and a stream `x`, replies and every event (channel, payload, order) compared byte for
byte (kv_diff.py, test_kv_diff_notify.py's harness). The table is raims_node/kv/notify.py."""

from __future__ import annotations

from tests.integration.kv_diff import Pair
from tests.integration.test_kv_diff_notify import _run

# one command at a time, each on a fresh map holding `l` and `x`
READERS = """
GET k
MGET k k2 k
STRLEN k
GETRANGE k 0 1
SUBSTR k 0 1
GETDEL k
GETEX k
GETEX k EX 10
GETSET k v
SET k v GET
SET k v
INCR k
APPEND k v
SETRANGE k 0 v
LCS k k2
GETBIT k 1
BITCOUNT k
BITPOS k 1
BITFIELD k GET u8 0
BITFIELD_RO k GET u8 0
BITFIELD k SET u8 0 1
BITOP OR d k k2
EXISTS k k2
TYPE k
TTL k
PTTL k
EXPIRETIME k
PEXPIRETIME k
OBJECT ENCODING k
DUMP k
TOUCH k k2
UNLINK k
DEL k
EXPIRE k 10
PERSIST k
RENAME k k2
RENAMENX k k2
COPY k k2
MOVE k 1
KEYS *
SCAN 0
SORT k
SORT_RO k
SORT k STORE d
LLEN k
LRANGE k 0 -1
LINDEX k 0
LPOS k a
LPOP k
RPOP k
LPUSHX k a
LINSERT k BEFORE a b
LREM k 1 a
LSET k 0 a
LTRIM k 0 1
LMOVE k k2 LEFT RIGHT
RPOPLPUSH k k2
LMPOP 2 k k2 LEFT
BLPOP k k2 0.01
BRPOP k 0.01
BLMOVE k k2 LEFT LEFT 0.01
BLMPOP 0.01 2 k k2 LEFT
HGET k f
HMGET k f g
HGETALL k
HKEYS k
HVALS k
HLEN k
HEXISTS k f
HSTRLEN k f
HRANDFIELD k
HSCAN k 0
HDEL k f
HSET k f v
HSETNX k f v
HINCRBY k f 1
SMEMBERS k
SISMEMBER k a
SMISMEMBER k a b
SCARD k
SRANDMEMBER k
SSCAN k 0
SINTER k k2
SINTERCARD 2 k k2
SUNION k k2
SDIFF k k2
SINTERSTORE d k k2
SUNIONSTORE d k k2
SDIFFSTORE d k k2
SMOVE k k2 a
SPOP k
SREM k a
SADD k a
ZCARD k
ZSCORE k a
ZMSCORE k a
ZRANK k a
ZREVRANK k a
ZCOUNT k 0 1
ZLEXCOUNT k - +
ZRANGE k 0 -1
ZRANGEBYSCORE k 0 1
ZREVRANGE k 0 -1
ZRANGEBYLEX k - +
ZRANDMEMBER k
ZSCAN k 0
ZUNION 2 k k2
ZINTER 2 k k2
ZDIFF 2 k k2
ZINTERCARD 2 k k2
ZUNIONSTORE d 2 k k2
ZINTERSTORE d 2 k k2
ZDIFFSTORE d 2 k k2
ZRANGESTORE d k 0 -1
ZPOPMIN k
ZMPOP 2 k k2 MIN
BZPOPMIN k 0.01
BZMPOP 0.01 2 k k2 MIN
ZREM k a
ZINCRBY k 1 a
ZADD k 1 a
ZREMRANGEBYRANK k 0 1
PFCOUNT k k2
PFCOUNT k
PFMERGE d k k2
PFADD k a
GEOPOS k a
GEODIST k a b
GEOHASH k a
GEORADIUS k 15 37 200 km
GEORADIUSBYMEMBER k a 200 km
GEOSEARCH k FROMLONLAT 15 37 BYRADIUS 200 km
GEOSEARCHSTORE d k FROMLONLAT 15 37 BYRADIUS 200 km
GEORADIUS k 15 37 200 km STORE d
XLEN k
XRANGE k - +
XREVRANGE k + -
XREAD STREAMS k k2 0 0
XREAD BLOCK 10 STREAMS k $
XINFO STREAM k
XPENDING k g
XTRIM k MAXLEN 0
XDEL k 1-1
XADD k NOMKSTREAM * f v
XACK k g 1-1
XSETID k 1-1
XGROUP CREATE k g $
XAUTOCLAIM k g c 0 0
XCLAIM k g c 0 1-1
XREADGROUP GROUP g c STREAMS k >
EVAL "return redis.call('get',KEYS[1])" 1 k
WATCH k
XINFO GROUPS k
XINFO CONSUMERS k g
XGROUP SETID k g $
XGROUP DESTROY k g
XGROUP CREATECONSUMER k g c
XGROUP DELCONSUMER k g c
ZREVRANGEBYSCORE k 1 0
ZREVRANGEBYLEX k + -
ZRANGE k 0 1 BYSCORE REV
SRANDMEMBER k 3
HRANDFIELD k 2
GETEX k PERSIST
SET k v NX GET
BITFIELD k GET u8 0 SET u8 0 1
SORT l BY w_*
SORT l BY nosort GET g_*
GETRANGE k a b
ZRANGE k a b
SINTER k2 k
XREADGROUP GROUP g c STREAMS k k2 > >
XREAD COUNT 1 STREAMS k x 0 0
GEOSEARCH k FROMMEMBER m BYRADIUS 10 km
GEORADIUS_RO k 15 37 200 km
GEORADIUSBYMEMBER_RO k a 200 km
LMPOP 1 k LEFT
SMEMBERS k
"""


def _fresh(text: str) -> str:
    return "".join(f"FLUSHALL\nRPUSH l 1 2\nXADD x 1-1 f v\n{line}\n" for line in text.strip().splitlines())


def test_keymiss_of_every_reading_command(pair: Pair, servers: tuple[int, int]) -> None:
    """KE$m: "keymiss" on both channels for each read lookup of a missing key, as many
    times as redis-server looks it up (MGET k k2 k, XREAD), none for write lookups
    (INCR, LPOP, DEL...), OBJECT, scans and KEYS, nor on an argument error."""
    ref = _run(pair, servers, b"KE$m", _fresh(READERS) + "SET done 1\n")
    assert sum(f.endswith(b"keymiss\r\n") for f in ref) > 100


def test_keymiss_among_other_events(pair: Pair, servers: tuple[int, int]) -> None:
    """AKEm: a miss before the command's own events (SUNIONSTORE's "del", SET GET's
    "set", PFMERGE's), an expired key's "expired" then its "keymiss", SORT's BY / GET
    pattern keys, a script's and a transaction's reads, WRONGTYPE after a miss."""
    text = """
SET s v
SUNIONSTORE s nosuch
SET k v GET
PFMERGE h nosuch
PSETEX gone 1 v
BLPOP sleep 0.01
GET gone
RPUSH l 3 1 2
SET w_1 10
SORT l BY w_* GET # GET g_*
EVAL "return redis.call('get',KEYS[1])" 1 nosuch
MULTI
GET nosuch
HGET nosuch f
EXEC
SINTER nosuch s
SINTER s nosuch
XREADGROUP GROUP g c STREAMS l nosuch > >
GETRANGE nosuch a b
ZRANGE nosuch 0 1 BYSCORE LIMIT x
SET done 1
"""
    ref = _run(pair, servers, b"AKEm", text)
    assert sum(f.endswith(b"keymiss\r\n") for f in ref) >= 8


def test_all_does_not_include_m(pair: Pair, servers: tuple[int, int]) -> None:
    """`A` is every class but `m` (and `n`): no "keymiss"; CONFIG GET shows the flags
    in redis-server's order."""
    pair.check([[b"CONFIG", b"SET", b"notify-keyspace-events", b"mKA"],
                [b"CONFIG", b"GET", b"notify-keyspace-events"],
                [b"CONFIG", b"SET", b"notify-keyspace-events", b"Em"],
                [b"CONFIG", b"GET", b"notify-keyspace-events"]])
    ref = _run(pair, servers, b"KEA", "GET nosuch\nMGET a b\nSET done 1\n")
    assert not any(b"keymiss" in f for f in ref)
