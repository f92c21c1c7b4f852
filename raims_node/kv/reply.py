"""Reply values of the data commands and their RESP2 / RESP3 encodings, in one place.

Commands return plain values; `encode(value, resp)` writes them as redis-server 7.0 does:

    bytes -> bulk            int -> integer           None -> null bulk ($-1 / _)
    list/tuple -> array      Simple -> +status        Err -> -error
    float -> double (RESP3 `,`; RESP2 a bulk, both "%.17g" with inf/-inf/nan)
    Map -> RESP3 map `%` (RESP2 a flat array)     SetReply -> RESP3 set `~` (RESP2 array)
    NULL_ARRAY -> `*-1` in RESP2, `_` in RESP3 (BLPOP timeouts, EXEC aborted by WATCH)
    Verbatim -> RESP3 `=` txt (RESP2 a bulk)      Raw -> bytes already encoded
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Simple:
    text: bytes


@dataclass(frozen=True, slots=True)
class Err:
    """An error reply; `text` starts with its code (`ERR ...`, `WRONGTYPE ...`)."""

    text: bytes


@dataclass(frozen=True, slots=True)
class Map:
    pairs: list[tuple[Any, Any]]


@dataclass(frozen=True, slots=True)
class SetReply:
    items: list[Any]


@dataclass(frozen=True, slots=True)
class Verbatim:
    text: bytes


@dataclass(frozen=True, slots=True)
class Raw:
    data: bytes


class _NullArray:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NULL_ARRAY"


NULL_ARRAY = _NullArray()
OK = Simple(b"OK")
QUEUED = Simple(b"QUEUED")


def format_double(d: float) -> bytes:
    """A double as redis-server 7.0's addReplyDouble prints it."""
    if math.isinf(d):
        return b"inf" if d > 0 else b"-inf"
    if math.isnan(d):
        return b"nan"
    return b"%.17g" % d


def encode(value: Any, resp: int) -> bytes:
    t = type(value)  # the common scalars without the list
    if t is bytes:
        return b"$%d\r\n%s\r\n" % (len(value), value)
    if t is int:
        return b":%d\r\n" % value
    if value is OK:
        return b"+OK\r\n"
    if value is None:
        return b"_\r\n" if resp == 3 else b"$-1\r\n"
    out: list[bytes] = []
    _encode(value, resp, out)
    return b"".join(out)


def _encode(v: Any, resp: int, out: list[bytes]) -> None:
    t = type(v)
    if t is bytes:
        out.append(b"$%d\r\n%s\r\n" % (len(v), v))
    elif t is int:
        out.append(b":%d\r\n" % v)
    elif v is None:
        out.append(b"_\r\n" if resp == 3 else b"$-1\r\n")
    elif t is list or t is tuple:
        out.append(b"*%d\r\n" % len(v))
        for item in v:
            _encode(item, resp, out)
    elif t is Simple:
        out.append(b"+%s\r\n" % v.text)
    elif t is Err:
        out.append(b"-%s\r\n" % v.text.replace(b"\r", b" ").replace(b"\n", b" "))
    elif t is float:
        text = format_double(v)
        out.append(b",%s\r\n" % text if resp == 3 else b"$%d\r\n%s\r\n" % (len(text), text))
    elif t is Map:
        out.append(b"%%%d\r\n" % len(v.pairs) if resp == 3 else b"*%d\r\n" % (2 * len(v.pairs)))
        for k, item in v.pairs:
            _encode(k, resp, out)
            _encode(item, resp, out)
    elif t is SetReply:
        out.append(b"~%d\r\n" % len(v.items) if resp == 3 else b"*%d\r\n" % len(v.items))
        for item in v.items:
            _encode(item, resp, out)
    elif v is NULL_ARRAY:
        out.append(b"_\r\n" if resp == 3 else b"*-1\r\n")
    elif t is Verbatim:
        if resp == 3:
            out.append(b"=%d\r\ntxt:%s\r\n" % (len(v.text) + 4, v.text))
        else:
            out.append(b"$%d\r\n%s\r\n" % (len(v.text), v.text))
    elif t is Raw:
        out.append(v.data)
    elif t is bool:
        out.append((b"#t\r\n" if v else b"#f\r\n") if resp == 3 else b":%d\r\n" % v)
    else:
        raise TypeError(f"no RESP encoding for {t.__name__}")
