"""Lua scripting's pure parts and its engine behaviour without a node: the conversions
both ways, LuaBitOp's arithmetic, cjson's error texts, the shebang line, effects logged
for the map, atomicity towards blocked clients, the time limit, and a node without lupa."""

from __future__ import annotations

import json
import math
import time
from typing import Any

import pytest

from raims_node.kv import scripting
from raims_node.kv.commands import BLOCKED, Engine, KVClient
from raims_node.kv.errors import CommandError
from raims_node.kv.lua_convert import INT64_MIN, LuaConverter, finish, lua_number_to_int
from raims_node.kv.lua_libs import _json_error, bit_op
from raims_node.kv.lua_msgpack import MsgpackError, make_pack, make_unpack
from raims_node.kv.reply import NULL_ARRAY, Err, Map, Raw, SetReply, Simple, Verbatim, encode
from raims_node.kv.store import KVStore

lua51 = pytest.importorskip("lupa.lua51")


@pytest.fixture
def conv() -> tuple[LuaConverter, Any]:
    rt = lua51.LuaRuntime(encoding=None)
    return LuaConverter(rt.table, rt.eval(b"rawget"), lua51.lua_type), rt


def test_lua_number_to_int_truncates_as_the_c_cast() -> None:
    assert [lua_number_to_int(x) for x in (3.99, -3.99, 0.5, -0.5, 7, 2.0**53)] == [3, -3, 0, 0, 7, 2**53]
    for x in (math.inf, -math.inf, math.nan, 2.0**63, -(2.0**64)):
        assert lua_number_to_int(x) == INT64_MIN
    assert lua_number_to_int(-(2.0**63)) == INT64_MIN and lua_number_to_int(2**63) == INT64_MIN


def test_reply_to_lua_resp2(conv: tuple[LuaConverter, Any]) -> None:
    c, rt = conv
    assert c.to_lua(5, 2) == 5 and c.to_lua(b"x", 2) == b"x"
    assert c.to_lua(None, 2) is False and c.to_lua(NULL_ARRAY, 2) is False
    assert c.to_lua(1.5, 2) == b"1.5" and c.to_lua(True, 2) == 1
    assert c.to_lua(Simple(b"OK"), 2)[b"ok"] == b"OK"
    assert c.to_lua(Err(b"ERR x"), 2)[b"err"] == b"ERR x"
    t = c.to_lua([1, None, [b"a"]], 2)
    assert t[1] == 1 and t[2] is False and t[3][1] == b"a"
    flat = c.to_lua(Map([(b"k", b"v")]), 2)
    assert (flat[1], flat[2]) == (b"k", b"v")
    assert c.to_lua(SetReply([b"m"]), 2)[1] == b"m" and c.to_lua(Verbatim(b"t"), 2) == b"t"


def test_reply_to_lua_resp3(conv: tuple[LuaConverter, Any]) -> None:
    c, rt = conv
    assert c.to_lua(None, 3) is None and c.to_lua(NULL_ARRAY, 3) is None
    assert c.to_lua(1.5, 3)[b"double"] == 1.5 and c.to_lua(False, 3) is False
    assert c.to_lua(Map([(b"k", 1)]), 3)[b"map"][b"k"] == 1
    assert c.to_lua(SetReply([b"m"]), 3)[b"set"][b"m"] is True
    v = c.to_lua(Verbatim(b"t"), 3)[b"verbatim_string"]
    assert (v[b"format"], v[b"string"]) == (b"txt", b"t")
    t = c.to_lua([None, 2], 3)
    assert t[1] is None and t[2] == 2


def test_lua_to_reply(conv: tuple[LuaConverter, Any]) -> None:
    c, rt = conv
    ev = rt.eval
    assert c.from_lua(3.7, 2) == 3 and c.from_lua(b"s", 2) == b"s"
    assert c.from_lua(True, 2) == 1 and c.from_lua(False, 2) is None and c.from_lua(None, 2) is None
    assert c.from_lua(True, 3) is True and c.from_lua(False, 3) is False
    assert c.from_lua(ev(b"{1, 'a', {2}, nil, 5}"), 2) == [1, b"a", [2]]
    assert c.from_lua(ev(b"{ok = 'fine\\r\\n'}"), 2) == Simple(b"fine  ")
    assert c.from_lua(ev(b"{err = 'E x'}"), 2) == Err(b"E x")
    assert c.from_lua(ev(b"{double = 2}"), 2) == 2.0
    assert c.from_lua(ev(b"{map = {a = 1}}"), 2) == Map([(b"a", 1)])
    assert c.from_lua(ev(b"{set = {a = true}}"), 2) == SetReply([b"a"])
    assert c.from_lua(ev(b"{big_number = '123'}"), 2) == Raw(b"(123\r\n")
    assert c.from_lua(ev(b"function() end"), 2) is None
    assert c.from_lua(ev(b"{a = 1}"), 2) == []
    nested = c.from_lua(rt.execute(b"local t = {} t[1] = t return t"), 2)
    depth = 0
    while isinstance(nested, list):
        nested, depth = nested[0], depth + 1
    assert nested == Err(b"ERR reached lua stack limit") and depth > 100


