"""Lua scripting (EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT) on a node against Debian's
redis-server 7.0.15: the same commands to both, replies compared byte for byte in RESP2
and RESP3 (kv_diff.py). Scripts hold blanks, so the blocks are argument lists."""

from __future__ import annotations

import hashlib
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.kv_diff import Pair, RawClient


@pytest.fixture
def pair(pair: Pair) -> Pair:
    """conftest's pair, with both script caches emptied."""
    for c in (pair.ref, pair.us):
        assert c.call([b"SCRIPT", b"FLUSH"]) == b"+OK\r\n"
    return pair


def ev(script: str, *args: str | int) -> list[bytes]:
    """EVAL script numkeys args...: the first of `args` is numkeys (0 when absent)."""
    rest = [str(a).encode() for a in args] or [b"0"]
    return [b"EVAL", script.encode(), *rest]


def c(*args: str) -> list[bytes]:
    return [a.encode() for a in args]


LUA_TO_REDIS = [
    ev("return 1"),
    ev("return -7"),
    ev("return 3.99"),
    ev("return -3.99"),
    ev("return 0.5"),
    ev("return 2^53"),
    ev("return 2^63"),
    ev("return -2^63"),
    ev("return math.huge"),
    ev("return -math.huge"),
    ev("return 0/0"),
    ev("return 'hello'"),
    ev("return ''"),
    ev("return nil"),
    ev("return"),
    ev("return true"),
    ev("return false"),
    ev("return {}"),
    ev("return {1, 2, 'x', {3, 'y', {}}, false, true}"),
    ev("return {1, 2, nil, 4}"),
    ev("return {nil, 2}"),
    ev("return {a = 1, b = 2}"),
    ev("return {1, a = 2, 3}"),
    ev("return {ok = 'fine'}"),
    ev("return {ok = 'two\\r\\nlines'}"),
    ev("return {err = 'My Error'}"),
    ev("return {err = 'ERR something'}"),
    ev("return {1, {err = 'inner'}, {ok = 'st'}}"),
    ev("return {ok = 5}"),
    ev("return {err = 5}"),
    ev("return {double = 1.5}"),
    ev("return {double = 3}"),
    ev("return {double = -0.0}"),
    ev("return -0.0"),
    ev("return {map = {a = 1}}"),
    ev("return {set = {x = true}}"),
    ev("return {big_number = '12345678901234567890'}"),
    ev("return {verbatim_string = {format = 'txt', string = 'hi'}}"),
    ev("return function() end"),
    ev("return 1, 2"),
    ev("redis.setresp(3) return true"),
    ev("redis.setresp(3) return false"),
    ev("redis.setresp(3) return nil"),
    ev("redis.setresp(3) return {true, false, 1}"),
    ev("return redis.status_reply('PONG')"),
    ev("return redis.error_reply('x y')"),
    ev("return redis.error_reply('-CODE some text')"),
    ev("return redis.error_reply('-CODE')"),
    ev("return redis.error_reply('plain')"),
    ev("return redis.error_reply('')"),
    ev("return redis.error_reply()"),
    ev("return redis.error_reply(1)"),
    ev("return redis.status_reply()"),
    ev("return redis.status_reply(1)"),
    ev("return redis.status_reply('a', 'b')"),
]


def test_lua_to_redis(pair: Pair) -> None:
    pair.check(LUA_TO_REDIS)


_SCALAR = st.one_of(
    st.integers(-(2**40), 2**40).map(str),
    st.floats(-1e6, 1e6).map(repr),
    st.text(alphabet="ab z-", max_size=4).map(lambda t: f"'{t}'"),
    st.sampled_from(["true", "false", "nil", "1/0", "-1/0"]),
)


def _tables(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.lists(children, max_size=4).map(lambda xs: "{" + ", ".join(xs) + "}"),
        st.dictionaries(st.sampled_from("abcdef"), children, max_size=3).map(
            lambda d: "{" + ", ".join(f"{k} = {v}" for k, v in d.items()) + "}"),
        st.sampled_from(["ok", "err", "double"]).flatmap(
            lambda field: (_SCALAR if field == "double" else st.text(alphabet="ab Z", max_size=4).map(
                lambda t: f"'{t}'")).map(lambda v: f"{{{field} = {v}}}")),
        st.dictionaries(st.sampled_from("abc"), children, max_size=3).map(
            lambda d: "{map = {" + ", ".join(f"{k} = {v}" for k, v in d.items()) + "}}"),
    )


