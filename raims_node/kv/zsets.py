"""Sorted set commands (Redis 7.0): ranges by rank, score and lex, in both directions.

Scores are doubles; replies carry them as doubles (reply.py: a RESP3 double, a RESP2
bulk in "%.17g"). With WITHSCORES a RESP3 client gets [member, score] pairs, a RESP2
client a flat array, as redis-server answers.
"""

from __future__ import annotations

import math
from typing import Any

from raims_node.kv.commands import (
    N_GENERIC,
    N_ZSET,
    Engine,
    KVClient,
    command,
    parse_count,
    parse_double,
    parse_float,
    parse_int,
    parse_mpop,
)
from raims_node.kv.errors import CommandError
from raims_node.kv.glob import glob_match
from raims_node.kv.keys import parse_scan, scan_items
from raims_node.kv.lists import _range, parse_timeout
from raims_node.kv.reply import NULL_ARRAY, format_double
from raims_node.kv.store import ZSet

_BAD_SCORE_RANGE = b"ERR min or max is not a float"
_BAD_LEX_RANGE = b"ERR min or max not valid string range item"
_SYNTAX = b"ERR syntax error"
_NUMERIC_START = frozenset(b"0123456789-+.")


def _z(e: Engine, c: KVClient, key: bytes) -> ZSet | None:
    return e.get_zset(c.db, key)


def _changed(e: Engine, c: KVClient, key: bytes, event: str) -> None:
    e.store.touch(c.db, key)
    if e.notify_flags:
        e.notify(N_ZSET, event, c.db, key)
    if e.store.drop_if_empty(c.db, key):
        e.notify(N_GENERIC, "del", c.db, key)


def _with_scores(c: KVClient, items: list[tuple[float, bytes]], scores: bool) -> list[Any]:
    if not scores:
        return [m for _s, m in items]
    if c.resp == 3:
        return [[m, s] for s, m in items]
    return [x for s, m in items for x in (m, s)]


# ------------------------------------------------------------------ ZADD family