def test_finish_makes_resp3_frames_bulks_for_resp2() -> None:
    verbatim = Raw(b"=7\r\nmkd:abc\r\n")
    assert finish([Raw(b"(12\r\n"), verbatim], 2) == [b"12", b"abc"]
    assert finish(verbatim, 3) is verbatim
    assert encode(finish(Map([(b"k", Raw(b"(1\r\n"))]), 2), 2) == b"*2\r\n$1\r\nk\r\n$1\r\n1\r\n"


def test_bit_ops_as_luabitop() -> None:
    assert bit_op("tobit", 2.0**32 + 5) == 5 and bit_op("tobit", 0xFFFFFFFF) == -1
    assert bit_op("tobit", 2.5) == 2 and bit_op("tobit", 3.5) == 4  # round half to even
    assert bit_op("band", 0xFF, 0x0F, 0x3C) == 0x0C and bit_op("bor", 1, 2, 4) == 7
    assert bit_op("bxor", 5, 3) == 6 and bit_op("bnot", 0) == -1
    assert bit_op("lshift", 1, 31) == -(2**31) and bit_op("lshift", 1, 33) == 2
    assert bit_op("rshift", -1, 28) == 15 and bit_op("arshift", -256, 4) == -16
    assert bit_op("rol", 0x12345678, 12) == 0x45678123 and bit_op("ror", 0x12345678, 12) == 0x67812345
    assert bit_op("bswap", 0x12345678) == 0x78563412
    assert bit_op("tohex", 255) == b"000000ff" and bit_op("tohex", -1, -4) == b"FFFF"
    assert bit_op("tohex", 1, 20) == b"00000001"


@pytest.mark.parametrize(("text", "want"), [
    (b"", b"Expected value but found T_END at character 1"),
    (b"nope", b"Expected value but found invalid token at character 1"),
    (b"[1,2", b"Expected comma or array end but found T_END at character 5"),
    (b'{"a":1 "b"}', b"Expected comma or object end but found T_STRING at character 8"),
    (b'{"a" 1}', b"Expected colon but found T_NUMBER at character 6"),
    (b"[1] x", b"Expected the end but found invalid token at character 5"),
])
def test_json_errors_as_cjson(text: bytes, want: bytes) -> None:
    with pytest.raises(json.JSONDecodeError) as info:
        json.loads(text.decode())
    assert _json_error(text, info.value) == want


def test_shebang() -> None:
    assert scripting.shebang(b"return 1") == (0, False, False)
    assert scripting.shebang(b"#!lua flags=no-writes,allow-oom\nreturn 1") == (31, True, True)
    assert scripting.shebang(b"#!lua flags=allow-oom\nreturn 1") == (21, False, True)
    assert scripting.shebang(b"#!lua\nreturn 1") == (5, False, False)
    for body, err in ((b"#!lua", b"ERR Invalid script shebang"),
                      (b"#!py\n", b"ERR Unexpected engine in script shebang: #!py"),
                      (b"#!lua flags=x\n", b"ERR Unexpected flag in script shebang: x"),
                      (b"#!lua x\n", b"ERR Unknown lua shebang option: x")):
        with pytest.raises(CommandError) as info:
            scripting.shebang(body)
        assert info.value.text == err


def _engine() -> tuple[Engine, KVClient, list[tuple[int, list[list[bytes]]]]]:
    logged: list[tuple[int, list[list[bytes]]]] = []
    e = Engine(KVStore(16), lambda db, cmds: logged.append((db, cmds)))
    return e, KVClient(), logged


def test_effects_are_logged_not_the_eval() -> None:
    e, c, logged = _engine()
    e.execute(c, [b"SADD", b"s", b"a", b"b"])
    logged.clear()
    script = b"redis.call('set', 'k', 'v', 'EX', 100) local m = redis.call('spop', 's') redis.call('select', 2) " \
             b"redis.call('incrbyfloat', 'f', '1.5') redis.call('get', 'k') return m"
    member = e.execute(c, [b"EVAL", script, b"0"])
    assert [db for db, _ in logged] == [0, 0, 2]
    assert logged[0][1][0][:4] == [b"SET", b"k", b"v", b"PXAT"]  # the relative expiry as its deadline
    assert logged[1][1] == [[b"SREM", b"s", member]]
    assert logged[2][1][0][:3] == [b"SET", b"f", b"1.5"]
    assert c.db == 0  # SELECT in the script changed its db only


def test_a_blocked_client_is_served_after_the_script() -> None:
    e, c, _ = _engine()
    got: list[Any] = []
    waiter = KVClient(got.append)
    assert e.execute(waiter, [b"BLPOP", b"q", b"0"]) is BLOCKED
    reply = e.execute(c, [b"EVAL", b"redis.call('rpush', 'q', 'a', 'b') return redis.call('lpop', 'q')", b"0"])
    assert reply == b"a" and got == [[b"q", b"b"]]