_LUA_VALUE = st.recursive(_SCALAR, _tables, max_leaves=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_LUA_VALUE, resp3=st.booleans())
def test_generated_script_results(pair: Pair, value: str, resp3: bool) -> None:
    """Random Lua results (nested tables, ok / err / double / map fields, numbers out of
    range) convert to the same reply on both servers."""
    pair.check([ev(("redis.setresp(3) " if resp3 else "") + "return " + value)])


REDIS_TO_LUA = [
    c("SET", "s", "abc"),
    c("RPUSH", "l", "a", "b", "c"),
    c("HSET", "h", "f1", "v1", "f2", "v2"),
    c("SADD", "set", "m"),
    c("ZADD", "z", "1.5", "a", "2", "b"),
    ev("return redis.call('get', 's')"),
    ev("return redis.call('get', 'nokey')"),
    ev("return type(redis.call('get', 'nokey'))"),
    ev("return tostring(redis.call('get', 'nokey'))"),
    ev("return redis.call('incr', 'n')"),
    ev("return type(redis.call('incr', 'n'))"),
    ev("return redis.call('set', 'x', 'y')"),
    ev("return redis.call('set', 'x', 'y').ok"),
    ev("return type(redis.call('set', 'x', 'y'))"),
    ev("return redis.call('lrange', 'l', 0, -1)"),
    ev("return #redis.call('lrange', 'l', 0, -1)"),
    ev("return redis.call('mget', 's', 'nokey', 's')"),
    ev("return type(redis.call('mget', 'nokey')[1])"),
    ev("return redis.call('hgetall', 'h')"),
    ev("return redis.call('zrange', 'z', 0, -1, 'WITHSCORES')"),
    ev("return redis.call('zscore', 'z', 'a')"),
    ev("return type(redis.call('zscore', 'z', 'a'))"),
    ev("return redis.call('ping')"),
    ev("return redis.call('ping', 'hi')"),
    ev("return redis.call('echo', 'hi')"),
    ev("return type(redis.call('time')[1])"),
    ev("return redis.pcall('incr', 's')"),
    ev("return redis.pcall('incr', 's').err"),
    ev("return type(redis.pcall('incr', 's'))"),
    ev("return redis.pcall('lpush', 's', 'x')"),
    ev("local ok, e = pcall(redis.call, 'incr', 's') return {tostring(ok), e.err}"),
    ev("redis.setresp(3) return redis.call('hgetall', 'h')"),
    ev("redis.setresp(3) return redis.call('hgetall', 'h').map.f1"),
    ev("redis.setresp(3) return redis.call('smembers', 'set')"),
    ev("redis.setresp(3) return redis.call('smembers', 'set').set.m"),
    ev("redis.setresp(3) return redis.call('zscore', 'z', 'a')"),
    ev("redis.setresp(3) return redis.call('zscore', 'z', 'a').double"),
    ev("redis.setresp(3) return type(redis.call('get', 'nokey'))"),
    ev("redis.setresp(3) return redis.call('get', 'nokey')"),
    ev("redis.setresp(3) return redis.call('zrange', 'z', 0, -1, 'WITHSCORES')"),
    ev("redis.setresp(3) return redis.call('set', 'x', 'y')"),
    ev("redis.setresp(2) return redis.call('hgetall', 'h')"),
    ev("return redis.call('set', 'f', 0.1)"),
    ev("redis.call('set', 'f', 0.1) redis.call('set', 'g', 3) redis.call('set', 'e', 1e20) "
       "return redis.call('mget', 'f', 'g', 'e')"),
    ev("return redis.call('get', KEYS[1])", 1, "s"),
    ev("return {KEYS[1], KEYS[2], ARGV[1], ARGV[2], #KEYS, #ARGV}", 2, "k1", "k2", "a1", "a2"),
    ev("return {#KEYS, #ARGV}"),
    ev("return redis.call('type', 'l')"),
]


