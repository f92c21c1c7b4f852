"""Hash commands (Redis 7.0)."""

from __future__ import annotations

from typing import Any

import numpy as np

from raims_node.kv.commands import (
    INT64_MAX,
    INT64_MIN,
    N_GENERIC,
    N_HASH,
    Engine,
    KVClient,
    command,
    parse_int,
)
from raims_node.kv.errors import CommandError
from raims_node.kv.glob import glob_match
from raims_node.kv.keys import parse_scan, scan_items
from raims_node.kv.reply import OK, Map
from raims_node.kv.strings import incr_float, parse_long_double


def _hash(e: Engine, c: KVClient, key: bytes) -> dict[bytes, bytes] | None:
    v: dict[bytes, bytes] | None = e.get(c.db, key, dict)
    return v


def _hset(e: Engine, c: KVClient, a: list[bytes], name: str) -> int:
    if len(a) % 2 != 0:
        raise CommandError(b"ERR wrong number of arguments for '%s' command" % name.encode())
    h, _new = e.get_or_new(c.db, a[1], dict)
    added = 0
    for i in range(2, len(a), 2):
        if a[i] not in h:
            added += 1
        h[a[i]] = a[i + 1]
    e.store.touch(c.db, a[1])
    e.notify(N_HASH, "hset", c.db, a[1])
    return added


@command("hset", -4, write=True)
def hset(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _hset(e, c, a, "hset")


@command("hmset", -4, write=True)
def hmset(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    _hset(e, c, a, "hmset")
    return OK


@command("hsetnx", 4, write=True)
def hsetnx(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    h = _hash(e, c, a[1])
    if h is not None and a[2] in h:
        return 0
    _hset(e, c, a, "hsetnx")
    return 1


@command("hget", 3)
def hget(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    h = _hash(e, c, a[1])
    return None if h is None else h.get(a[2])


@command("hmget", -3)
def hmget(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    h = _hash(e, c, a[1]) or {}
    return [h.get(f) for f in a[2:]]


@command("hdel", -3, write=True)
def hdel(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    h = _hash(e, c, a[1])
    if h is None:
        return 0
    n = 0
    for f in a[2:]:
        if h.pop(f, None) is not None:
            n += 1
    if n:
        e.store.touch(c.db, a[1])
        e.notify(N_HASH, "hdel", c.db, a[1])
        if e.store.drop_if_empty(c.db, a[1]):
            e.notify(N_GENERIC, "del", c.db, a[1])
    return n


@command("hlen", 2)
def hlen(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return len(_hash(e, c, a[1]) or ())


@command("hstrlen", 3)
def hstrlen(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return len((_hash(e, c, a[1]) or {}).get(a[2], b""))


@command("hexists", 3)
def hexists(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return int(a[2] in (_hash(e, c, a[1]) or {}))


@command("hkeys", 2)
def hkeys(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return list(_hash(e, c, a[1]) or ())


@command("hvals", 2)
def hvals(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return list((_hash(e, c, a[1]) or {}).values())


@command("hgetall", 2)
def hgetall(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return Map(list((_hash(e, c, a[1]) or {}).items()))


@command("hincrby", 4, write=True)
def hincrby(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    by = parse_int(a[3])
    h = _hash(e, c, a[1])
    old = h.get(a[2]) if h is not None else None
    cur = 0 if old is None else parse_int(old, b"ERR hash value is not an integer")
    new = cur + by
    if not INT64_MIN <= new <= INT64_MAX:
        raise CommandError(b"ERR increment or decrement would overflow")
    h, _ = e.get_or_new(c.db, a[1], dict)
    h[a[2]] = b"%d" % new
    e.store.touch(c.db, a[1])
    e.notify(N_HASH, "hincrby", c.db, a[1])
    return new


@command("hincrbyfloat", 4, write=True)
def hincrbyfloat(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    if not np.isfinite(parse_long_double(a[3], b"ERR value is not a valid float")):
        raise CommandError(b"ERR value is NaN or Infinity")
    h = _hash(e, c, a[1])
    old = h.get(a[2]) if h is not None else None
    text = incr_float(old, a[3], b"ERR hash value is not a float")
    h, _ = e.get_or_new(c.db, a[1], dict)
    h[a[2]] = text
    e.store.touch(c.db, a[1])
    e.notify(N_HASH, "hincrbyfloat", c.db, a[1])
    e.prop = [[b"HSET", a[1], a[2], text]]
    return text


@command("hscan", -3)
def hscan(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    cursor, pattern, count, _ = parse_scan(a, 3, False)
    h = _hash(e, c, a[1]) or {}
    nxt, items = scan_items(h.items(), lambda it: it[0], cursor, count, len(h))
    out: list[bytes] = []
    for f, v in items:
        if pattern is None or glob_match(pattern, f):
            out += (f, v)
    return [b"%d" % nxt, out]
