"""Conversions between the data commands' reply values (reply.py) and Lua values, both
ways, as redis-server 7.0's scripting does them (scripting.py runs the scripts).

Reply -> Lua (a redis.call result), by the script's protocol (`redis.setresp`, 2 unless
changed): integer -> number, bulk -> string, status -> {ok=...}, error -> {err=...},
array -> table; RESP2: nil bulk and nil array -> false, a double -> its string, a map
-> flat table, a set -> table; RESP3: null -> nil, double -> {double=n}, map ->
{map={k=v}}, set -> {set={m=true}}, boolean -> true / false, verbatim ->
{verbatim_string={format=, string=}}.

Lua -> reply (a script's result): number -> integer (truncated toward zero; out of
range or NaN as the C cast on x86, INT64_MIN), string -> bulk, table -> {ok=} status,
{err=} error, {double=}, {map=}, {set=}, {big_number=}, {verbatim_string=} (encoded
for the caller's protocol by reply.py), else an array up to the first nil; false ->
nil, true -> 1 (with setresp(3): booleans), nil and anything else -> nil. Decision: a
table nested deeper than MAX_DEPTH (a table holding itself) answers redis-server's
"reached lua stack limit" error in its place.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from raims_node.kv.reply import NULL_ARRAY, Err, Map, Raw, SetReply, Simple, Verbatim, format_double

INT64_MIN = -(1 << 63)
MAX_DEPTH = 200  # nesting of a script's result (Python's own recursion stays far away)

RawGet = Callable[[Any, Any], Any]


def lua_size(v: Any) -> int:
    """About the bytes a reply takes as Lua values (a table of 40 bytes plus 40 a slot,
    a string of 24 bytes plus its length)."""
    t = type(v)
    if t is bytes:
        return 24 + len(v)
    if t is list:
        return 40 + sum(40 + lua_size(x) for x in v)
    if t is Map:
        return 80 + sum(80 + lua_size(k) + lua_size(x) for k, x in v.pairs)
    if t is SetReply:
        return 80 + sum(80 + lua_size(x) for x in v.items)
    return 40


def lua_number_to_int(x: float | int) -> int:
    """(long long)x as redis-server's C code casts a Lua number on x86-64."""
    if isinstance(x, int):
        return x if INT64_MIN <= x < 1 << 63 else INT64_MIN
    if math.isnan(x) or not -9.223372036854775808e18 <= x < 9.223372036854775808e18:
        return INT64_MIN
    return int(x)