def test_time_limit_stops_a_runaway_script() -> None:
    e, c, _ = _engine()
    e.script_time_limit_ms = 100
    started = time.monotonic()
    reply = e.execute(c, [b"EVAL", b"local t = {} while true do t[1] = 1 end", b"0"])
    assert isinstance(reply, Err) and reply.text.startswith(b"ERR Script killed by the node's time limit")
    assert time.monotonic() - started < 2.0
    assert e.execute(c, [b"EVAL", b"return 1", b"0"]) == 1


def test_script_flush_drops_the_cache_and_the_state() -> None:
    e, c, _ = _engine()
    sha = e.execute(c, [b"SCRIPT", b"LOAD", b"return 'x'"])
    assert e.execute(c, [b"EVALSHA", sha, b"0"]) == b"x"
    assert e.execute(c, [b"SCRIPT", b"FLUSH"]) == Simple(b"OK")
    assert e.execute(c, [b"EVALSHA", sha, b"0"]) == Err(scripting.NOSCRIPT)


def test_without_lupa_scripts_answer_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scripting, "lua51", None)
    e, c, _ = _engine()
    for cmd in ([b"EVAL", b"return 1", b"0"], [b"EVALSHA", b"a" * 40, b"0"], [b"SCRIPT", b"LOAD", b"x"],
                [b"SCRIPT", b"EXISTS", b"a"]):
        assert e.execute(c, cmd) == Err(scripting.LUA_MISSING)
    assert e.execute(c, [b"SET", b"k", b"v"]) == Simple(b"OK") and e.execute(c, [b"GET", b"k"]) == b"v"


def test_msgpack_integer_forms_and_round_trip() -> None:
    rt = lua51.LuaRuntime(encoding=None)
    pack, unpack = make_pack(lua51.lua_type), make_unpack(rt.table)
    forms = {0: b"\x00", 127: b"\x7f", 128: b"\xcc\x80", 256: b"\xcd\x01\x00", 65536: b"\xce\x00\x01\x00\x00",
             2**32: b"\xcf\x00\x00\x00\x01\x00\x00\x00\x00", -1: b"\xff", -32: b"\xe0", -33: b"\xd0\xdf",
             -129: b"\xd1\xff\x7f", -32769: b"\xd2\xff\xff\x7f\xff", 1.5: b"\xca\x3f\xc0\x00\x00"}
    for n, want in forms.items():
        assert pack(n) == want and unpack(want) == [n]
    assert pack(0.1)[:1] == b"\xcb" and unpack(pack(0.1)) == [0.1]
    assert pack(rt.eval(b"{}")) == b"\x90" and pack(rt.eval(b"function() end")) == b"\xc0"
    for bad, text in ((b"\x81", b"Missing bytes in input."), (b"\xc1", b"Bad data format in input.")):
        with pytest.raises(MsgpackError) as info:
            unpack(bad)
        assert info.value.text == text


def test_a_script_out_of_memory_fails_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over the Lua state's limit a script gets an error; the state is collected or
    replaced, and cached scripts still run."""
    monkeypatch.setattr(scripting, "LUA_MEMORY", 16 * 1024 * 1024)
    e, c, _ = _engine()
    sha = e.execute(c, [b"SCRIPT", b"LOAD", b"return #KEYS + 1"])
    bomb = [b"EVAL", b"local t = {} for i = 1, 1e7 do t[i] = {i, i + 1} end return #t", b"0"]
    for _ in range(3):
        reply = e.execute(c, bomb)
        assert isinstance(reply, Err) and b"not enough memory (a script's Lua state may use 16 MiB)" in reply.text
        assert e.execute(c, [b"EVALSHA", sha, b"1", b"k"]) == 2
        assert e.scripts.rt.get_memory_used() < 12 * 1024 * 1024


def test_a_reply_too_large_for_the_state_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lua tables made by Python (a redis.call reply, cjson.decode) are refused past the
    limit instead of filling the state from outside the script's protected call."""
    monkeypatch.setattr(scripting, "LUA_MEMORY", 16 * 1024 * 1024)
    e, c, _ = _engine()
    e.execute(c, [b"RPUSH", b"big", *[b"x%d" % i for i in range(20000)]])
    script = (b"local t = {} for i = 1, 1e7 do t[i] = {i} if i % 5000 == 0 then "
              b"local ok, err = pcall(redis.call, 'lrange', 'big', 0, -1) if not ok then return err end end end")
    started = time.monotonic()
    assert e.execute(c, [b"EVAL", script, b"0"]) == (
        b"ERR not enough memory for the command's reply in the script (the Lua state may use 16 MiB)")
    assert time.monotonic() - started < 5.0
    assert e.execute(c, [b"EVAL", b"return #redis.call('lrange', 'big', 0, -1)", b"0"]) == 20000
