"""The data commands of ms_server's Redis transport against Debian's redis-server: the
same commands per family (hand-written, then hypothesis-generated sequences) to both,
replies compared byte for byte in RESP2 and RESP3 (kv_diff.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.kv_diff import Pair, RawClient, cmds, kv_servers
from tests.integration.test_bridges_net import hot_paths


@pytest.fixture(scope="module", params=["compiled", "python"])
def servers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int]]:
    """redis-server and a node; every test runs on a node with the compiled RESP scan and without."""
    with hot_paths(request.param), kv_servers(tmp_path_factory.mktemp("kvdiff")) as ports:
        yield ports


STRINGS = """
GET s
SET s hello
GET s
SET s world NX
SET s world XX GET
SET n 10 EX 100
TTL n
SET n 11 KEEPTTL
TTL n
SET n 12 EX 0
SET n 12 EX abc
SET n 12 EX 10 PX 100
SET n 12 NX XX
SET n 12 KEEPTTL EX 5
SET n 13 NX GET
SET
SETNX s x
SETNX t x
SETEX e 100 v
SETEX e 0 v
PSETEX e 100000 v
TTL e
MSET a 1 b 2 c 3
MSET a 1 b
MGET a b c nosuch s
MSETNX a 1 z 2
MSETNX y 1 z 2
INCR a
INCRBY a 10
DECR a
DECRBY a 5
INCR s
INCRBY a 9223372036854775807
DECRBY a -9223372036854775808
INCRBY a 1.5
INCRBYFLOAT f 0.1
INCRBYFLOAT f 0.2
INCRBYFLOAT f 1e3
INCRBYFLOAT f abc
INCRBYFLOAT s 1
INCRBYFLOAT g 5
INCRBYFLOAT g -5
APPEND s !!
APPEND new abc
STRLEN s
STRLEN nosuch
GETRANGE s 0 3
GETRANGE s -3 -1
GETRANGE s 5 2
GETRANGE s -1 -5
GETRANGE s 0 100
GETRANGE nosuch 0 1
SETRANGE s 2 XY
SETRANGE s 20 Z
GET s
SETRANGE sr 0 ""
SETRANGE s -1 x
GETDEL s
GETDEL s
SET x v
GETEX x EX 100
TTL x
GETEX x PERSIST
TTL x
GETEX x PX 0
GETEX x EX 1 PERSIST
GETEX nosuch EX 10
GETSET x new
GETSET x2 new
LPUSH l a
GET l
GETSET l x
"""

KEYS = """
SET a 1
SET b 2
RPUSH l x
SADD s m
HSET h f v
ZADD z 1 m
EXISTS a b nosuch a
DEL a nosuch
UNLINK b
TYPE l
TYPE s
TYPE h
TYPE z
TYPE nosuch
SET k v
EXPIRE k 100
TTL k
EXPIRE k 50 GT
EXPIRE k 200 GT
TTL k
EXPIRE k 300 LT
EXPIRE k 100 LT
TTL k
EXPIRE k 100 NX
EXPIRE k 100 XX
EXPIRE k 100 NX XX
EXPIRE k 100 GT LT
EXPIRE k 100 FOO
EXPIRE k abc
EXPIRE nosuch 100
PERSIST k
PERSIST k
TTL k
PTTL nosuch
PTTL k
EXPIRE k 100 GT
EXPIRE k 100 LT
PEXPIRE k 100000
TTL k
EXPIREAT k 4102444800
EXPIRETIME k
PEXPIRETIME k
PEXPIREAT k 4102444800000
TTL nosuch
EXPIRE k -1
EXISTS k
RENAME l l2
TYPE l2
RENAME nosuch x
RENAME l2 l2
RENAMENX l2 s
RENAMENX l2 l3
RENAMENX l3 l3
SET t v EX 100
RENAME t t2
TTL t2
KEYS *
KEYS l*
KEYS ?
KEYS [hs]
KEYS *[^x]
DBSIZE
MOVE s 1
MOVE s 1
MOVE z 0
MOVE z 16
MOVE z x
MOVE z 2147483648
MOVE z -2147483649
MOVE z 2147483647
SELECT 1
KEYS *
MOVE s 0
SET s other
MOVE s 0
DBSIZE
FLUSHDB
DBSIZE
SELECT 0
DBSIZE
FLUSHDB ASYNC
FLUSHDB FOO
DBSIZE
RANDOMKEY
SET only 1
RANDOMKEY
SCAN 0
SCAN 0 MATCH o*
SCAN 0 COUNT 0
SCAN abc
SCAN 0 TYPE string
SCAN 0 TYPE list
SCAN 0 FOO bar
"""

HASHES = """
HSET h f1 v1 f2 v2
HSET h f1 x
HSET h f3
HSETNX h f1 y
HSETNX h f4 y
HGET h f1
HGET h nosuch
HGET nosuch f
HMGET h f1 nosuch f2
HMSET h f5 v5
HLEN h
HSTRLEN h f1
HEXISTS h f1
HEXISTS h nosuch
HKEYS h
HVALS h
HGETALL h
HGETALL nosuch
HINCRBY h n 5
HINCRBY h n -10
HINCRBY h f1 1
HINCRBY h n abc
HINCRBY h n 9223372036854775807
HINCRBYFLOAT h fl 1.5
HINCRBYFLOAT h fl 0.1
HINCRBYFLOAT h f1 1
HINCRBYFLOAT h fl abc
HDEL h f1 f2 nosuch
HGETALL h
HDEL h f3 f4 f5 n fl
EXISTS h
SET s v
HGET s f
HSET s f v
HSCAN h 0
HSET h a 1 b 2
HSCAN h 0
HSCAN h 0 MATCH a
"""

LISTS = """
LPUSH l a b c
RPUSH l d e
LRANGE l 0 -1
LRANGE l 1 2
LRANGE l -2 -1
LRANGE l 5 1
LRANGE l -100 100
LRANGE nosuch 0 -1
LLEN l
LINDEX l 0
LINDEX l -1
LINDEX l 99
LPUSHX l z
LPUSHX nosuch z
RPUSHX l y
LPOP l
RPOP l
LPOP l 2
RPOP l 0
LPOP nosuch
LPOP nosuch 2
LPOP l -1
LSET l 0 X
LSET l 99 X
LSET nosuch 0 X
LRANGE l 0 -1
RPUSH r a b a c a
LREM r 2 a
LRANGE r 0 -1
LREM r -1 a
LREM r 0 zz
LINSERT r BEFORE c q
LINSERT r AFTER nosuch q
LINSERT r MIDDLE c q
LINSERT nosuch BEFORE c q
LRANGE r 0 -1
LTRIM r 1 -1
LRANGE r 0 -1
LTRIM r 5 10
EXISTS r
RPUSH p a b c a b c
LPOS p b
LPOS p b RANK 2
LPOS p b RANK -1
LPOS p b COUNT 0
LPOS p b COUNT 1
LPOS p x
LPOS p x COUNT 2
LPOS p b RANK 0
LPOS p a MAXLEN 1
LPOS p a RANK -9223372036854775808
LPOS p a RANK -9223372036854775808 COUNT 1
LPOS p c RANK -9223372036854775808 COUNT 1 MAXLEN 5
LPOS p x RANK -9223372036854775808 COUNT 1
LPOS p a RANK -9223372036854775807 COUNT 1
LMOVE p q LEFT RIGHT
LMOVE p q RIGHT LEFT
LMOVE p q UP LEFT
LRANGE q 0 -1
RPOPLPUSH p q
RPOPLPUSH nosuch q
LMOVE nosuch q LEFT LEFT
SET s v
LPUSH s x
LRANGE s 0 -1
LMOVE p s LEFT LEFT
BLPOP p q 0.1
BRPOP nosuch p 1
BLPOP nosuch 0.01
BLPOP p -1
BLPOP p abc
BLMOVE q p LEFT LEFT 0
BLMOVE nosuch p LEFT LEFT 0.01
BRPOPLPUSH q p 0
BRPOPLPUSH nosuch p 0.01
"""

SETS = """
SADD s a b c
SADD s a d
SREM s a nosuch
SCARD s
SISMEMBER s b
SISMEMBER s a
SMISMEMBER s a b nosuch
SMEMBERS s
SMEMBERS nosuch
SADD n 3 1 2 10
SMEMBERS n
SADD t c d e
SINTER s t
SUNION s t
SDIFF s t
SDIFF t s nosuch
SINTER s nosuch
SINTERSTORE d s t
SMEMBERS d
SUNIONSTORE d s t
SCARD d
SDIFFSTORE d s t
SMEMBERS d
SINTERSTORE d s nosuch
EXISTS d
SINTERCARD 2 s t
SINTERCARD 2 s t LIMIT 1
SINTERCARD 0 s
SINTERCARD 3 s t
SINTERCARD 2 s t LIMIT -1
SMOVE s t b
SMOVE s t nosuch
SMOVE nosuch t b
SMEMBERS t
SPOP nosuch
SPOP nosuch 2
SADD one x
SPOP one
SPOP one 3
SRANDMEMBER nosuch
SRANDMEMBER nosuch 3
SRANDMEMBER nosuch x
SRANDMEMBER nosuch -9223372036854775808
SRANDMEMBER one 1.5
SET str v
SRANDMEMBER str x
SADD str x
SMEMBERS str
SSCAN n 0
SSCAN n 0 MATCH 1*
"""

ZSETS = """
ZADD z 1 a 2 b 3 c
ZADD z 1.5 a
ZADD z NX 5 a 4 d
ZADD z XX 6 a 7 e
ZADD z XX CH 6.5 a
ZADD z GT 1 b
ZADD z LT 1 b
ZADD z INCR 10 b
ZADD z INCR 1 b 2 c
ZADD z NX XX 1 a
ZADD z GT LT 1 a
ZADD z 1
ZADD z abc a
ZADD z NX INCR 1 a
ZADD z inf i -inf j
ZSCORE z a
ZSCORE z nosuch
ZSCORE z i
ZMSCORE z a nosuch b
ZCARD z
ZRANK z a
ZREVRANK z a
ZRANK z nosuch
ZRANGE z 0 -1
ZRANGE z 0 -1 WITHSCORES
ZRANGE z 1 2 REV WITHSCORES
ZRANGE z -inf +inf BYSCORE
ZRANGE z (1 3 BYSCORE WITHSCORES
ZRANGE z 10 1 BYSCORE REV LIMIT 1 2
ZRANGE z 0 -1 LIMIT 0 1
ZRANGE z a b BYLEX WITHSCORES
ZRANGEBYSCORE z 1 3
ZRANGEBYSCORE z (1 (3 WITHSCORES
ZRANGEBYSCORE z -inf +inf LIMIT 1 2
ZRANGEBYSCORE z x 3
ZREVRANGEBYSCORE z +inf -inf WITHSCORES
ZREVRANGE z 0 1 WITHSCORES
ZREVRANGE z 0 1 FOO
ZCOUNT z 1 3
ZCOUNT z (1 +inf
ZCOUNT z x 1
ZADD lex 0 a 0 b 0 c 0 d
ZRANGEBYLEX lex - +
ZRANGEBYLEX lex [b (d
ZRANGEBYLEX lex (a + LIMIT 1 1
ZRANGEBYLEX lex a b
ZREVRANGEBYLEX lex + [b
ZLEXCOUNT lex - +
ZLEXCOUNT lex [b [c
ZRANGE lex [a [c BYLEX
ZRANGE lex [c [a BYLEX REV
ZINCRBY z 2.5 a
ZINCRBY z 1 new
ZINCRBY z abc a
ZREM z a nosuch
ZREMRANGEBYRANK z 0 0
ZREMRANGEBYSCORE z 5 8
ZREMRANGEBYLEX lex [a [b
ZRANGE z 0 -1 WITHSCORES
ZRANGE lex 0 -1
ZPOPMIN z
ZPOPMAX z
ZPOPMIN z 2
ZPOPMAX z 0
ZPOPMIN nosuch
ZPOPMIN nosuch 1
ZADD f 0.1 x 1e20 y -0.5 w
ZRANGE f 0 -1 WITHSCORES
ZSCORE f x
ZSCAN f 0
SET s v
ZADD s 1 a
ZSCORE s a
ZADD u1 1 a 2 b 3 c
ZADD u2 10 b 20 c 30 d
SADD plain c d e
ZUNION 2 u1 u2
ZUNION 3 u1 u2 plain WITHSCORES
ZUNION 2 u1 u2 WEIGHTS 2 0.5 AGGREGATE MAX WITHSCORES
ZINTER 2 u1 u2 AGGREGATE MIN WITHSCORES
ZINTER 3 u1 u2 plain WITHSCORES
ZDIFF 2 u1 u2 WITHSCORES
ZDIFF 2 u1 u2 WEIGHTS 1 1
ZUNIONSTORE out 2 u1 u2 WEIGHTS 1 -1
ZRANGE out 0 -1 WITHSCORES
ZINTERSTORE out 2 u1 nosuch
EXISTS out
ZDIFFSTORE out 2 u2 u1
ZRANGE out 0 -1 WITHSCORES
ZUNION 0 u1
ZUNION 3 u1 u2
ZUNION 2 u1 s
ZUNION 2 u1 u2 WEIGHTS 1 x
ZUNION 2 u1 u2 AGGREGATE AVG
ZUNIONSTORE out 2 u1 u2 WITHSCORES
ZADD infs inf a -inf b
ZUNION 2 infs infs WITHSCORES
ZUNION 2 infs infs WEIGHTS 0 1 WITHSCORES
ZRANGESTORE rs u2 0 1
ZRANGE rs 0 -1 WITHSCORES
ZRANGESTORE rs u2 (10 +inf BYSCORE LIMIT 0 1
ZRANGE rs 0 -1 WITHSCORES
ZRANGESTORE rs lex [a [c BYLEX
ZRANGE rs 0 -1 WITHSCORES
ZRANGESTORE rs u2 0 1 WITHSCORES
ZRANGESTORE rs nosuch 0 -1
EXISTS rs
"""

TRANSACTIONS = """
MULTI
SET a 1
INCR a
GET a
LPUSH l x
EXEC
MULTI
MULTI
SET a 2
FOO bar
EXEC
GET a
EXEC
DISCARD
MULTI
SET a 3
DISCARD
GET a
MULTI
INCR a
GET
EXEC
WATCH a
MULTI
WATCH b
UNWATCH
EXEC
MULTI
SET a 1
INCR a
SET s v
LPUSH s x
EXEC
"""


MPOPS = """
LMPOP 1 l LEFT
RPUSH l a b c d e
LMPOP 2 none l LEFT
LMPOP 1 l RIGHT COUNT 2
LMPOP 1 l left count 10
EXISTS l
LMPOP 1 l LEFT
RPUSH l a
LMPOP 0 l LEFT
LMPOP -1 l LEFT
LMPOP x l LEFT
LMPOP 3 l LEFT
LMPOP 1 l MIDDLE
LMPOP 1 l LEFT COUNT 0
LMPOP 1 l LEFT COUNT x
LMPOP 1 l LEFT COUNT 1 COUNT 1
LMPOP 1 l LEFT EXTRA
LMPOP 1 l
SET s v
LMPOP 2 s l LEFT
LMPOP 2 l s LEFT
BLMPOP 0.01 1 none LEFT
BLMPOP 0 2 s l RIGHT
BLMPOP x 1 l LEFT
BLMPOP -1 1 l LEFT
BLMPOP 0 0 l LEFT
BLMPOP 0 1 l
RPUSH m 1 2 3
BLMPOP 0 2 none m RIGHT COUNT 2
ZADD z 1 a 2 b 3 c
BZPOPMIN z 0
BZPOPMAX none z 0
BZPOPMIN none 0.01
BZPOPMIN z x
BZPOPMIN z -1
BZPOPMAX s 0
BZPOPMIN z
ZRANGE z 0 -1 WITHSCORES
"""

OBJECTS = """
SET s v
COPY s t
GET t
COPY s t
COPY s t REPLACE
COPY s s
COPY none t
COPY s t DB 1 REPLACE
COPY s t DB 16
COPY s t DB x
COPY s t DB 2147483648
COPY s t DB -2147483649
COPY s t DB
COPY s t BOGUS
COPY s s DB 1
SET e v PX 100000
COPY e e2
TTL e2
RPUSH l a b
COPY l l2
RPUSH l2 c
LRANGE l 0 -1
LRANGE l2 0 -1
HSET h f v
COPY h h2
HGETALL h2
SADD st 1 2
COPY st st2
SMEMBERS st2
ZADD z 1 a 2 b
COPY z z2
ZADD z2 3 c
ZRANGE z 0 -1 WITHSCORES
ZRANGE z2 0 -1 WITHSCORES
SELECT 1
GET t
SELECT 0
SWAPDB 0 1
DBSIZE
GET t
SWAPDB 0 1
SWAPDB 0 0
SWAPDB 0 16
SWAPDB x 0
SWAPDB 0 x
SWAPDB -1 0
SWAPDB 99999999999 0
GET s
SET i 123
SET neg -5
SET big 12345678901234567890
SET zero 0
SET lead 0123
SET long aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
SET short aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
OBJECT ENCODING i
OBJECT ENCODING neg
OBJECT ENCODING big
OBJECT ENCODING zero
OBJECT ENCODING lead
OBJECT ENCODING long
OBJECT ENCODING short
OBJECT ENCODING s
OBJECT ENCODING l
OBJECT ENCODING h
OBJECT ENCODING st
OBJECT ENCODING z
SADD strs a b
OBJECT ENCODING strs
HSET bigh f aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
OBJECT ENCODING bigh
ZADD bigz 1 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
OBJECT ENCODING bigz
OBJECT ENCODING none
OBJECT REFCOUNT i
OBJECT REFCOUNT s
OBJECT REFCOUNT big
OBJECT REFCOUNT l
OBJECT REFCOUNT none
OBJECT IDLETIME s
OBJECT IDLETIME none
OBJECT FREQ s
OBJECT ENCODING
OBJECT ENCODING s extra
OBJECT BOGUS s
OBJECT
"""

RANDOMS = """
HRANDFIELD none
HRANDFIELD none 3
HRANDFIELD none 3 WITHVALUES
HSET h f v
HRANDFIELD h
HRANDFIELD h 0
HRANDFIELD h 1
HRANDFIELD h -3
HRANDFIELD h 5 WITHVALUES
HRANDFIELD h -2 WITHVALUES
HRANDFIELD h 1 withvalues
HRANDFIELD h x
HRANDFIELD h 1 WITHSCORES
HRANDFIELD h 1 WITHVALUES extra
HRANDFIELD h -9223372036854775808
HRANDFIELD h 4611686018427387904 WITHVALUES
HSET h g w k x
HRANDFIELD h 3
HRANDFIELD h 10 WITHVALUES
ZRANDMEMBER none
ZRANDMEMBER none 2 WITHSCORES
ZADD z 1.5 a
ZRANDMEMBER z
ZRANDMEMBER z 0
ZRANDMEMBER z -3 WITHSCORES
ZRANDMEMBER z 2 WITHSCORES
ZRANDMEMBER z 1 WITHVALUES
ZRANDMEMBER z x
ZADD z 2 b 3 c
ZRANDMEMBER z 3
ZRANDMEMBER z 7 WITHSCORES
SET s v
HRANDFIELD s
HRANDFIELD s 2
ZRANDMEMBER s 2
"""


SAVES = """
SET a 1
SAVE
SAVE x
BGSAVE NOW
BGSAVE SCHEDULE x
LASTSAVE x
GET a
"""


@pytest.mark.parametrize("family", [STRINGS, KEYS, HASHES, LISTS, SETS, ZSETS, TRANSACTIONS, MPOPS, OBJECTS,
                                    RANDOMS, SAVES],
                         ids=["strings", "keys", "hashes", "lists", "sets", "zsets", "transactions", "mpops",
                              "objects", "randoms", "saves"])
def test_family(pair: Pair, family: str) -> None:
    pair.check([[b"" if a == b'""' else a for a in cmd] for cmd in cmds(family)])


@pytest.mark.parametrize("n", [128, 129, 512, 513])
def test_encodings_at_their_size_limits(pair: Pair, n: int) -> None:
    """OBJECT ENCODING around redis-server 7.0's defaults: hashes listpack up to 512
    fields, sets intset up to 512, sorted sets listpack up to 128 members."""
    members = [b"%d" % i for i in range(n)]
    pair.check([[b"HSET", b"h", *(x for m in members for x in (b"f" + m, m))], [b"OBJECT", b"ENCODING", b"h"],
                [b"SADD", b"s", *members], [b"OBJECT", b"ENCODING", b"s"],
                [b"ZADD", b"z", *(x for m in members for x in (m, b"m" + m))], [b"OBJECT", b"ENCODING", b"z"]])


def test_info_keyspace_and_config(pair: Pair) -> None:
    pair.check(cmds("""
SET a 1
SET b 2 EX 1000
INFO keyspace
INFO cluster
ROLE
TIME extra
AUTH secret
AUTH default secret
AUTH user secret
AUTH a b c
AUTH
CONFIG GET notify-keyspace-events
CONFIG SET notify-keyspace-events KEA
CONFIG GET notify-keyspace-events
CONFIG SET notify-keyspace-events Elg$x
CONFIG GET notify-keyspace-events
CONFIG SET notify-keyspace-events Q
CONFIG SET notify-keyspace-events ""
CONFIG GET maxmemory
CONFIG GET MAXMEMORY-POLICY
CONFIG GET appendfsync
CONFIG GET hash-max-listpack-entries
CONFIG GET hash-max-ziplist-value
CONFIG GET set-max-intset-entries
CONFIG GET zset-max-listpack-entries
CONFIG GET zset-max-ziplist-value
CONFIG GET list-max-listpack-size
CONFIG GET nosuch-parameter
MODULE LIST
MODULE LIST x
MODULE
"""))


def test_watch_sees_another_client(pair: Pair, servers: tuple[int, int]) -> None:
    """EXEC fails (null array) when another connection changed a WATCHed key."""
    other = Pair(servers[0], servers[1], pair.ref.resp)
    try:
        pair.check(cmds("SET w 1\nWATCH w\nMULTI\nINCR w"))
        other.check(cmds("SET w 5"))
        pair.check(cmds("EXEC\nGET w\nWATCH w\nMULTI\nINCR w\nEXEC"))
    finally:
        other.close()


def test_blocked_client_is_served_by_a_push(pair: Pair, servers: tuple[int, int]) -> None:
    """A client blocked in BLPOP (replies pending) gets the pushed element, then its
    pipelined next command runs; a timeout answers the null array."""
    other = Pair(servers[0], servers[1], pair.ref.resp)
    try:
        for c in (pair.ref, pair.us):
            c.send([b"BLPOP", b"q1", b"q2", b"5"])
            c.send([b"PING"])
        other.check(cmds("RPUSH q2 a b\nLLEN q2"))
        assert pair.us.read() == pair.ref.read() == b"*2\r\n$2\r\nq2\r\n$1\r\na\r\n"
        assert pair.us.read() == pair.ref.read()
        pair.check(cmds("BLMOVE q2 dst RIGHT LEFT 0\nBRPOP none 0.05\nLRANGE dst 0 -1"))
    finally:
        other.close()


def test_client_unblock_answers_a_blocked_pop(pair: Pair, servers: tuple[int, int]) -> None:
    """CLIENT UNBLOCK id [TIMEOUT|ERROR] from another connection: the blocked BLPOP
    answers nil or the UNBLOCKED error and its pipelined next command runs; 1 for a
    blocked client, 0 for one that is not (itself, or an unknown id); bad arguments get
    redis-server's errors."""
    other = Pair(servers[0], servers[1], pair.ref.resp)
    try:
        for how in ([], [b"TIMEOUT"], [b"ERROR"], [b"error"]):
            ids = [int(c.call([b"CLIENT", b"ID"])[1:-2]) for c in (pair.ref, pair.us)]
            for c in (pair.ref, pair.us):
                c.send([b"BLPOP", b"q", b"0"])
                c.send([b"ECHO", b"next"])
            other.wait_blocked(1)
            for o, client_id in zip((other.ref, other.us), ids, strict=True):
                assert o.call([b"CLIENT", b"UNBLOCK", b"%d" % client_id, *how]) == b":1\r\n"
            assert pair.us.read() == pair.ref.read()
            assert pair.us.read() == pair.ref.read() == b"$4\r\nnext\r\n"
            other.wait_blocked(0)
        other.check(cmds("""
CLIENT UNBLOCK 987654 ERROR
CLIENT UNBLOCK -1
CLIENT UNBLOCK x
CLIENT UNBLOCK 1 FOO
CLIENT UNBLOCK 1 TIMEOUT extra
CLIENT UNBLOCK
CLIENT NO-EVICT on
CLIENT NO-EVICT OFF
CLIENT NO-EVICT maybe
CLIENT NO-EVICT
CLIENT GETREDIR
CLIENT GETREDIR x
CLIENT TRACKINGINFO
CLIENT TRACKINGINFO x
"""))
    finally:
        other.close()


def test_blocked_lmpop_and_zpop_are_served_and_time_out(pair: Pair, servers: tuple[int, int]) -> None:
    """BLMPOP and BZPOPMIN park the client; a push (RPUSH, ZADD creating the key) serves
    it; BLPOP on a key that became a sorted set keeps waiting; timeouts answer null."""
    other = Pair(servers[0], servers[1], pair.ref.resp)
    try:
        for c in (pair.ref, pair.us):
            c.send([b"BLMPOP", b"5", b"2", b"q1", b"q2", b"RIGHT", b"COUNT", b"2"])
        other.check(cmds("RPUSH q2 a b c"))
        assert pair.us.read() == pair.ref.read()
        for c in (pair.ref, pair.us):
            c.send([b"BZPOPMAX", b"z1", b"z2", b"5"])
        other.check(cmds("ZADD z2 1 a 2 b"))
        assert pair.us.read() == pair.ref.read()
        for c in (pair.ref, pair.us):
            c.send([b"BLPOP", b"zz", b"0.3"])
            c.send([b"BZPOPMIN", b"zz", b"5"])
        other.wait_blocked(1)  # BLPOP parked first: a sorted set made before it is WRONGTYPE
        other.check(cmds("ZADD zz 7 m"))
        assert pair.us.read() == pair.ref.read()  # BLPOP: null at its deadline
        assert pair.us.read() == pair.ref.read()  # then BZPOPMIN takes m at once
        pair.check(cmds("BZPOPMIN none 0.05\nBLMPOP 0.05 1 none LEFT\nLRANGE q2 0 -1\nZRANGE z2 0 -1"))
    finally:
        other.close()


def test_random_replies_keep_redis_shapes(pair: Pair) -> None:
    """HRANDFIELD / ZRANDMEMBER with counts on several elements: the same reply shape as
    redis-server's (lengths, pairs), distinct elements for a positive count, elements
    of the key only, and the values or scores that belong to them."""
    from tests.integration.kv_diff import parse

    pair.check(cmds("HSET h a 1 b 2 c 3 d 4\nZADD z 1 a 2 b 3 c 4 d"))
    values = {b"a": b"1", b"b": b"2", b"c": b"3", b"d": b"4"}
    for cmd in ([b"HRANDFIELD", b"h", b"2"], [b"HRANDFIELD", b"h", b"-7"], [b"HRANDFIELD", b"h", b"3", b"WITHVALUES"],
                [b"HRANDFIELD", b"h", b"-5", b"WITHVALUES"], [b"ZRANDMEMBER", b"z", b"3"],
                [b"ZRANDMEMBER", b"z", b"-6", b"WITHSCORES"], [b"ZRANDMEMBER", b"z", b"2", b"WITHSCORES"],
                [b"HRANDFIELD", b"h"], [b"ZRANDMEMBER", b"z"]):
        replies = [parse(c.call(cmd)) for c in (pair.ref, pair.us)]
        shapes = []
        for r in replies:
            if cmd[-1] in (b"WITHVALUES", b"WITHSCORES"):
                kind, items = r
                pairs = [tuple(x[1]) for x in items] if pair.ref.resp == 3 else list(zip(items[::2], items[1::2], strict=True))
                for k, v in pairs:
                    assert k in values and (v == values[k] or v == (b",", values[k]))  # RESP3 scores are doubles
                shapes.append((kind, len(items), [type(x).__name__ for x in items]))
                names = [k for k, _v in pairs]
            elif len(cmd) == 2:
                assert r in values
                shapes.append(type(r).__name__)
                names = []
            else:
                kind, names = r
                assert set(names) <= set(values)
                shapes.append((kind, len(names)))
            if not cmd[2:3] or not cmd[2].startswith(b"-"):
                assert len(set(names)) == len(names)
        assert shapes[0] == shapes[1], (cmd, replies)


_KEYS = st.sampled_from([b"k1", b"k2", b"k3"])
_VALS = st.sampled_from([b"0", b"1", b"-3", b"10", b"a", b"xyz", b"2.5", b""])
_INTS = st.sampled_from([b"0", b"1", b"-1", b"2", b"-2", b"5", b"100"])
_SCORES = st.sampled_from([b"0", b"1", b"1.5", b"-2", b"inf", b"-inf", b"3"])


def _command() -> st.SearchStrategy[list[bytes]]:
    k, v, i, s = _KEYS, _VALS, _INTS, _SCORES
    forms: list[st.SearchStrategy[list[bytes]]] = [
        st.tuples(st.just(b"SET"), k, v).map(list),
        st.tuples(st.just(b"GET"), k).map(list),
        st.tuples(st.just(b"APPEND"), k, v).map(list),
        st.tuples(st.just(b"INCRBY"), k, i).map(list),
        st.tuples(st.just(b"GETRANGE"), k, i, i).map(list),
        st.tuples(st.just(b"SETRANGE"), k, st.sampled_from([b"0", b"2"]), v).map(list),
        st.tuples(st.just(b"DEL"), k).map(list),
        st.tuples(st.just(b"EXISTS"), k, k).map(list),
        st.tuples(st.just(b"TYPE"), k).map(list),
        st.tuples(st.just(b"RENAME"), k, k).map(list),
        st.tuples(st.just(b"EXPIRE"), k, st.sampled_from([b"100", b"1000"])).map(list),
        st.tuples(st.just(b"TTL"), k).map(list),
        st.tuples(st.just(b"PERSIST"), k).map(list),
        st.tuples(st.just(b"LPUSH"), k, v).map(list),
        st.tuples(st.just(b"RPUSH"), k, v, v).map(list),
        st.tuples(st.just(b"LPOP"), k).map(list),
        st.tuples(st.just(b"RPOP"), k, st.sampled_from([b"1", b"2"])).map(list),
        st.tuples(st.just(b"LRANGE"), k, i, i).map(list),
        st.tuples(st.just(b"LINDEX"), k, i).map(list),
        st.tuples(st.just(b"LREM"), k, i, v).map(list),
        st.tuples(st.just(b"LTRIM"), k, i, i).map(list),
        st.tuples(st.just(b"LMOVE"), k, k, st.sampled_from([b"LEFT", b"RIGHT"]),
                  st.sampled_from([b"LEFT", b"RIGHT"])).map(list),
        st.tuples(st.just(b"HSET"), k, v, v).map(list),
        st.tuples(st.just(b"HGET"), k, v).map(list),
        st.tuples(st.just(b"HDEL"), k, v).map(list),
        st.tuples(st.just(b"HINCRBY"), k, v, i).map(list),
        st.tuples(st.just(b"HGETALL"), k).map(list),
        st.tuples(st.just(b"HLEN"), k).map(list),
        st.tuples(st.just(b"SADD"), k, v, v).map(list),
        st.tuples(st.just(b"SREM"), k, v).map(list),
        st.tuples(st.just(b"SMEMBERS"), k).map(list),
        st.tuples(st.just(b"SISMEMBER"), k, v).map(list),
        st.tuples(st.just(b"SINTER"), k, k).map(list),
        st.tuples(st.just(b"SUNIONSTORE"), k, k, k).map(list),
        st.tuples(st.just(b"SCARD"), k).map(list),
        st.tuples(st.just(b"ZADD"), k, s, v).map(list),
        st.tuples(st.just(b"ZINCRBY"), k, s, v).map(list),
        st.tuples(st.just(b"ZSCORE"), k, v).map(list),
        st.tuples(st.just(b"ZRANGE"), k, i, i, st.sampled_from([b"WITHSCORES", b"REV"])).map(list),
        st.tuples(st.just(b"ZRANGEBYSCORE"), k, s, s, st.just(b"WITHSCORES")).map(list),
        st.tuples(st.just(b"ZRANK"), k, v).map(list),
        st.tuples(st.just(b"ZREM"), k, v).map(list),
        st.tuples(st.just(b"ZPOPMIN"), k).map(list),
        st.tuples(st.just(b"ZCOUNT"), k, s, s).map(list),
        st.tuples(st.just(b"ZRANGE"), k, s, s, st.just(b"BYSCORE"), st.just(b"LIMIT"), i, i).map(list),
        st.tuples(st.just(b"ZRANGEBYLEX"), k, st.sampled_from([b"-", b"[a", b"(a", b"[xyz"]),
                  st.sampled_from([b"+", b"[b", b"(xyz", b"[0"])).map(list),
        st.tuples(st.just(b"ZREMRANGEBYRANK"), k, i, i).map(list),
        st.tuples(st.just(b"ZADD"), k, st.sampled_from([b"NX", b"XX", b"GT", b"LT", b"CH", b"INCR"]), s, v).map(list),
        st.tuples(st.just(b"LPOS"), k, v, st.just(b"RANK"), i).map(list),
        st.tuples(st.just(b"LINSERT"), k, st.sampled_from([b"BEFORE", b"AFTER"]), v, v).map(list),
        st.tuples(st.just(b"LSET"), k, i, v).map(list),
        st.tuples(st.just(b"INCRBYFLOAT"), k, st.sampled_from([b"0.1", b"-2.5", b"1e3", b"3"])).map(list),
        st.tuples(st.just(b"HINCRBYFLOAT"), k, v, st.sampled_from([b"0.1", b"-2.5", b"1e3"])).map(list),
        st.tuples(st.just(b"SINTERCARD"), st.just(b"2"), k, k).map(list),
        st.tuples(st.just(b"SDIFFSTORE"), k, k, k).map(list),
        st.tuples(st.just(b"SMOVE"), k, k, v).map(list),
        st.tuples(st.just(b"EXPIRE"), k, st.sampled_from([b"100", b"200"]),
                  st.sampled_from([b"NX", b"XX", b"GT", b"LT"])).map(list),
        st.tuples(st.just(b"GETEX"), k, st.sampled_from([b"PERSIST", b"EX"])).map(list),
        st.tuples(st.just(b"RENAMENX"), k, k).map(list),
        st.tuples(st.just(b"MOVE"), k, st.just(b"1")).map(list),
        st.tuples(st.sampled_from([b"ZUNIONSTORE", b"ZINTERSTORE", b"ZDIFFSTORE"]), k, st.just(b"2"), k, k).map(list),
        st.tuples(st.sampled_from([b"ZUNION", b"ZINTER"]), st.just(b"2"), k, k, st.just(b"AGGREGATE"),
                  st.sampled_from([b"SUM", b"MIN", b"MAX"]), st.just(b"WITHSCORES")).map(list),
        st.tuples(st.just(b"SCAN"), st.just(b"0"), st.just(b"TYPE"), st.sampled_from([b"list", b"zset"])).map(list),
        st.tuples(st.just(b"LMPOP"), st.just(b"2"), k, k, st.sampled_from([b"LEFT", b"RIGHT"]), st.just(b"COUNT"),
                  st.sampled_from([b"1", b"2"])).map(list),
        st.tuples(st.sampled_from([b"BZPOPMIN", b"BZPOPMAX"]), k, k, st.just(b"0.01")).map(list),
        st.tuples(st.just(b"COPY"), k, k, st.sampled_from([b"REPLACE", b"DB"]), st.just(b"1")).map(list),
        st.tuples(st.just(b"COPY"), k, k).map(list),
        st.tuples(st.just(b"OBJECT"), st.sampled_from([b"ENCODING", b"REFCOUNT"]), k).map(list),
        st.tuples(st.just(b"SWAPDB"), st.just(b"0"), st.just(b"1")).map(list),
    ]
    return st.one_of(forms)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=st.lists(_command(), min_size=1, max_size=25).filter(
    # OBJECT answers from the current value (kv/objects.py's decision), redis-server from how
    # it was written: INCRBYFLOAT's "3" is an embstr there, an int here; APPEND's and
    # SETRANGE's values are raw there
    lambda seq: b"OBJECT" not in (names := {cmd[0] for cmd in seq})
    or not names & {b"INCRBYFLOAT", b"APPEND", b"SETRANGE"}))
def test_generated_sequences(pair: Pair, sequence: list[list[bytes]]) -> None:
    pair.reset()
    pair.check(sequence)


def test_no_args_left_behind(tmp_path: Path) -> None:
    """The map-less read path answers as an empty redis-server would (in-process)."""
    from raims_node.kv import open_kv
    from raims_node.kv.commands import KVClient
    from raims_node.kv.reply import encode

    engine, mf = open_kv(None)
    assert mf is None
    c = KVClient()
    assert encode(engine.execute(c, [b"GET", b"x"]), 2) == b"$-1\r\n"
    assert encode(engine.execute(c, [b"LRANGE", b"x", b"0", b"-1"]), 3) == b"*0\r\n"
    assert encode(engine.execute(c, [b"SET", b"x", b"1"]), 2).startswith(b"-ERR no key-value map")


def test_monitor_lines_match_redis_server(pair: Pair, servers: tuple[int, int]) -> None:
    """MONITOR (redis_monitor.py): the lines another client's commands produce, the time
    and client address aside, are redis-server's, escapes, databases, a pipeline of
    PUBLISHes, MULTI / EXEC and AUTH's redaction included; RESET ends monitoring."""
    sent = [[b"SET", b"k", b'a "b"\\c\n\r\t\x07\x08\x00\xff'], [b"SELECT", b"3"], [b"GET", b"k"],
            [b"SELECT", b"0"], *[[b"PUBLISH", b"chan", b"%d" % i] for i in range(40)],
            [b"MULTI"], [b"INCR", b"n"], [b"EXEC"], [b"AUTH", b"user", b"secret"], [b"ECHO", b""]]
    got = []
    for port, client in zip(servers, (pair.ref, pair.us), strict=True):
        mon = RawClient(port, pair.ref.resp)
        try:
            assert mon.call([b"MONITOR"]) == b"+OK\r\n"
            for cmd in sent:
                client.send(cmd)
            for _ in sent:
                client.read()
            assert client.call([b"PING"]) == b"+PONG\r\n"
            lines = []
            while not lines or b'"PING"' not in lines[-1]:
                lines.append(mon.read())
            assert mon.call([b"RESET"]) == b"+RESET\r\n"
            client.call([b"ECHO", b"after"])
            assert mon.call([b"PING"]) == b"+PONG\r\n"  # nothing shown after RESET
        finally:
            mon.close()
        got.append([re.sub(rb"^\+\d+\.\d{6} \[(\d+) [^\]]+\]", rb"[\1]", line) for line in lines])
    assert got[1] == got[0], "\n".join(map(repr, got))
