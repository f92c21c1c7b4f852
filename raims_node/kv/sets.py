"""Set commands (Redis 7.0). Member order of SMEMBERS and friends is a Python set's,
like redis-server's hash table order not something a client may rely on; a set of
only integers (redis-server's intset encoding) is answered in numeric order as
redis-server does."""

from __future__ import annotations

from typing import Any

from raims_node.kv.commands import (
    INT64_MAX,
    N_GENERIC,
    N_SET,
    Engine,
    KVClient,
    command,
    parse_card_limit,
    parse_count,
    parse_int,
    parse_ranged,
)
from raims_node.kv.errors import CommandError
from raims_node.kv.glob import glob_match
from raims_node.kv.keys import parse_scan, scan_items
from raims_node.kv.reply import SetReply

INTSET_MAX = 512
MAX_REPEATS = 1 << 20  # SRANDMEMBER with a negative count: elements a reply may repeat (a decision)


def _set(e: Engine, c: KVClient, key: bytes) -> set[bytes] | None:
    v: set[bytes] | None = e.get(c.db, key, set)
    return v


def ordered(members: set[bytes]) -> list[bytes]:
    """redis-server's order where it is predictable: numeric for a small integer set."""
    if len(members) <= INTSET_MAX:
        try:
            nums = [(int(m), m) for m in members]
        except ValueError:
            return list(members)
        if all(m == b"%d" % n for n, m in nums):
            return [m for _n, m in sorted(nums)]
    return list(members)


def _changed(e: Engine, c: KVClient, key: bytes, event: str) -> None:
    e.store.touch(c.db, key)
    e.notify(N_SET, event, c.db, key)
    if e.store.drop_if_empty(c.db, key):
        e.notify(N_GENERIC, "del", c.db, key)


@command("sadd", -3, write=True)
def sadd(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    s, _ = e.get_or_new(c.db, a[1], set)
    before = len(s)
    s.update(a[2:])
    added = len(s) - before
    if added:
        _changed(e, c, a[1], "sadd")
    return added


@command("srem", -3, write=True)
def srem(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    s = _set(e, c, a[1])
    if s is None:
        return 0
    before = len(s)
    s.difference_update(a[2:])
    removed = before - len(s)
    if removed:
        _changed(e, c, a[1], "srem")
    return removed


@command("smembers", 2)
def smembers(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return SetReply(ordered(_set(e, c, a[1]) or set()))


@command("sismember", 3)
def sismember(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return int(a[2] in (_set(e, c, a[1]) or ()))


@command("smismember", -3)
def smismember(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    s = _set(e, c, a[1]) or set()
    return [int(m in s) for m in a[2:]]


@command("scard", 2)
def scard(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return len(_set(e, c, a[1]) or ())


@command("spop", -2, write=True)
def spop(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    if len(a) > 3:
        raise CommandError(b"ERR syntax error")
    count = parse_count(a[2]) if len(a) == 3 else None
    s = _set(e, c, a[1])
    if s is None:
        return None if count is None else SetReply([])
    members = list(s)
    rng = e.store.rng
    picked = rng.sample(members, min(1 if count is None else count, len(members)))
    s.difference_update(picked)
    if picked:
        e.prop = [[b"SREM", a[1], *picked]]
        _changed(e, c, a[1], "spop")
    if count is None:
        return picked[0]
    return SetReply(picked)


@command("srandmember", -2)
def srandmember(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    if len(a) > 3:
        raise CommandError(b"ERR syntax error")
    rng = e.store.rng
    if len(a) == 2:
        s = _set(e, c, a[1])
        return rng.choice(list(s)) if s else None
    count = parse_ranged(a[2], -INT64_MAX, INT64_MAX)  # before the key, as redis-server
    s = _set(e, c, a[1])
    if not s:
        return []
    members = list(s)
    if count >= 0:
        return rng.sample(members, min(count, len(members)))
    if -count > MAX_REPEATS:
        raise CommandError(b"ERR value is out of range")  # redis-server's bound is -LONG_MAX/2
    return rng.choices(members, k=-count)


@command("smove", 4, write=True)
def smove(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    if e.store.lookup(c.db, a[1]) is None:
        return 0
    src = _set(e, c, a[1])
    _set(e, c, a[2])  # WRONGTYPE before anything moves
    if src is None or a[3] not in src:
        return 0
    if a[1] == a[2]:
        return 1
    src.discard(a[3])
    _changed(e, c, a[1], "srem")
    dst, _ = e.get_or_new(c.db, a[2], set)
    dst.add(a[3])
    _changed(e, c, a[2], "sadd")
    return 1


def _operands(e: Engine, c: KVClient, keys: list[bytes]) -> list[set[bytes]]:
    return [_set(e, c, k) or set() for k in keys]


def _combine(kind: str, sets: list[set[bytes]]) -> set[bytes]:
    if kind == "inter":
        if not sets or any(not s for s in sets):
            return set()
        smallest: set[bytes] = min(sets, key=len)
        inter = set(smallest)
        for other in sets:
            inter &= other
        return inter
    if kind == "union":
        return set().union(*sets)
    out = set(sets[0])
    for s in sets[1:]:
        out -= s
    return out


def _op(e: Engine, c: KVClient, a: list[bytes], kind: str) -> Any:
    return SetReply(ordered(_combine(kind, _operands(e, c, a[1:]))))


def _store(e: Engine, c: KVClient, a: list[bytes], kind: str) -> Any:
    result = _combine(kind, _operands(e, c, a[2:]))
    dst = a[1]
    if result:  # an overwrite of an existing dst (redis-server's setKey): no "new"
        e.store.put(c.db, dst, result)
        e.notify(N_SET, f"s{kind}store", c.db, dst)
    elif e.store.delete(c.db, dst):
        e.notify(N_GENERIC, "del", c.db, dst)
    return len(result)


@command("sinter", -2)
def sinter(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _op(e, c, a, "inter")


@command("sunion", -2)
def sunion(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _op(e, c, a, "union")


@command("sdiff", -2)
def sdiff(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _op(e, c, a, "diff")


@command("sinterstore", -3, write=True)
def sinterstore(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _store(e, c, a, "inter")


@command("sunionstore", -3, write=True)
def sunionstore(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _store(e, c, a, "union")


@command("sdiffstore", -3, write=True)
def sdiffstore(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _store(e, c, a, "diff")


@command("sintercard", -3)
def sintercard(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    n = parse_int(a[1], b"ERR numkeys should be greater than 0")
    if n <= 0:
        raise CommandError(b"ERR numkeys should be greater than 0")
    if n > len(a) - 2:
        raise CommandError(b"ERR Number of keys can't be greater than number of args")
    limit = parse_card_limit(a[2 + n:])
    size = len(_combine("inter", _operands(e, c, a[2:2 + n])))
    return min(size, limit) if limit else size


@command("sscan", -3)
def sscan(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    cursor, pattern, count, _ = parse_scan(a, 3, False)
    s = _set(e, c, a[1]) or set()
    nxt, items = scan_items(ordered(s), lambda m: m, cursor, count, len(s))
    return [b"%d" % nxt, [m for m in items if pattern is None or glob_match(pattern, m)]]