@command("zadd", -4, write=True)
def zadd(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    if len(a) == 4 and a[2] and a[2][0] in _NUMERIC_START:  # the plain form: ZADD key score member
        score = parse_double(a[2])
        z = _z(e, c, a[1])
        if z is None:
            z = ZSet()
            e.store.dbs[c.db].data[a[1]] = z
            e.store.signal_ready(c.db, a[1])
            e.created(c.db, a[1])
        member = a[3]
        old = z.scores.get(member)
        if old == score:
            return 0
        z.add(member, score)
        _changed(e, c, a[1], "zadd")
        return 1 if old is None else 0
    nx = xx = gt = lt = ch = incr = False
    i = 2
    while i < len(a):
        o = a[i].lower()
        if o == b"nx":
            nx = True
        elif o == b"xx":
            xx = True
        elif o == b"gt":
            gt = True
        elif o == b"lt":
            lt = True
        elif o == b"ch":
            ch = True
        elif o == b"incr":
            incr = True
        else:
            break
        i += 1
    pairs = a[i:]
    if not pairs or len(pairs) % 2:
        raise CommandError(_SYNTAX)
    if nx and xx:
        raise CommandError(b"ERR XX and NX options at the same time are not compatible")
    if (gt and nx) or (lt and nx) or (gt and lt):
        raise CommandError(b"ERR GT, LT, and/or NX options at the same time are not compatible")
    if incr and len(pairs) > 2:
        raise CommandError(b"ERR INCR option supports a single increment-element pair")
    scores = [parse_double(pairs[j]) for j in range(0, len(pairs), 2)]
    z = _z(e, c, a[1])
    if z is None:
        if xx:
            return None if incr else 0
        z = ZSet()
        e.store.dbs[c.db].data[a[1]] = z
        e.store.signal_ready(c.db, a[1])
        e.created(c.db, a[1])
    added = changed = 0
    result: Any = None
    for j, score in enumerate(scores):
        member = pairs[2 * j + 1]
        old = z.scores.get(member)
        if old is not None:
            if nx:
                continue
            new = old + score if incr else score
            if math.isnan(new):
                e.store.drop_if_empty(c.db, a[1])
                raise CommandError(b"ERR resulting score is not a number (NaN)")
            if (gt and new <= old) or (lt and new >= old):
                continue
            result = new
            if new != old:
                z.add(member, new)
                changed += 1
        else:
            if xx:
                continue
            z.add(member, score)
            added += 1
            result = score
    if added or changed:
        _changed(e, c, a[1], "zincr" if incr else "zadd")
    else:
        e.store.drop_if_empty(c.db, a[1])
    if incr:
        return result
    return added + changed if ch else added


@command("zincrby", 4, write=True)
def zincrby(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    by = parse_double(a[2])
    z = _z(e, c, a[1])
    old = z.scores.get(a[3], 0.0) if z is not None else 0.0
    new = old + by
    if math.isnan(new):
        raise CommandError(b"ERR resulting score is not a number (NaN)")
    if z is None:
        z = ZSet()
        e.store.dbs[c.db].data[a[1]] = z
        e.store.signal_ready(c.db, a[1])
        e.created(c.db, a[1])
    z.add(a[3], new)
    _changed(e, c, a[1], "zincr")
    return new


@command("zscore", 3)
def zscore(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    z = _z(e, c, a[1])
    return None if z is None else z.scores.get(a[2])


@command("zmscore", -3)
def zmscore(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    z = _z(e, c, a[1])
    return [None if z is None else z.scores.get(m) for m in a[2:]]


@command("zcard", 2)
def zcard(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return len(_z(e, c, a[1]) or ())


@command("zrem", -3, write=True)
def zrem(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    z = _z(e, c, a[1])
    if z is None:
        return 0
    n = sum(1 for m in a[2:] if z.remove(m))
    if n:
        _changed(e, c, a[1], "zrem")
    return n


def _rank(e: Engine, c: KVClient, a: list[bytes], rev: bool) -> Any:
    z = _z(e, c, a[1])
    if z is None:
        return None
    score = z.scores.get(a[2])
    if score is None:
        return None
    r = z.order.index((score, a[2]))
    return len(z) - 1 - r if rev else r


@command("zrank", 3)
def zrank(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _rank(e, c, a, False)


@command("zrevrank", 3)
def zrevrank(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _rank(e, c, a, True)


# ------------------------------------------------------------------ ranges

class ScoreRange:
    __slots__ = ("lo", "hi", "lo_ex", "hi_ex")

    def __init__(self, lo_raw: bytes, hi_raw: bytes) -> None:
        self.lo, self.lo_ex = self._bound(lo_raw)
        self.hi, self.hi_ex = self._bound(hi_raw)

    @staticmethod
    def _bound(raw: bytes) -> tuple[float, bool]:
        ex = raw[:1] == b"("
        v = parse_float(raw[1:] if ex else raw, _BAD_SCORE_RANGE)
        return v, ex

    def empty(self) -> bool:
        return self.lo > self.hi or (self.lo == self.hi and (self.lo_ex or self.hi_ex))

    def items(self, z: ZSet) -> list[tuple[float, bytes]]:
        if self.empty():
            return []
        order = z.order
        i = order.bisect_left((self.lo, b""))
        out = []
        n = len(order)
        while i < n:
            s, m = order[i]
            if self.lo_ex and s == self.lo:
                i += 1
                continue
            if s > self.hi or (self.hi_ex and s == self.hi):
                break
            out.append((s, m))
            i += 1
        return out


class LexRange:
    __slots__ = ("lo", "hi", "lo_ex", "hi_ex", "lo_inf", "hi_inf")

    def __init__(self, lo_raw: bytes, hi_raw: bytes) -> None:
        self.lo, self.lo_ex, self.lo_inf = self._bound(lo_raw)
        self.hi, self.hi_ex, self.hi_inf = self._bound(hi_raw)

    @staticmethod
    def _bound(raw: bytes) -> tuple[bytes, bool, int]:
        if raw == b"-":
            return b"", False, -1
        if raw == b"+":
            return b"", False, 1
        if raw[:1] == b"(":
            return raw[1:], True, 0
        if raw[:1] == b"[":
            return raw[1:], False, 0
        raise CommandError(_BAD_LEX_RANGE)

    def _above_lo(self, m: bytes) -> bool:
        if self.lo_inf:
            return self.lo_inf < 0
        return m > self.lo if self.lo_ex else m >= self.lo

    def _below_hi(self, m: bytes) -> bool:
        if self.hi_inf:
            return self.hi_inf > 0
        return m < self.hi if self.hi_ex else m <= self.hi

    def items(self, z: ZSet) -> list[tuple[float, bytes]]:
        # lex ranges assume equal scores (as Redis says); walk in order and filter
        return [(s, m) for s, m in z.order if self._above_lo(m) and self._below_hi(m)]


def _limit(items: list[Any], offset: int, count: int) -> list[Any]:
    if offset < 0:
        return []
    return items[offset:] if count < 0 else items[offset:offset + count]


def _zrange_generic(e: Engine, c: KVClient, key: bytes, lo: bytes, hi: bytes, by: str, rev: bool,
                    rest: list[bytes], full: bool) -> Any:
    """ZRANGE (`full`: BYSCORE / BYLEX / REV allowed) and its older forms; `lo`, `hi` as
    the client gave them (a reverse range gives max first)."""
    scores = False
    offset, count = 0, -1
    has_limit = False
    i = 0
    while i < len(rest):
        o = rest[i].lower()
        if o == b"withscores":
            scores = True
            i += 1
        elif o == b"limit" and i + 2 < len(rest):
            offset, count = parse_int(rest[i + 1]), parse_int(rest[i + 2])
            has_limit = True
            i += 3
        elif full and o == b"byscore":
            by = "score"
            i += 1
        elif full and o == b"bylex":
            by = "lex"
            i += 1
        elif full and o == b"rev":
            rev = True
            i += 1
        else:
            raise CommandError(_SYNTAX)
    if has_limit and by == "rank":
        raise CommandError(b"ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
    if scores and by == "lex":
        raise CommandError(b"ERR syntax error, WITHSCORES not supported in combination with BYLEX")
    if by == "rank":
        start, end = parse_int(lo), parse_int(hi)
        z = _z(e, c, key)
        if z is None:
            return []
        n = len(z)
        first, stop = _range(n, start, end)
        if rev:
            items = list(z.order[n - stop:n - first])[::-1] if stop > first else []
        else:
            items = list(z.order[first:stop])
        return _with_scores(c, items, scores)
    if rev:
        lo, hi = hi, lo
    rng: ScoreRange | LexRange = ScoreRange(lo, hi) if by == "score" else LexRange(lo, hi)
    z = _z(e, c, key)
    if z is None:
        return []
    items = rng.items(z)
    if rev:
        items.reverse()
    if has_limit:
        items = _limit(items, offset, count)
    return _with_scores(c, items, scores)


@command("zrange", -4)
def zrange(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _zrange_generic(e, c, a[1], a[2], a[3], "rank", False, a[4:], True)


@command("zrevrange", -4)
def zrevrange(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    rest = a[4:]
    if len(rest) > 1 or (rest and rest[0].lower() != b"withscores"):
        raise CommandError(_SYNTAX)
    return _zrange_generic(e, c, a[1], a[2], a[3], "rank", True, rest, False)


@command("zrangebyscore", -4)
def zrangebyscore(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _zrange_generic(e, c, a[1], a[2], a[3], "score", False, a[4:], False)


@command("zrevrangebyscore", -4)
def zrevrangebyscore(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _zrange_generic(e, c, a[1], a[2], a[3], "score", True, a[4:], False)


@command("zrangebylex", -4)
def zrangebylex(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _zrange_generic(e, c, a[1], a[2], a[3], "lex", False, a[4:], False)


@command("zrevrangebylex", -4)
def zrevrangebylex(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _zrange_generic(e, c, a[1], a[2], a[3], "lex", True, a[4:], False)


@command("zcount", 4)
def zcount(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    rng = ScoreRange(a[2], a[3])
    z = _z(e, c, a[1])
    return 0 if z is None else len(rng.items(z))


@command("zlexcount", 4)
def zlexcount(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    rng = LexRange(a[2], a[3])
    z = _z(e, c, a[1])
    return 0 if z is None else len(rng.items(z))


def _remove_items(e: Engine, c: KVClient, key: bytes, z: ZSet, items: list[tuple[float, bytes]],
                  event: str) -> int:
    for _s, m in items:
        z.remove(m)
    if items:
        _changed(e, c, key, event)
    return len(items)


@command("zremrangebyrank", 4, write=True)
def zremrangebyrank(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    start, end = parse_int(a[2]), parse_int(a[3])
    z = _z(e, c, a[1])
    if z is None:
        return 0
    lo, hi = _range(len(z), start, end)
    return _remove_items(e, c, a[1], z, list(z.order[lo:hi]), "zremrangebyrank")


@command("zremrangebyscore", 4, write=True)
def zremrangebyscore(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    rng = ScoreRange(a[2], a[3])
    z = _z(e, c, a[1])
    return 0 if z is None else _remove_items(e, c, a[1], z, rng.items(z), "zremrangebyscore")


@command("zremrangebylex", 4, write=True)
def zremrangebylex(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    rng = LexRange(a[2], a[3])
    z = _z(e, c, a[1])
    return 0 if z is None else _remove_items(e, c, a[1], z, rng.items(z), "zremrangebylex")


def _zpop(e: Engine, c: KVClient, a: list[bytes], maximum: bool) -> Any:
    if len(a) > 3:
        raise CommandError(_SYNTAX)
    count = parse_count(a[2]) if len(a) == 3 else 1
    z = _z(e, c, a[1])
    if z is None or count == 0:
        return []
    n = min(count, len(z))
    items = list(z.order[len(z) - n:])[::-1] if maximum else list(z.order[:n])
    _remove_items(e, c, a[1], z, items, "zpopmax" if maximum else "zpopmin")
    if len(a) == 3:
        return _with_scores(c, items, True)
    return [x for s, m in items for x in (m, s)]


@command("zpopmin", -2, write=True)
def zpopmin(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _zpop(e, c, a, False)


@command("zpopmax", -2, write=True)
def zpopmax(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _zpop(e, c, a, True)


def _bzpop(e: Engine, c: KVClient, a: list[bytes], maximum: bool) -> Any:
    """BZPOPMIN / BZPOPMAX: [key, member, score] from the first non-empty key, else the
    client blocks (BLOCK_TYPES in commands.py); served, it is logged as ZPOPMIN / ZPOPMAX."""
    timeout = parse_timeout(a[-1])
    for key in a[1:-1]:
        z = _z(e, c, key)
        if z:
            score, member = z.order[-1] if maximum else z.order[0]
            _remove_items(e, c, key, z, [(score, member)], "zpopmax" if maximum else "zpopmin")
            e.prop = [[b"ZPOPMAX" if maximum else b"ZPOPMIN", key]]
            return [key, member, score]
    return e.block(c, a[1:-1], timeout, a)


@command("bzpopmin", -3, write=True)
def bzpopmin(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _bzpop(e, c, a, False)


@command("bzpopmax", -3, write=True)
def bzpopmax(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _bzpop(e, c, a, True)


def _zmpop(e: Engine, c: KVClient, a: list[bytes], first: int, block: bool) -> Any:
    """ZMPOP / BZMPOP from `first` (the numkeys argument): [key, [[member, score], ...]]
    from the first sorted set among the keys (another type there: WRONGTYPE), else a
    null array (ZMPOP) or the client blocks; logged as ZPOPMIN / ZPOPMAX with the count
    popped. redis-server's order of checks: numkeys, MIN|MAX, COUNT, then the timeout."""
    keys, maximum, count = parse_mpop(a, first, (b"max", b"min"))
    timeout = parse_timeout(a[1]) if block else 0
    for key in keys:
        z = _z(e, c, key)
        if z:
            n = min(count, len(z))
            items = list(z.order[len(z) - n:])[::-1] if maximum else list(z.order[:n])
            _remove_items(e, c, key, z, items, "zpopmax" if maximum else "zpopmin")
            e.prop = [[b"ZPOPMAX" if maximum else b"ZPOPMIN", key, b"%d" % n]]
            return [key, [[m, s] for s, m in items]]
    if not block:
        return NULL_ARRAY
    return e.block(c, keys, timeout, a)


@command("zmpop", -4, write=True)
def zmpop(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _zmpop(e, c, a, 1, False)


@command("bzmpop", -5, write=True)
def bzmpop(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _zmpop(e, c, a, 2, True)


@command("zscan", -3)
def zscan(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    cursor, pattern, count, _ = parse_scan(a, 3, False)
    z = _z(e, c, a[1])
    pairs = list(z.order) if z is not None else []
    nxt, items = scan_items(pairs, lambda it: it[1], cursor, count, len(pairs))
    out: list[Any] = []
    for s, m in items:
        if pattern is None or glob_match(pattern, m):
            out += (m, format_double(s))
    return [b"%d" % nxt, out]


