"""cmsgpack for Lua scripts (scripting.py): `pack(...)` and `unpack(s)` with the
encodings of the lua-cmsgpack redis-server 7.0 bundles.

pack: a number integral and within int64 -> the smallest integer form, else a float32
when exact, else a float64; a string -> str (fixstr, str8/16/32); booleans, nil; a table
whose keys are exactly 1..n -> an array (an empty table is an empty array), any other
table -> a map in Lua's `next` order; tables nested deeper than MAX_NESTING, functions
and userdata -> nil. unpack: every value of the string; str -> Lua strings,
integers and floats -> numbers. Decision: unpack_one and unpack_limit are not provided; 64-bit integers unpack as
Lua numbers (doubles), as lua-cmsgpack's.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

MAX_NESTING = 16  # lua-cmsgpack's LUACMSGPACK_MAX_NESTING


class MsgpackError(Exception):
    """Bad input: `text` is lua-cmsgpack's message."""

    def __init__(self, text: bytes) -> None:
        super().__init__(text.decode())
        self.text = text


def _int(n: int) -> bytes:
    if n >= 0:
        if n <= 127:
            return bytes([n])
        for limit, code, fmt in ((0xFF, 0xCC, ">B"), (0xFFFF, 0xCD, ">H"), (0xFFFFFFFF, 0xCE, ">I")):
            if n <= limit:
                return bytes([code]) + struct.pack(fmt, n)
        return b"\xcf" + struct.pack(">Q", n)
    if n >= -32:
        return struct.pack(">b", n)
    for limit, code, fmt in ((-128, 0xD0, ">b"), (-32768, 0xD1, ">h"), (-(2**31), 0xD2, ">i")):
        if n >= limit:
            return bytes([code]) + struct.pack(fmt, n)
    return b"\xd3" + struct.pack(">q", n)


def _number(x: float | int) -> bytes:
    if isinstance(x, int) or (not math.isinf(x) and not math.isnan(x) and -(2.0**63) <= x < 2.0**63 and x == int(x)):
        return _int(int(x))
    try:
        f32 = struct.unpack(">f", struct.pack(">f", x))[0]
    except OverflowError:
        f32 = None
    if f32 == x:
        return b"\xca" + struct.pack(">f", x)
    return b"\xcb" + struct.pack(">d", x)


def _header(n: int, small: int, small_limit: int, c16: int, c32: int) -> bytes:
    if n < small_limit:
        return bytes([small | n])
    if n <= 0xFFFF:
        return bytes([c16]) + struct.pack(">H", n)
    return bytes([c32]) + struct.pack(">I", n)


def make_pack(lua_type: Callable[[Any], Any]) -> Callable[[Any], bytes]:
    def pack(v: Any, level: int = 0) -> bytes:
        t = type(v)
        if t is bytes:
            n = len(v)
            if n < 32:
                head = bytes([0xA0 | n])
            elif n <= 0xFF:
                head = b"\xd9" + bytes([n])
            else:
                head = _header(n, 0, 0, 0xDA, 0xDB)
            return head + v
        if t is bool:
            return b"\xc3" if v else b"\xc2"
        if t is int or t is float:
            return _number(v)
        if v is None or lua_type(v) != "table" or level >= MAX_NESTING:
            return b"\xc0"
        items = list(v.items())
        keys = [k for k, _ in items]
        if all(type(k) in (int, float) and k >= 1 and k == int(k) for k in keys) and \
                (not keys or max(keys) == len(keys)):
            out = [_header(len(items), 0x90, 16, 0xDC, 0xDD)]
            out += [pack(v[i], level + 1) for i in range(1, len(items) + 1)]
        else:
            out = [_header(len(items), 0x80, 16, 0xDE, 0xDF)]
            out += [pack(k, level + 1) + pack(x, level + 1) for k, x in items]
        return b"".join(out)

    return pack


_FIXED = {0xCA: (">f", 4), 0xCB: (">d", 8), 0xCC: (">B", 1), 0xCD: (">H", 2), 0xCE: (">I", 4), 0xCF: (">Q", 8),
          0xD0: (">b", 1), 0xD1: (">h", 2), 0xD2: (">i", 4), 0xD3: (">q", 8)}
_LENGTHS = {0xD9: 1, 0xDA: 2, 0xDB: 4}  # str: the length's size (bin is bad data, as lua-cmsgpack's)
_MISSING = b"Missing bytes in input."


def make_unpack(table: Callable[[], Any]) -> Callable[[bytes], list[Any]]:
    def take(data: bytes, pos: int, n: int) -> bytes:
        if pos + n > len(data):
            raise MsgpackError(_MISSING)
        return data[pos:pos + n]

    def one(data: bytes, pos: int, level: int) -> tuple[Any, int]:
        if level > 1000:
            raise MsgpackError(b"Bad data format in input.")
        code = take(data, pos, 1)[0]
        pos += 1
        if code <= 0x7F:
            return code, pos
        if code in (0xCF, 0xD3):  # 64-bit integers: Lua numbers are doubles
            fmt = ">Q" if code == 0xCF else ">q"
            return float(struct.unpack(fmt, take(data, pos, 8))[0]), pos + 8
        if code >= 0xE0:
            return code - 0x100, pos
        if 0xA0 <= code <= 0xBF:
            n = code & 0x1F
            return take(data, pos, n), pos + n
        if code in (0xC0, 0xC2, 0xC3):
            return (None, False, True)[(0xC0, 0xC2, 0xC3).index(code)], pos
        if code in _FIXED:
            fmt, size = _FIXED[code]
            return struct.unpack(fmt, take(data, pos, size))[0], pos + size
        if code in _LENGTHS:
            size = _LENGTHS[code]
            n = int.from_bytes(take(data, pos, size), "big")
            pos += size
            return take(data, pos, n), pos + n
        if 0x90 <= code <= 0x9F or code in (0xDC, 0xDD):
            n, pos = _count(data, pos, code, 0x90)
            out = table()
            for i in range(1, n + 1):
                out[i], pos = one(data, pos, level + 1)
            return out, pos
        if 0x80 <= code <= 0x8F or code in (0xDE, 0xDF):
            n, pos = _count(data, pos, code, 0x80)
            out = table()
            for _ in range(n):
                k, pos = one(data, pos, level + 1)
                v, pos = one(data, pos, level + 1)
                if k is not None:
                    out[k] = v
            return out, pos
        raise MsgpackError(b"Bad data format in input.")

    def _count(data: bytes, pos: int, code: int, small: int) -> tuple[int, int]:
        if code & 0xF0 == small:
            return code & 0x0F, pos
        size = 2 if code in (0xDC, 0xDE) else 4
        return int.from_bytes(take(data, pos, size), "big"), pos + size

    def unpack(data: bytes) -> list[Any]:
        out: list[Any] = []
        pos = 0
        while pos < len(data):
            value, pos = one(data, pos, 0)
            out.append(value)
        return out

    return unpack
