"""maxmemory with the noeviction policy on the key-value map (kv/__init__.py): the
engine's `oom` flag from its memory samples, the denyoom table against redis-server
7.0.15's, and the paths a command takes to the engine (the Redis session's general
dispatch, its batch path with the fast forms, MULTI / EXEC, scripts, a blocked pop)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from raims_node.kv import NodeKV
from raims_node.kv.commands import BLOCKED, COMMANDS, Engine, KVClient
from raims_node.kv.errors import OOM
from raims_node.kv.reply import OK, Err
from raims_node.kv.scripting import lua51
from raims_node.kv.store import KVStore
from tests.unit.test_redis_admin import ask, pair

OOM_LINE = b"-%s\r\n" % OOM
MB = 1 << 20


class Probe:
    """A fake resident set, counting its reads."""

    def __init__(self, used: int) -> None:
        self.used = used
        self.reads = 0

    def __call__(self) -> int:
        self.reads += 1
        return self.used


def engine_over() -> tuple[Engine, Probe]:
    """An engine whose node uses 50 MB, with maxmemory 1 MB: over."""
    e = Engine(KVStore(16))
    probe = Probe(50 * MB)
    e.memory_probe = probe
    e.maxmemory = MB
    e.sample_memory()
    return e, probe


def run(e: Engine, c: KVClient, *args: bytes) -> Any:
    return e.execute(c, list(args))


def test_engine_flag_refuses_denyoom_commands_only() -> None:
    e, probe = engine_over()
    c = KVClient()
    e.maxmemory = 0
    e.sample_memory()
    assert not e.oom
    assert run(e, c, b"SET", b"k", b"v") is not None and run(e, c, b"XADD", b"st", b"1-1", b"f", b"v")
    e.maxmemory = MB
    assert e.sample_memory() == 50 * MB and e.oom
    for args in ([b"SET", b"k2", b"v"], [b"INCR", b"n"], [b"LPUSH", b"l", b"x"], [b"SADD", b"s", b"m"],
                 [b"SORT", b"l"], [b"XGROUP", b"CREATE", b"st", b"g", b"$"], [b"APPEND", b"k", b"x"]):
        assert run(e, c, *args) == Err(OOM), args
    assert run(e, c, b"SET", b"k") == Err(b"ERR wrong number of arguments for 'set' command")  # arity first
    assert run(e, c, b"GET", b"k") == b"v"
    assert run(e, c, b"SORT_RO", b"l") == []
    assert run(e, c, b"XGROUP", b"DESTROY", b"st", b"g") == 0
    assert run(e, c, b"EXPIRE", b"k", b"100") == 1
    assert run(e, c, b"DEL", b"k") == 1
    assert run(e, c, b"EXISTS", b"k2") == 0  # nothing refused was written
    probe.used = MB // 2  # back under: the next sample lifts it
    e.sample_memory()
    assert not e.oom and run(e, c, b"SET", b"k", b"v") is not None


def test_denyoom_table_is_redis_servers() -> None:
    """Every command the map has is denyoom exactly when redis-server 7.0.15's table says so."""
    table = json.loads((Path(__file__).parents[2] / "raims_node/bridges/redis_commands.json").read_text())["info"]
    flagged = {name for name, entry in table.items() if {"+": "denyoom"} in entry[2]["~"]}
    for name, cmd in COMMANDS.items():
        if callable(cmd.denyoom):
            assert name in (b"xgroup", b"eval", b"evalsha"), name
        else:
            assert cmd.denyoom == (name.decode() in flagged), name
    assert {"xgroup|create", "xgroup|createconsumer"} <= flagged


def test_node_tick_samples_only_with_a_limit() -> None:
    kv = NodeKV(None)
    probe = Probe(50 * MB)
    kv.engine.memory_probe = probe
    kv.tick()
    assert probe.reads == 0 and not kv.engine.oom  # no maxmemory: /proc is never read
    kv.engine.maxmemory = MB
    kv.tick()
    assert probe.reads == 1 and kv.engine.oom
    probe.used = MB // 2
    kv.tick()
    assert not kv.engine.oom
    kv.close()


def test_session_paths_refuse_over_the_limit() -> None:
    """The batch path (a pipeline, fast forms of SET / INCR / LPUSH / RPUSH / ZADD) and the
    general dispatch (subscribed RESP2, CONFIG) alike."""
    e, probe = engine_over()
    _host, (a, b) = pair(e)
    e.store.writable = True
    out = ask(a, b"SET a 1\r\nINCR n\r\nLPUSH l x\r\nRPUSH l x\r\nZADD z 1 m\r\nGET a\r\nDEL a\r\nHSET h f v\r\n")
    assert out == OOM_LINE * 5 + b"$-1\r\n:0\r\n" + OOM_LINE
    assert not any(d.data for d in e.store.dbs)
    assert ask(b, b"SUBSCRIBE c\r\n").startswith(b"*3")
    assert ask(b, b"SET a 1\r\n") == OOM_LINE  # before the subscribed-mode refusal, as redis-server
    assert ask(b, b"GET a\r\n").startswith(b"-ERR Can't execute 'get'")
    assert ask(a, b"CONFIG SET maxmemory 0\r\nSET a 1\r\nCONFIG GET maxmemory\r\n") == (
        b"+OK\r\n+OK\r\n*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n")
    assert ask(a, b"CONFIG SET maxmemory 1mb\r\nSET a 1\r\nCONFIG GET maxmemory\r\n") == (
        b"+OK\r\n" + OOM_LINE + b"*2\r\n$9\r\nmaxmemory\r\n$7\r\n1048576\r\n")
    assert b"\r\nmaxmemory:1048576\r\nmaxmemory_human:1.00M\r\nmaxmemory_policy:noeviction\r\n" in ask(
        a, b"INFO memory\r\n")
    assert probe.reads >= 3  # CONFIG SET and INFO sampled