class LuaConverter:
    """Conversions for one Lua runtime: `table(**)` makes a table, `rawget(t, k)` reads
    one without metamethods, `lua_type(v)` names a value's Lua type."""

    def __init__(self, table: Callable[[], Any], rawget: RawGet, lua_type: Callable[[Any], Any]) -> None:
        self.table = table
        self.rawget = rawget
        self.lua_type = lua_type
        # lupa hands an integral Lua number over as an int: -0.0 needs Lua's word
        self.negative_zero: Callable[[Any], bool] = lambda t: False

    # ------------------------------------------------------------ reply -> Lua

    def to_lua(self, v: Any, resp: int) -> Any:
        t = type(v)
        if t is bytes or t is int:
            return v
        if v is None or v is NULL_ARRAY:
            return None if resp == 3 else False
        if t is list or t is tuple:
            out = self.table()
            for i, item in enumerate(v, 1):
                val = self.to_lua(item, resp)
                if val is not None:
                    out[i] = val
            return out
        if t is Simple:
            return self._field(b"ok", v.text)
        if t is Err:
            return self._field(b"err", v.text)
        if t is float:
            return self._field(b"double", v) if resp == 3 else format_double(v)
        if t is bool:
            return v if resp == 3 else int(v)
        if t is Map:
            if resp == 3:
                inner = self.table()
                for k, item in v.pairs:
                    inner[self.to_lua(k, resp)] = self.to_lua(item, resp)
                return self._field(b"map", inner)
            return self.to_lua([x for pair in v.pairs for x in pair], resp)
        if t is SetReply:
            if resp == 3:
                inner = self.table()
                for item in v.items:
                    inner[self.to_lua(item, resp)] = True
                return self._field(b"set", inner)
            return self.to_lua(v.items, resp)
        if t is Verbatim:
            if resp == 3:
                inner = self.table()
                inner[b"format"] = b"txt"
                inner[b"string"] = v.text
                return self._field(b"verbatim_string", inner)
            return v.text
        raise TypeError(f"no Lua conversion for {t.__name__}")

    def _field(self, name: bytes, value: Any) -> Any:
        out = self.table()
        out[name] = value
        return out

    # ------------------------------------------------------------ Lua -> reply

    def from_lua(self, v: Any, script_resp: int, depth: int = 0) -> Any:
        t = type(v)
        if t is bytes:
            return v
        if t is int or t is float:
            return lua_number_to_int(v)
        if t is bool:
            if script_resp == 3:
                return v
            return 1 if v else None
        if v is None or self.lua_type(v) != "table":
            return None
        if depth >= MAX_DEPTH:
            return Err(b"ERR reached lua stack limit")
        get = self.rawget
        err = get(v, b"err")
        if type(err) is bytes:
            return Err(err)
        ok = get(v, b"ok")
        if type(ok) is bytes:
            return Simple(ok.replace(b"\r", b" ").replace(b"\n", b" "))
        double = get(v, b"double")
        if type(double) in (int, float):
            if double == 0 and self.negative_zero(v):
                return -0.0
            return float(double)
        big = get(v, b"big_number")
        if type(big) is bytes:
            text = big.replace(b"\r", b" ").replace(b"\n", b" ")
            return _BigNumber(text)
        m = get(v, b"map")
        if m is not None and self.lua_type(m) == "table":
            return Map([(self.from_lua(k, script_resp, depth + 1), self.from_lua(val, script_resp, depth + 1))
                        for k, val in _pairs(m)])
        s = get(v, b"set")
        if s is not None and self.lua_type(s) == "table":
            return SetReply([self.from_lua(k, script_resp, depth + 1) for k, _val in _pairs(s)])
        vs = get(v, b"verbatim_string")
        if vs is not None and self.lua_type(vs) == "table":
            fmt, text = get(vs, b"format"), get(vs, b"string")
            if type(fmt) is bytes and type(text) is bytes:
                return _VerbatimAny(fmt, text)
        out: list[Any] = []
        j = 1
        while True:
            item = get(v, j)
            if item is None:
                return out
            out.append(self.from_lua(item, script_resp, depth + 1))
            j += 1


def _pairs(table: Any) -> list[tuple[Any, Any]]:
    return list(table.items())


def _BigNumber(text: bytes) -> Raw:  # noqa: N802 - a reply constructor, as the dataclasses
    """RESP3 `(` big number; RESP2 clients get it as a bulk (resolved in `finish`)."""
    return Raw(b"(" + text + b"\r\n")


def _VerbatimAny(fmt: bytes, text: bytes) -> Raw:  # noqa: N802
    body = fmt[:3].ljust(3) + b":" + text
    return Raw(b"=%d\r\n%s\r\n" % (len(body), body))


def finish(value: Any, resp: int) -> Any:
    """A script's converted result for a client speaking `resp`: RESP3-only frames made
    by `from_lua` (big numbers, verbatim strings of any format) become bulks in RESP2."""
    if resp == 3:
        return value
    t = type(value)
    if t is Raw:
        data = value.data
        if data[:1] == b"(":
            text = data[1:-2]
        else:
            text = data[data.index(b":", data.index(b"\r\n")) + 1:-2]
        return text
    if t is list:
        return [finish(x, resp) for x in value]
    if t is Map:
        return Map([(finish(k, resp), finish(x, resp)) for k, x in value.pairs])
    if t is SetReply:
        return SetReply([finish(x, resp) for x in value.items])
    return value