def test_redis_to_lua(pair: Pair) -> None:
    pair.check(REDIS_TO_LUA)


ERRORS = [
    c("SET", "s", "abc"),
    ev("return x"),
    ev("x = 1"),
    ev("return nosuch.field"),
    ev("return 1 +"),
    ev("return 1 + nil"),
    ev("\n\nreturn 1 + nil"),
    ev("local function f() error('deep') end\nf()"),
    ev("error('boom')"),
    ev("error('boom', 0)"),
    ev("error(12)"),
    ev("error()"),
    ev("error(nil)"),
    ev("error({err = 'boom2'})"),
    ev("error({err = 'CODE boom3'})"),
    ev("return redis.call('incr', 's')"),
    ev("redis.call('incr', 's')"),
    ev("local x = 1\nreturn redis.call('incr', 's')"),
    ev("return redis.call('nosuch')"),
    ev("return redis.call()"),
    ev("return redis.pcall()"),
    ev("return redis.call('get')"),
    ev("return redis.call('get', 'a', 'b')"),
    ev("return redis.call('get', {})"),
    ev("return redis.call('get', nil)"),
    ev("return redis.call('get', true)"),
    ev("return redis.pcall('nosuch')"),
    ev("return redis.call('lpush', 's', 'x')"),
    ev("return redis.call('select', 99)"),
    ev("return redis.call('select', 'x')"),
    ev("return redis.call('select', '2147483648')"),
    ev("return redis.setresp()"),
    ev("return redis.setresp(4)"),
    ev("return redis.sha1hex()"),
    ev("return redis.sha1hex('')"),
    ev("return redis.sha1hex(12)"),
    ev("redis.log()"),
    ev("redis.log('a', 'b')"),
    ev("redis.log(9, 'b')"),
    ev("redis.log(redis.LOG_WARNING, 'from a test script', 1)"),
    ev("return redis.set_repl()"),
    ev("return redis.set_repl(99)"),
    ev("return redis.set_repl(redis.REPL_ALL)"),
    ev("return redis.replicate_commands()"),
    ev("return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}"),
    ev("return {redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL}"),
    ev("return redis.REDIS_VERSION"),
    ev("return redis.REDIS_VERSION_NUM"),
    ev("return pcall(error)"),
    ev("return {pcall(error, 'x')}"),
    ev("return select(2, pcall(redis.call, 'nosuch')).err"),
    [b"EVAL"],
    [b"EVAL", b"return 1"],
    ev("return 1", 2, "a"),
    ev("return 1", -1),
    ev("return 1", "x"),
    ev("return 1", "1.5"),
    ev("return 1", "99999999999999999999"),
]


def test_errors(pair: Pair) -> None:
    pair.check(ERRORS)


NOT_IN_SCRIPTS = [
    ev(f"return redis.call({args})") for args in (
        "'multi'", "'exec'", "'discard'", "'watch', 'k'", "'unwatch'", "'subscribe', 'ch'", "'unsubscribe'",
        "'psubscribe', 'p*'", "'hello'", "'reset'", "'quit'", "'monitor'", "'eval', 'return 1', 0",
        "'evalsha', 'x', 0", "'eval_ro', 'return 1', 0", "'script', 'flush'", "'blpop', 'l', 0",
        "'brpop', 'l', 1", "'blmove', 'a', 'b', 'left', 'left', 0", "'brpoplpush', 'a', 'b', 0",
        "'bzpopmin', 'z', 0", "'bzpopmax', 'z', 0", "'save'", "'bgsave'", "'watch'", "'blpop'",
        "'module', 'list'", "'client', 'id'", "'xread', 'BLOCK', 0, 'STREAMS', 's', '$'",
        "'XREADGROUP', 'GROUP', 'g', 'c', 'block', 0, 'STREAMS', 's', '>'",
        "'xread', 'COUNT', 1, 'STREAMS', 's', '0'", "'bzmpop', 0, 1, 'z', 'MIN'", "'zmpop', 1, 'z', 'MAX'")
]


