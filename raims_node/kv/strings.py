"""String commands (Redis 7.0 semantics, errors and replies).

Decision: a string grows to at most MAX_STRING (64 MiB, the bridge's `max_bulk`, where
redis-server allows 512 MiB): APPEND and SETRANGE past it get redis-server's error, so
one client cannot make the node allocate half a gigabyte with a 20-byte SETRANGE.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from raims_node.kv.commands import (
    INT64_MAX,
    INT64_MIN,
    N_GENERIC,
    N_STRING,
    Engine,
    KVClient,
    apply_deadline,
    command,
    parse_int,
    syntax_error,
)
from raims_node.kv.errors import NOT_INTEGER, CommandError
from raims_node.kv.reply import OK

MAX_STRING = 64 * 1024 * 1024


def _invalid_expire(name: str) -> CommandError:
    return CommandError(b"ERR invalid expire time in '%s' command" % name.encode())


def expire_at(engine: Engine, raw: bytes, unit_ms: int, absolute: bool, name: str) -> int:
    """An EX/PX/EXAT/PXAT argument as a deadline in ms (redis-server's checks)."""
    v = parse_int(raw)
    if v <= 0 or (unit_ms == 1000 and v > INT64_MAX // 1000):
        raise _invalid_expire(name)
    v *= unit_ms
    if not absolute:
        now = engine.store.now_ms()
        if v > INT64_MAX - now:
            raise _invalid_expire(name)
        v += now
    return v


_EXPIRE_OPTS = {b"ex": (1000, False), b"px": (1, False), b"exat": (1000, True), b"pxat": (1, True)}


@command("get", 2)
def get(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return e.get_string(c.db, a[1])


def _set(e: Engine, c: KVClient, key: bytes, value: bytes, when: int | None, keep_ttl: bool) -> None:
    store = e.store
    store.put(c.db, key, value, keep_ttl=keep_ttl)
    if e.notify_flags:
        e.notify(N_STRING, "set", c.db, key)
    if when is not None:
        store.set_expire(c.db, key, when)
        e.notify(N_GENERIC, "expire", c.db, key)


@command("set", -3, write=True)
def set_(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    if len(a) == 3:
        _set(e, c, a[1], a[2], None, False)
        return OK
    nx = xx = get_old = keep = False
    exp: tuple[int, bool] | None = None
    exp_raw = b""
    i = 3
    while i < len(a):
        opt = a[i].lower()
        nxt = i + 1 < len(a)
        if opt == b"nx" and not xx:
            nx = True
        elif opt == b"xx" and not nx:
            xx = True
        elif opt == b"get":
            get_old = True
        elif opt == b"keepttl" and exp is None:
            keep = True
        elif opt in _EXPIRE_OPTS and not keep and exp in (None, _EXPIRE_OPTS[opt]) and nxt:
            exp = _EXPIRE_OPTS[opt]
            i += 1
            exp_raw = a[i]
        else:
            raise syntax_error()
        i += 1
    when = expire_at(e, exp_raw, exp[0], exp[1], "set") if exp is not None else None
    key = a[1]
    old = e.get_string(c.db, key) if get_old else None
    exists = e.store.lookup(c.db, key) is not None
    if (nx and exists) or (xx and not exists):
        return old if get_old else None
    _set(e, c, key, a[2], when, keep)
    if when is not None:
        e.prop = [[b"SET", key, a[2], b"PXAT", b"%d" % when]]
    return old if get_old else OK


@command("setnx", 3, write=True)
def setnx(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    if e.store.lookup(c.db, a[1]) is not None:
        return 0
    _set(e, c, a[1], a[2], None, False)
    return 1


def _setex(e: Engine, c: KVClient, a: list[bytes], unit: int, name: str) -> Any:
    when = expire_at(e, a[2], unit, False, name)
    _set(e, c, a[1], a[3], when, False)
    e.prop = [[b"SET", a[1], a[3], b"PXAT", b"%d" % when]]
    return OK


@command("setex", 4, write=True)
def setex(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _setex(e, c, a, 1000, "setex")


@command("psetex", 4, write=True)
def psetex(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _setex(e, c, a, 1, "psetex")


@command("getset", 3, write=True)
def getset(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    old = e.get_string(c.db, a[1])
    _set(e, c, a[1], a[2], None, False)
    return old


@command("mget", -2)
def mget(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    out: list[Any] = []
    for k in a[1:]:
        v = e.store.lookup(c.db, k)
        out.append(v if type(v) is bytes else None)
    return out


@command("mset", -3, write=True)
def mset(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    if len(a) % 2 == 0:
        raise CommandError(b"ERR wrong number of arguments for 'mset' command")
    for i in range(1, len(a), 2):
        _set(e, c, a[i], a[i + 1], None, False)
    return OK


@command("msetnx", -3, write=True)
def msetnx(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    if len(a) % 2 == 0:
        raise CommandError(b"ERR wrong number of arguments for 'msetnx' command")
    if any(e.store.lookup(c.db, a[i]) is not None for i in range(1, len(a), 2)):
        return 0
    for i in range(1, len(a), 2):
        _set(e, c, a[i], a[i + 1], None, False)
    return 1


def _incr(e: Engine, c: KVClient, key: bytes, by: int) -> Any:
    """INCR, INCRBY, DECR, DECRBY: redis-server 7.0.15 notifies "incrby" for all four."""
    old = e.get_string(c.db, key)
    cur = 0
    if old is not None:
        cur = parse_int(old)
    new = cur + by
    if not INT64_MIN <= new <= INT64_MAX:
        raise CommandError(b"ERR increment or decrement would overflow")
    e.store.put(c.db, key, b"%d" % new, keep_ttl=True)
    if e.notify_flags:
        e.notify(N_STRING, "incrby", c.db, key)
    return new


@command("incr", 2, write=True)
def incr(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _incr(e, c, a[1], 1)


@command("decr", 2, write=True)
def decr(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _incr(e, c, a[1], -1)


@command("incrby", 3, write=True)
def incrby(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _incr(e, c, a[1], parse_int(a[2]))


@command("decrby", 3, write=True)
def decrby(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    by = parse_int(a[2])
    if by == INT64_MIN:
        raise CommandError(b"ERR decrement would overflow")
    return _incr(e, c, a[1], -by)


def parse_long_double(b: bytes, err: bytes) -> np.longdouble:
    """strtold as redis-server's string2ld uses it (no blanks, no NaN)."""
    if not b or b[0] in b" \t\r\n\x0b\x0c" or b[-1] in b" \t\r\n\x0b\x0c" or b"_" in b or len(b) > 5000:
        raise CommandError(err)
    try:
        float(b)  # the grammar check numpy's parser is lax about
        v = np.longdouble(b.decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        raise CommandError(err) from None
    if np.isnan(v):
        raise CommandError(err)
    return v


def format_long_double(v: np.longdouble) -> bytes:
    """ld2string's human-friendly form: "%.17Lf" with trailing zeros and point removed."""
    text = np.format_float_positional(v, precision=17, unique=False, fractional=True, trim="-")
    if text == "-0":
        text = "0"
    return text.encode()


def incr_float(old: bytes | None, by_raw: bytes, old_err: bytes) -> bytes:
    cur = parse_long_double(old, old_err) if old is not None else np.longdouble(0)
    by = parse_long_double(by_raw, b"ERR value is not a valid float")
    new = cur + by
    if not np.isfinite(new):
        raise CommandError(b"ERR increment would produce NaN or Infinity")
    return format_long_double(new)


@command("incrbyfloat", 3, write=True)
def incrbyfloat(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    text = incr_float(e.get_string(c.db, a[1]), a[2], b"ERR value is not a valid float")
    e.store.put(c.db, a[1], text, keep_ttl=True)
    e.notify(N_STRING, "incrbyfloat", c.db, a[1])
    e.prop = [[b"SET", a[1], text, b"KEEPTTL"]]
    return text


@command("append", 3, write=True)
def append(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    old = e.get_string(c.db, a[1])
    new = a[2] if old is None else old + a[2]
    if len(new) > MAX_STRING:
        raise CommandError(b"ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    e.store.put(c.db, a[1], new, keep_ttl=True)
    e.notify(N_STRING, "append", c.db, a[1])
    return len(new)


@command("strlen", 2)
def strlen(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    v = e.get_string(c.db, a[1])
    return 0 if v is None else len(v)


@command("getrange", 4)
@command("substr", 4)
def getrange(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    start, end = parse_int(a[2]), parse_int(a[3])
    v = e.get_string(c.db, a[1])
    if v is None:
        return b""
    n = len(v)
    if start < 0 and end < 0 and start > end:
        return b""
    if start < 0:
        start = max(n + start, 0)
    if end < 0:
        end = max(n + end, 0)
    end = min(end, n - 1)
    if start > end or n == 0:
        return b""
    return v[start:end + 1]


@command("setrange", 4, write=True)
def setrange(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    offset = parse_int(a[2])
    if offset < 0:
        raise CommandError(b"ERR offset is out of range")
    value = a[3]
    old = e.get_string(c.db, a[1])
    if old is None:
        if not value:
            return 0
        old = b""
    elif not value:
        return len(old)
    if offset + len(value) > MAX_STRING:
        raise CommandError(b"ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    if len(old) < offset:
        old += b"\0" * (offset - len(old))
    new = old[:offset] + value + old[offset + len(value):]
    e.store.put(c.db, a[1], new, keep_ttl=True)
    e.notify(N_STRING, "setrange", c.db, a[1])
    return len(new)


@command("getdel", 2, write=True)
def getdel(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    v = e.get_string(c.db, a[1])
    if v is not None:
        e.store.delete(c.db, a[1])
        e.notify(N_GENERIC, "del", c.db, a[1])
        e.prop = [[b"DEL", a[1]]]
    return v


@command("getex", -2, write=True)
def getex(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    exp: tuple[int, bool] | None = None
    raw = b""
    persist = False
    i = 2
    while i < len(a):
        opt = a[i].lower()
        if opt in _EXPIRE_OPTS and exp is None and not persist and i + 1 < len(a):
            exp = _EXPIRE_OPTS[opt]
            i += 1
            raw = a[i]
        elif opt == b"persist" and exp is None and not persist:
            persist = True
        else:
            raise syntax_error()
        i += 1
    when = expire_at(e, raw, exp[0], exp[1], "getex") if exp is not None else None
    key = a[1]
    v = e.get_string(c.db, key)
    if v is None:
        return None
    store = e.store
    if when is not None:
        apply_deadline(e, c, key, when)
    elif persist and store.dbs[c.db].expires.pop(key, None) is not None:
        store.touch(c.db, key)
        e.prop = [[b"PERSIST", key]]
        e.notify(N_GENERIC, "persist", c.db, key)
    return v


__all__ = ["NOT_INTEGER", "expire_at", "incr_float"]
