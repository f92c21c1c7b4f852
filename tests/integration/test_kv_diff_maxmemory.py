"""maxmemory with the noeviction policy (kv/__init__.py) against Debian's redis-server
7.0.15: both get a few MB of data, then `CONFIG SET maxmemory 1mb` puts both over the
limit (redis-server's used_memory is then ~5 MB, the node's resident set tens of MB), and
the same commands must get the same replies byte for byte in RESP2 and RESP3: denyoom
writes refused with OOM (one by one and pipelined, the batch path's fast forms), reads,
DEL and EXPIRE served, MULTI and EXEC, scripts. Lifting the limit (maxmemory 0) lets
writes in again on both; deleting keys is not compared, as the node's resident set need
not drop (memory.py). Last, a node-only test that the node's tick notices memory grown by
writes, not only CONFIG SET."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from tests.integration.kv_diff import WAIT_S, Pair, RawClient, cmds, encode_command

OOM = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
BIG = b"x" * 100_000


@pytest.fixture
def pair(pair: Pair) -> Iterator[Pair]:
    """conftest's pair, over the limit: 4 MB written, maxmemory 1mb; lifted afterwards."""
    for c in (pair.ref, pair.us):
        c.sock.sendall(b"".join(encode_command([b"SET", b"big%d" % i, BIG]) for i in range(40)))
        assert [c.read() for _ in range(40)] == [b"+OK\r\n"] * 40
    pair.check([[b"CONFIG", b"SET", b"maxmemory", b"1mb"]])
    yield pair
    pair.check(cmds("""
    CONFIG SET maxmemory 0
    FLUSHALL
    """))


OVER = """
SET k v
SET k
INCR n
LPUSH l a
RPUSH l a
ZADD z 1 m
SADD s a
HSET h f v
APPEND big1 x
SETRANGE big1 0 y
SORT nolist
SORT_RO nolist
GEORADIUS g 0 0 1 km
XADD st * f v
XGROUP CREATE st g $ MKSTREAM
XGROUP CREATE st
XGROUP DESTROY st g
GET big1
GET nokey
STRLEN big1
EXISTS big1 big2 nokey
EXPIRE big1 100
TTL big1
PERSIST big1
RENAME big2 big2b
DEL big1 big2b
EXISTS big1 big2b
PUBLISH ch m
DBSIZE
FLUSHALL
DBSIZE
SET k v
CONFIG SET maxmemory 0
SET k v
GET k
"""


def test_over_the_limit(pair: Pair) -> None:
    """Writes refused, reads and deletes served; after FLUSHALL both are still over (the
    node's resident set, redis-server's ~1.5 MB of its own); maxmemory 0 lifts it."""
    pair.check(cmds(OVER))


def test_pipelined_writes_over_the_limit(pair: Pair) -> None:
    """A pipeline takes the node's batch path: the fast forms refuse too."""
    batch = cmds("""
    SET a 1
    GET big3
    INCR n
    LPUSH l x
    RPUSH l x
    ZADD z 1 m
    GET a
    DEL big3
    SET b 2
    DBSIZE
    """)
    replies = []
    for c in (pair.ref, pair.us):
        c.sock.sendall(b"".join(encode_command(args) for args in batch))
        replies.append([c.read() for _ in batch])
    assert replies[1] == replies[0]
    assert replies[1][0] == OOM and replies[1][-1] == b":39\r\n"


MULTI = """
MULTI
GET big1
SET a b
WATCH x
MULTI
FOO
EXEC
MULTI
DISCARD
MULTI
SET a 1
EXEC
EXEC
"""

SCRIPTS = r"""
EVAL return_1 0
EVAL return_redis.call('set','a','b') 0
EVAL return_redis.pcall('set','a','b') 0
EVAL return_redis.call('get','big1') 0
EVAL redis.call('del','big3');return_redis.call('set','a','b') 0
GET a
EVAL #!lua\nreturn_redis.call('set','a','c') 0
EVAL #!lua\nreturn_1 x
EVAL #!lua_flags=allow-oom\nreturn_redis.call('set','a','c') 0
EVAL #!lua_flags=no-writes\nreturn_redis.call('get','a') 0
EVAL #!lua_flags=no-writes\nreturn_redis.call('set','a','d') 0
EVAL_RO return_redis.call('get','a') 0
SCRIPT LOAD #!lua\nreturn_1
EVALSHA cb70127618f0b0be70c53cf6bfcfa54a29d9b0c0 0
"""