def test_config_maxmemory_policy_noeviction_only() -> None:
    e, _ = engine_over()
    _host, (a, _b) = pair(e)
    assert ask(a, b"CONFIG SET maxmemory-policy NOEVICTION\r\n") == b"+OK\r\n"
    assert ask(a, b"CONFIG SET maxmemory-policy allkeys-lru\r\n") == (
        b"-ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - the map does not evict "
        b"keys: noeviction is its only policy\r\n")
    assert ask(a, b"CONFIG SET maxmemory-policy lru\r\n").startswith(
        b"-ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of "
        b"the following: volatile-lru, ")
    assert ask(a, b"CONFIG SET maxmemory 2mb maxmemory-policy allkeys-lru\r\n").startswith(b"-ERR")
    assert e.maxmemory == MB  # all or nothing
    assert ask(a, b"CONFIG GET maxmemory-policy\r\n") == b"*2\r\n$16\r\nmaxmemory-policy\r\n$10\r\nnoeviction\r\n"


def test_multi_over_the_limit() -> None:
    e, probe = engine_over()
    _host, (a, b) = pair(e)
    e.store.writable = True
    assert ask(a, b"MULTI\r\nGET a\r\nSET a 1\r\nWATCH x\r\nMULTI\r\nEXEC\r\n") == (
        b"+OK\r\n" + OOM_LINE * 4 + b"-EXECABORT Transaction discarded because of previous errors.\r\n")
    assert ask(a, b"MULTI\r\nDISCARD\r\n") == b"+OK\r\n+OK\r\n"
    probe.used = 0
    e.sample_memory()
    assert ask(b, b"MULTI\r\nSET q 1\r\nGET q\r\n") == b"+OK\r\n+QUEUED\r\n+QUEUED\r\n"
    assert ask(a, b"MULTI\r\nGET q\r\n") == b"+OK\r\n+QUEUED\r\n"
    probe.used = 50 * MB
    e.sample_memory()
    assert ask(b, b"EXEC\r\n") == (b"-EXECABORT Transaction discarded because of: " + OOM_LINE[1:])
    assert ask(a, b"EXEC\r\n") == b"*1\r\n$-1\r\n"  # no denyoom command queued: it runs
    assert ask(b, b"EXEC\r\n") == b"-ERR EXEC without MULTI\r\n"


def test_blocked_pop_is_served_over_the_limit() -> None:
    """A BLMOVE parked before the limit moves its element when a push (here EXEC's, past
    the checks) serves it: its check was at its start, as redis-server's."""
    e = Engine(KVStore(16))
    waiting, pusher = KVClient(), KVClient()
    got: list[Any] = []
    waiting.wake = got.append
    assert run(e, waiting, b"BLMOVE", b"src", b"dst", b"LEFT", b"LEFT", b"0") is BLOCKED
    e.memory_probe = lambda: 50 * MB
    e.maxmemory = MB
    e.sample_memory()
    pusher.in_multi = True
    assert run(e, pusher, b"LPUSH", b"src", b"x") == 1
    assert got == [b"x"] and run(e, pusher, b"LRANGE", b"dst", b"0", b"-1") == [b"x"]
    assert e.oom


@pytest.mark.skipif(lua51 is None, reason="lupa is not installed")
def test_scripts_over_the_limit() -> None:
    """A script's first write is refused, a later one runs; allow-oom runs; a shebang
    without no-writes / allow-oom refuses the EVAL (redis-server 7.0.15's replies)."""
    e, _ = engine_over()
    c = KVClient()
    set_a = b"return redis.call('set','a','b')"
    reply = run(e, c, b"EVAL", set_a, b"0")
    assert reply == Err(OOM + b" script: %s, on @user_script:1." % hashlib.sha1(set_a).hexdigest().encode())
    assert run(e, c, b"EVAL", b"return redis.pcall('set','a','b')", b"0") == Err(OOM)
    assert run(e, c, b"EVAL", b"redis.call('del','x'); return redis.call('set','a','b')", b"0") == OK
    assert run(e, c, b"EVAL", b"return redis.call('get','a')", b"0") == b"b"
    assert run(e, c, b"EVAL", b"#!lua flags=allow-oom\nreturn redis.call('set','a','c')", b"0") == OK
    assert run(e, c, b"EVAL", b"#!lua flags=no-writes\nreturn 1", b"0") == 1
    assert run(e, c, b"EVAL", b"#!lua\nreturn 1", b"x") == Err(OOM)  # refused whole, before its arguments
    sha = run(e, c, b"SCRIPT", b"LOAD", b"#!lua\nreturn 1")
    assert run(e, c, b"EVALSHA", sha, b"0") == Err(OOM)
    assert run(e, c, b"EVALSHA", b"0" * 40, b"0") == Err(b"NOSCRIPT No matching script. Please use EVAL.")


def test_session_counts_oom_as_rejected() -> None:
    e, _ = engine_over()
    host, (a, _b) = pair(e)
    e.store.writable = True
    ask(a, b"SET a 1\r\n")
    ask(a, b"MULTI\r\nGET a\r\nDISCARD\r\n")
    stats = ask(a, b"INFO commandstats\r\n")
    assert b"cmdstat_set:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0" in stats
    assert b"cmdstat_get:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0" in stats
    assert b"errorstat_OOM:count=2" in ask(a, b"INFO errorstats\r\n")