def test_not_in_scripts(pair: Pair) -> None:
    pair.check(NOT_IN_SCRIPTS)


def sha(body: str) -> str:
    return hashlib.sha1(body.encode()).hexdigest()


LOADED = sha("return 'loaded'")
SCRIPT_CACHE = [
    c("SCRIPT", "EXISTS", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"),
    c("EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"),
    c("SCRIPT", "LOAD", "return 'loaded'"),
    c("EVALSHA", LOADED, "0"),
    c("EVALSHA", LOADED.upper(), "0"),
    c("EVALSHA_RO", LOADED, "0"),
    c("SCRIPT", "EXISTS", LOADED, "nosuch",
      LOADED.upper()),
    ev("return 'cached by eval'"),
    c("SCRIPT", "EXISTS", sha("return 'cached by eval'")),
    c("EVALSHA", "abc", "0"),
    c("EVALSHA", LOADED, "1"),
    c("EVALSHA", LOADED, "-1"),
    c("EVALSHA", "nosuch", "-1"),
    c("SCRIPT", "LOAD", "return 1 +"),
    c("SCRIPT", "LOAD"),
    c("SCRIPT", "LOAD", "a", "b"),
    c("SCRIPT", "EXISTS"),
    c("SCRIPT"),
    c("SCRIPT", "NOSUCH"),
    c("SCRIPT", "KILL"),
    c("SCRIPT", "KILL", "x"),
    c("SCRIPT", "HELP"),
    c("SCRIPT", "FLUSH", "BAD"),
    c("SCRIPT", "FLUSH", "SYNC", "ASYNC"),
    c("SCRIPT", "FLUSH", "ASYNC"),
    c("SCRIPT", "EXISTS", LOADED),
    c("SCRIPT", "LOAD", "return 'loaded'"),
    c("SCRIPT", "FLUSH", "sync"),
    c("SCRIPT", "LOAD", "return 'loaded'"),
    c("SCRIPT", "FLUSH"),
    c("EVALSHA", LOADED, "0"),
]


def test_script_cache(pair: Pair) -> None:
    pair.check(SCRIPT_CACHE)


READ_ONLY_AND_DB = [
    c("SET", "a", "1"),
    [b"EVAL_RO", b"return redis.call('get', 'a')", b"0"],
    [b"EVAL_RO", b"return redis.call('set', 'a', 'b')", b"0"],
    [b"EVAL_RO", b"return redis.pcall('set', 'a', 'b')", b"0"],
    [b"EVAL_RO", b"return redis.call('del', 'a')", b"0"],
    [b"EVAL_RO", b"return redis.call('ping')", b"0"],
    c("GET", "a"),
    c("SCRIPT", "LOAD", "return redis.call('incr', 'a')"),
    c("EVALSHA_RO", sha("return redis.call('incr', 'a')"), "0"),
    ev("#!lua flags=no-writes\nreturn redis.call('get', 'a')"),
    ev("#!lua flags=no-writes\nreturn redis.call('set', 'a', 'x')"),
    ev("#!lua\nreturn redis.call('incr', 'a')"),
    [b"EVAL_RO", b"#!lua\nreturn redis.call('get', 'a')", b"0"],
    [b"EVAL_RO", b"#!lua flags=no-writes\nreturn redis.call('get', 'a')", b"0"],
    ev("#!lua flags=bad\nreturn 1"),
    ev("#!lua other\nreturn 1"),
    ev("#!python\nreturn 1"),
    ev("#!lua"),
    ev("#!lua\n\nreturn 1 + nil"),
    ev("redis.call('select', 2) redis.call('set', 'k', 'db2') return redis.call('get', 'k')"),
    c("GET", "k"),
    c("SELECT", "2"),
    c("GET", "k"),
    ev("return redis.call('get', 'k')"),
    ev("redis.call('select', 0) return redis.call('get', 'a')"),
    c("GET", "k"),
    c("SELECT", "0"),
]


def test_read_only_and_databases(pair: Pair) -> None:
    pair.check(READ_ONLY_AND_DB)


SANDBOX = [
    ev("return type(os)"),
    ev("return type(io)"),
    ev("return type(require)"),
    ev("return type(loadfile)"),
    ev("return type(dofile)"),
    ev("return type(debug)"),
    ev("return type(print)"),
    ev("return type(setfenv)"),
    ev("return type(newproxy)"),
    ev("return type(package)"),
    ev("return {type(loadstring), type(pcall), type(coroutine), type(unpack), type(gcinfo), type(_G)}"),
    ev("return {type(cjson), type(bit), type(string.format), type(math.floor), type(table.concat)}"),
    ev("return loadstring('return 5')()"),
    ev("return loadstring('return x')()"),
    ev("return loadstring('x = 1')()"),
    ev("local t = {} local n = 0 for k in pairs(_G) do n = n + 1 end return n > 20"),
    ev("return _VERSION"),
    ev("return rawget(_G, 'nosuch')"),
    ev("local f = function() return y end return f()"),
    ev("return string.format('%d-%s-%5.2f', 3, 'x', 1.5)"),
    ev("return {string.byte('A'), string.char(72, 105), string.upper('abc'), ('x'):rep(3)}"),
    ev("return tostring(tonumber('0x10'))"),
    ev("return table.concat({1, 2, 3}, ',')"),
    ev("local t = {3, 1, 2} table.sort(t) return t"),
    ev("return math.floor(-3.5)"),
    ev("return {unpack({1, 2, 3})}"),
    ev("local co = coroutine.create(function(a) coroutine.yield(a + 1) return 'done' end) "
       "local _, v = coroutine.resume(co, 1) local _, w = coroutine.resume(co) return {v, w}"),
    ev("return string.rep('ab', 3, ',')"),
]


def test_sandbox(pair: Pair) -> None:
    pair.check(SANDBOX)


CJSON_BIT = [
    ev("return cjson.encode({1, 2, {a = 'x/y'}, '\\n'})"),
    ev("return cjson.encode({})"),
    ev("return cjson.encode({[1] = 1, [5] = 2})"),
    ev("return cjson.encode({[1] = 1, [20] = 2})"),
    ev("return cjson.encode(1/3)"),
    ev("return cjson.encode(100)"),
    ev("return cjson.encode(-0.5)"),
    ev("return cjson.encode(math.huge)"),
    ev("return cjson.encode(cjson.encode)"),
    ev("return cjson.encode({a = 1, b = 2, c = {true, false}})"),
    ev("return cjson.encode({x = {y = {z = 'deep'}}})"),
    ev("return cjson.encode('tab\\there \"q\" \\\\ \\1')"),
    ev("return cjson.encode(cjson.null)"),
    ev("return cjson.encode({[true] = 1})"),
    ev("return cjson.encode()"),
    ev("return cjson.decode('{\"a\":[1,2.5,null,\"\\\\u00e9\"]}').a[4]"),
    ev("return cjson.decode('{\"a\":[1,2.5,null,\"x\"]}').a"),
    ev("return type(cjson.decode('[null]')[1])"),
    ev("return cjson.decode('[null]')[1] == cjson.null"),
    ev("return cjson.decode('\"s\"')"),
    ev("return cjson.decode('12')"),
    ev("return cjson.decode('nope')"),
    ev("return cjson.decode('')"),
    ev("return cjson.decode('[1,2')"),
    ev("return cjson.decode('[1 2]')"),
    ev("return cjson.decode('{\"a\" 1}')"),
    ev("return cjson.decode('{\"a\":1 \"b\"}')"),
    ev("return cjson.decode('{1:2}')"),
    ev("return cjson.decode('[1] x')"),
    ev("return cjson.decode('[1,]')"),
    ev("return cjson.decode()"),
    ev("return cjson.decode(1)"),
    ev("return cjson.decode('{\"k\":true,\"f\":false}').k"),
    ev("return cjson.encode(cjson.decode('[1,\"two\",[3]]'))"),
    ev("return bit.band(0xff, 0x0f, 0x3c)"),
    ev("return bit.bor(1, 2, 4)"),
    ev("return bit.bxor(5, 3)"),
    ev("return bit.bnot(0)"),
    ev("return bit.lshift(1, 31)"),
    ev("return bit.lshift(1, 33)"),
    ev("return bit.rshift(-1, 28)"),
    ev("return bit.arshift(-256, 4)"),
    ev("return bit.rol(0x12345678, 12)"),
    ev("return bit.ror(0x12345678, 12)"),
    ev("return bit.tobit(2^32 + 5)"),
    ev("return bit.tobit(0xffffffff)"),
    ev("return bit.tobit(2.5)"),
    ev("return bit.tobit(3.5)"),
    ev("return bit.bswap(0x12345678)"),
    ev("return bit.tohex(255)"),
    ev("return bit.tohex(-1, -4)"),
    ev("return bit.tohex(0x1234, 2)"),
    ev("return bit.tohex(1, 20)"),
    ev("return bit.band()"),
    ev("return bit.band('a')"),
    ev("return bit.band('12', 4)"),
    ev("return bit.band(1, nil)"),
    ev("return bit.lshift(1)"),
    ev("return bit.tohex(1, 'x')"),
    ev("return bit.bor({})"),
]


def test_cjson_and_bit(pair: Pair) -> None:
    pair.check(CJSON_BIT)


CMSGPACK = [
    ev("return cmsgpack.pack({1, 2, 3}, 'abc', 1.5, -1, 300, -200, 70000, 2^40, -2^40, true, false, nil, {a = 1})"),
    ev("return cmsgpack.pack(0.1, 1e300, -0.25, string.rep('x', 40), string.rep('y', 300), {})"),
    ev("return cmsgpack.pack({x = {y = {1, 2}}, [5] = 'five'})"),
    ev("local t = {} for i = 1, 20 do t = {t} end return cmsgpack.pack(t)"),
    ev("local t = {} for i = 1, 20 do t[i] = i end return cmsgpack.pack(t)"),
    ev("return cmsgpack.pack(print)"),
    ev("return {cmsgpack.unpack(cmsgpack.pack({1, {x = 'y'}, 's'}, 5, -3, 2.5, true))}"),
    ev("return cmsgpack.unpack(cmsgpack.pack({name = 'Joe'})).name"),
    [b"EVAL", b"return cmsgpack.unpack(ARGV[1]).name", b"0", b"\x81\xa4name\xa3Joe"],
    ev("return {cmsgpack.unpack(string.char(0xcf, 0, 0, 0, 0, 0, 0, 0, 5, 0xd3, 255, 255, 255, 255, 255, 255, "
       "255, 251, 0xca, 63, 192, 0, 0, 0xdc, 0, 2, 1, 2))}"),
    ev("return {cmsgpack.unpack(string.char(0x92, 0xc0, 1))}"),
    ev("return cmsgpack.pack()"),
    ev("return cmsgpack.unpack()"),
    ev("return cmsgpack.unpack({})"),
    ev("return cmsgpack.unpack(string.char(0x81))"),
    ev("return cmsgpack.unpack(string.char(0xc1))"),
    ev("return cmsgpack.unpack(string.char(0xc4, 1, 65))"),
    ev("return cmsgpack.unpack(string.char(0xcd, 1))"),
    ev("return {cmsgpack.unpack('')}"),
]


def test_cmsgpack(pair: Pair) -> None:
    pair.check(CMSGPACK)


def test_writes_notify_and_wake(pair: Pair) -> None:
    """A script's writes reach WATCH, and a client blocked on a list is served after the
    script (which pushed and popped atomically)."""
    pair.check([c("WATCH", "w"), ev("return redis.call('set', 'w', '1')"), c("MULTI"), c("GET", "w"), c("EXEC")])
    pair.check([c("MULTI"), ev("return redis.call('incr', 'ctr')"), c("INCR", "ctr"), c("EXEC")])
    waiting = [RawClient(pair.ref.sock.getpeername()[1]), RawClient(pair.us.sock.getpeername()[1])]
    try:
        for w in waiting:
            w.send(c("BLPOP", "q", "5"))
        pair.wait_blocked(1)
        pair.check([ev("redis.call('rpush', 'q', 'a', 'b') return redis.call('lpop', 'q')")])
        assert waiting[0].read() == waiting[1].read() == b"*2\r\n$1\r\nq\r\n$1\r\nb\r\n"
        pair.check([c("LLEN", "q")])
    finally:
        for w in waiting:
            w.close()


def test_runaway_script_is_stopped(servers: tuple[int, int]) -> None:
    """`while true do end` answers an error within the node's time limit (set low here)
    and the node serves on; other clients were only delayed."""
    us = RawClient(servers[1])
    other = RawClient(servers[1])
    try:
        assert us.call(c("CONFIG", "SET", "busy-reply-threshold", "300")) == b"+OK\r\n"
        assert us.call(c("CONFIG", "GET", "lua-time-limit")) == b"*2\r\n$14\r\nlua-time-limit\r\n$3\r\n300\r\n"
        for script in ("while true do end", "while true do pcall(function() while true do end end) end",
                       "redis.call('set', 'spun', '1') local i = 0 while true do i = i + 1 end"):
            started = time.monotonic()
            reply = us.call(ev(script))
            took = time.monotonic() - started
            assert reply.startswith(b"-ERR Script killed by the node's time limit of 300 ms"), reply
            assert 0.25 < took < 3.0, took
            assert other.call(c("PING")) == b"+PONG\r\n"
        assert us.call(c("GET", "spun")) == b"$1\r\n1\r\n"  # writes before the kill stay
        assert us.call(c("SCRIPT", "KILL")) == b"-NOTBUSY No scripts in execution right now.\r\n"
        assert us.call(ev("return 'alive'")) == b"$5\r\nalive\r\n"
    finally:
        us.call(c("CONFIG", "SET", "busy-reply-threshold", "5000"))
        us.call(c("DEL", "spun"))
        us.close()
        other.close()


def test_environment_is_restored(servers: tuple[int, int]) -> None:
    """Library fields a script changes are back for the next script (redis-server
    refuses the change; the node undoes it, a documented decision)."""
    us = RawClient(servers[1])
    try:
        us.call(ev("string.rep = nil redis.call = nil cjson = nil return 1"))
        assert us.call(ev("return {string.rep('a', 2), type(redis.call), type(cjson)}")) == (
            b"*3\r\n$2\r\naa\r\n$8\r\nfunction\r\n$5\r\ntable\r\n")
    finally:
        us.close()


def test_publish_from_a_script(servers: tuple[int, int]) -> None:
    """PUBLISH in a script reaches subscribers and answers their count, as redis-server."""
    for port in servers:
        sub = RawClient(port)
        pub = RawClient(port)
        try:
            assert sub.call(c("SUBSCRIBE", "from-lua")).startswith(b"*3\r\n")
            reply = pub.call(ev("return redis.call('publish', 'from-lua', 'hi')"))
            assert reply == b":1\r\n", (port, reply)
            assert sub.read() == b"*3\r\n$7\r\nmessage\r\n$8\r\nfrom-lua\r\n$2\r\nhi\r\n"
        finally:
            sub.close()
            pub.close()


def test_monitor_shows_a_scripts_commands(servers: tuple[int, int]) -> None:
    """MONITOR shows the EVAL, then each command the script ran as `[db lua]`."""
    seen = []
    for port in servers:
        mon = RawClient(port)
        cli = RawClient(port)
        try:
            assert mon.call(c("MONITOR")) == b"+OK\r\n"
            cli.call(c("SELECT", "1"))
            assert cli.call(ev("redis.call('set', 'mk', 'a b') return redis.call('get', 'mk')")) == b"$3\r\na b\r\n"
            lines = [mon.read() for _ in range(4)]
            seen.append([line.split(b" ", 1)[1] for line in lines[1:]])  # without the timestamp
            assert lines[1].split(b"] ", 1)[1].startswith(b'"EVAL"')
        finally:
            mon.close()
            cli.close()
    assert seen[0][1:] == seen[1][1:] == [b'[1 lua] "set" "mk" "a b"\r\n', b'[1 lua] "get" "mk"\r\n']