def test_multi_over_the_limit(pair: Pair) -> None:
    """Inside MULTI every command but EXEC / DISCARD is refused and EXEC aborts."""
    pair.check(cmds(MULTI))


def test_exec_queued_before_the_limit(pair: Pair) -> None:
    """A transaction queued under the limit: EXEC aborts with the OOM when it holds a
    denyoom command, runs when it holds none."""
    pair.check(cmds("CONFIG SET maxmemory 0"))
    other, admin = (Pair(pair.ref.sock.getpeername()[1], pair.us.sock.getpeername()[1], pair.ref.resp)
                    for _ in range(2))
    try:
        other.check(cmds("MULTI\nSET q 1\nGET q"))
        pair.check(cmds("MULTI\nGET big1"))
        admin.check(cmds("CONFIG SET maxmemory 1mb"))
        other.check(cmds("EXEC\nGET q"))
        ref, us = pair.run([b"EXEC"])
        assert us == ref and ref.count(BIG) == 1
    finally:
        other.close()
        admin.close()


def test_scripts_over_the_limit(pair: Pair) -> None:
    """A script's first write is refused (with the script's position), a later one runs;
    a shebang without allow-oom or no-writes refuses the EVAL whole (`_` is a blank)."""
    pair.check([args[:1] + [args[1].replace(b"_", b" ").replace(b"\\n", b"\n")] + args[2:] for args in cmds(SCRIPTS)])


def test_info_and_config(pair: Pair) -> None:
    fields = (b"maxmemory", b"maxmemory_human", b"maxmemory_policy")
    for c in (pair.ref, pair.us):
        text = c.call([b"INFO", b"memory"])
        assert [re.search(rb"\r\n%s:([^\r]*)\r\n" % f, text).group(1) for f in fields] == [  # type: ignore[union-attr]
            b"1048576", b"1.00M", b"noeviction"]
    pair.check(cmds("""
    CONFIG GET maxmemory
    CONFIG GET maxmemory-policy
    CONFIG SET maxmemory-policy NOEVICTION
    CONFIG SET maxmemory-policy bogus
    CONFIG SET maxmemory 1x
    CONFIG SET maxmemory 2mb maxmemory x
    CONFIG SET maxmemory 2mb
    CONFIG GET maxmemory
    """))
    # the documented difference: the map does not evict, so no other policy is taken
    assert pair.ref.call(cmds("CONFIG SET maxmemory-policy allkeys-lru")[0]) == b"+OK\r\n"
    assert pair.ref.call(cmds("CONFIG SET maxmemory-policy noeviction")[0]) == b"+OK\r\n"
    assert pair.us.call(cmds("CONFIG SET maxmemory-policy allkeys-lru")[0]) == (
        b"-ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - the map does not evict "
        b"keys: noeviction is its only policy\r\n")


def _used(c: RawClient) -> int:
    found = re.search(rb"\r\nused_memory:(\d+)\r\n", c.call([b"INFO", b"memory"]))
    assert found is not None
    return int(found.group(1))


def test_tick_notices_growth(servers: tuple[int, int]) -> None:
    """Node only: with maxmemory 16 MB above the node's resident set, 40 MB of writes
    are taken until the node's tick (50 ms) samples the resident set over it; then
    writes are refused while reads run, until the limit is lifted."""
    c = RawClient(servers[1])
    try:
        limit = _used(c) + 16 * (1 << 20)
        assert c.call([b"CONFIG", b"SET", b"maxmemory", b"%d" % limit]) == b"+OK\r\n"
        c.sock.sendall(b"".join(encode_command([b"SET", b"grow%d" % i, BIG]) for i in range(400)))
        replies = [c.read() for _ in range(400)]
        assert replies[0] == b"+OK\r\n" and set(replies) <= {b"+OK\r\n", OOM}
        deadline = time.monotonic() + WAIT_S
        while c.call([b"SET", b"probe", b"1"]) != OOM:
            assert time.monotonic() < deadline, f"not refused {WAIT_S} s after the resident set passed maxmemory"
            time.sleep(0.01)
        assert _used(c) > limit
        assert c.call([b"GET", b"grow0"]) == b"$100000\r\n" + BIG + b"\r\n"
        assert c.call([b"CONFIG", b"SET", b"maxmemory", b"0"]) == b"+OK\r\n"
        assert c.call([b"SET", b"probe", b"1"]) == b"+OK\r\n"
    finally:
        c.call([b"CONFIG", b"SET", b"maxmemory", b"0"])
        c.call([b"FLUSHALL"])
        c.close()
