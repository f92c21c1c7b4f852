"""Sorted set algebra (Redis 7.0): ZUNION / ZINTER / ZDIFF with WEIGHTS and AGGREGATE,
their STORE forms, ZINTERCARD and ZRANGESTORE. Plain sets count as sorted sets of score 1; a
weighted or aggregated NaN (inf * 0, inf + -inf) becomes 0, as in redis-server."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from raims_node.kv.commands import (
    N_GENERIC,
    N_ZSET,
    Engine,
    KVClient,
    command,
    parse_card_limit,
    parse_double,
    parse_int,
)
from raims_node.kv.errors import WRONGTYPE, CommandError
from raims_node.kv.store import ZSet
from raims_node.kv.zsets import _SYNTAX, _with_scores, _z, _zrange_generic

_AGGREGATE: dict[bytes, Callable[[float, float], float]] = {
    b"sum": lambda x, y: x + y, b"min": lambda x, y: min(x, y), b"max": lambda x, y: max(x, y)}


def _weighted(score: float, weight: float) -> float:
    v = score * weight
    return 0.0 if math.isnan(v) else v


def _combine(e: Engine, c: KVClient, a: list[bytes], op: str, first: int, store: bool) -> Any:
    """ZUNION / ZINTER / ZDIFF and their STORE forms; `first` is the numkeys index."""
    name = a[0].lower().decode()
    n = parse_int(a[first])
    if n < 1:
        raise CommandError(b"ERR at least 1 input key is needed for '%s' command" % name.encode())
    if n > len(a) - first - 1:
        raise CommandError(_SYNTAX)
    sources: list[dict[bytes, float]] = []
    for key in a[first + 1:first + 1 + n]:
        v = e.store.lookup(c.db, key)
        if v is None:
            sources.append({})
        elif type(v) is ZSet:
            sources.append(v.scores)
        elif type(v) is set:
            sources.append(dict.fromkeys(v, 1.0))
        else:
            raise CommandError(WRONGTYPE)
    weights = [1.0] * n
    agg = _AGGREGATE[b"sum"]
    scores = False
    rest = a[first + 1 + n:]
    i = 0
    while i < len(rest):
        o = rest[i].lower()
        left = len(rest) - i - 1
        if op != "diff" and o == b"weights" and left >= n:
            weights = [parse_double(w, b"ERR weight value is not a float") for w in rest[i + 1:i + 1 + n]]
            i += n + 1
        elif op != "diff" and o == b"aggregate" and left >= 1:
            fn = _AGGREGATE.get(rest[i + 1].lower())
            if fn is None:
                raise CommandError(_SYNTAX)
            agg = fn
            i += 2
        elif not store and o == b"withscores":
            scores = True
            i += 1
        else:
            raise CommandError(_SYNTAX)
    result: dict[bytes, float] = {}
    if op == "union":
        for src, w in zip(sources, weights, strict=True):
            for m, s in src.items():
                v = _weighted(s, w)
                result[m] = v if m not in result else _nan0(agg(result[m], v))
    elif op == "inter":
        smallest = min(range(n), key=lambda j: len(sources[j]))
        for m in sources[smallest]:
            if all(m in src for src in sources):
                v = _weighted(sources[0][m], weights[0])
                for src, w in zip(sources[1:], weights[1:], strict=True):
                    v = _nan0(agg(v, _weighted(src[m], w)))
                result[m] = v
    else:
        result = {m: s for m, s in sources[0].items() if not any(m in src for src in sources[1:])}
    items = sorted((s, m) for m, s in result.items())
    if not store:
        return _with_scores(c, items, scores)
    store_zset(e, c, a[1], items, f"z{op}store")
    return len(items)


def store_zset(e: Engine, c: KVClient, dst: bytes, items: list[tuple[float, bytes]], event: str) -> bool:
    """Replace `dst` by a sorted set of `items` (score, member), deleted when there are
    none, with the keyspace event; whether `dst` existed before."""
    existed = e.store.lookup(c.db, dst) is not None
    if items:  # an overwrite of an existing dst (redis-server's setKey): no "new"
        z = ZSet()
        for s, m in items:
            z.add(m, s)
        e.store.put(c.db, dst, z)
        e.notify(N_ZSET, event, c.db, dst)
    elif e.store.delete(c.db, dst):
        e.notify(N_GENERIC, "del", c.db, dst)
    return existed


def _nan0(v: float) -> float:
    return 0.0 if math.isnan(v) else v


@command("zunion", -3)
def zunion(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _combine(e, c, a, "union", 1, False)


@command("zinter", -3)
def zinter(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _combine(e, c, a, "inter", 1, False)


@command("zdiff", -3)
def zdiff(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _combine(e, c, a, "diff", 1, False)


@command("zunionstore", -4, write=True)
def zunionstore(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _combine(e, c, a, "union", 2, True)


@command("zinterstore", -4, write=True)
def zinterstore(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _combine(e, c, a, "inter", 2, True)


@command("zdiffstore", -4, write=True)
def zdiffstore(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _combine(e, c, a, "diff", 2, True)


@command("zintercard", -3)
def zintercard(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    """ZINTERCARD numkeys key [key ...] [LIMIT limit]: the size of the intersection,
    counted up to `limit` (0: no limit)."""
    n = parse_int(a[1])
    if n < 1:
        raise CommandError(b"ERR at least 1 input key is needed for 'zintercard' command")
    if n > len(a) - 2:
        raise CommandError(_SYNTAX)
    sources: list[Any] = []
    for key in a[2:2 + n]:
        v = e.store.lookup(c.db, key)
        if v is None:
            sources.append(())
        elif type(v) is ZSet:
            sources.append(v.scores)
        elif type(v) is set:
            sources.append(v)
        else:
            raise CommandError(WRONGTYPE)
    limit = parse_card_limit(a[2 + n:])
    smallest = min(sources, key=len)
    count = 0
    for m in smallest:
        if all(m in src for src in sources):
            count += 1
            if count == limit:
                break
    return count


@command("zrangestore", -5, write=True)
def zrangestore(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    for o in a[5:]:
        if o.lower() == b"withscores":
            raise CommandError(_SYNTAX)
    saved = c.resp
    c.resp = 2
    try:
        flat = _zrange_generic(e, c, a[2], a[3], a[4], "rank", False, [*a[5:], b"WITHSCORES"]
                               if not any(o.lower() == b"bylex" for o in a[5:]) else a[5:], True)
    finally:
        c.resp = saved
    bylex = any(o.lower() == b"bylex" for o in a[5:])
    z = _z(e, c, a[2])
    pairs = [(z.scores[m] if z is not None else 0.0, m) for m in flat] if bylex else \
        [(flat[i + 1], flat[i]) for i in range(0, len(flat), 2)]
    dst = a[1]
    if pairs:  # an overwrite of an existing dst (redis-server's setKey): no "new"
        out = ZSet()
        for s, m in pairs:
            out.add(m, s)
        e.store.put(c.db, dst, out)
        e.notify(N_ZSET, "zrangestore", c.db, dst)
    elif e.store.delete(c.db, dst):
        e.notify(N_GENERIC, "del", c.db, dst)
    return len(pairs)
