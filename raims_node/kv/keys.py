"""Generic key commands (Redis 7.0): DEL, EXISTS, expiry, TYPE, RENAME, KEYS, SCAN, MOVE...

SCAN's cursor (a decision; Redis's is its hash table's reverse-binary bucket index):
keys are visited in the order of a 63-bit hash of the key, and the cursor is the next
hash to visit plus one, so a key present for the whole iteration is returned exactly
once whatever is added or removed meanwhile. Each call sorts the key space (O(n log n)),
fine for the map sizes a node keeps; collections of at most SCAN_ALL_AT_ONCE elements
answer in one call with cursor 0, as redis-server does for its compact encodings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from raims_node.kv.commands import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    N_GENERIC,
    Engine,
    KVClient,
    apply_deadline,
    command,
    parse_int,
    parse_ranged,
    syntax_error,
)
from raims_node.kv.errors import CommandError
from raims_node.kv.glob import glob_match
from raims_node.kv.reply import OK, Simple
from raims_node.kv.store import TYPE_NAMES

SCAN_ALL_AT_ONCE = 128
_HASH_MASK = (1 << 63) - 1


@command("del", -2, write=True)
@command("unlink", -2, write=True)
def del_(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    n = 0
    for k in a[1:]:
        if e.store.delete(c.db, k):
            n += 1
            e.notify(N_GENERIC, "del", c.db, k)
    return n


@command("exists", -2)
def exists(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return sum(1 for k in a[1:] if e.store.lookup(c.db, k) is not None)


@command("touch", -2)
def touch(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return exists(e, c, a)


def _expire(e: Engine, c: KVClient, a: list[bytes], unit: int, absolute: bool, name: str) -> Any:
    nx = xx = gt = lt = False
    for opt in a[3:]:
        o = opt.lower()
        if o == b"nx":
            nx = True
        elif o == b"xx":
            xx = True
        elif o == b"gt":
            gt = True
        elif o == b"lt":
            lt = True
        else:
            raise CommandError(b"ERR Unsupported option " + opt)
    if nx and (xx or gt or lt):
        raise CommandError(b"ERR NX and XX, GT or LT options at the same time are not compatible")
    if gt and lt:
        raise CommandError(b"ERR GT and LT options at the same time are not compatible")
    when = parse_int(a[2])
    invalid = CommandError(b"ERR invalid expire time in '%s' command" % name.encode())
    if unit == 1000:
        if when > INT64_MAX // 1000 or when < INT64_MIN // 1000:
            raise invalid
        when *= 1000
    base = 0 if absolute else e.store.now_ms()
    if when > INT64_MAX - base:
        raise invalid
    when += base
    key = a[1]
    store = e.store
    if store.lookup(c.db, key) is None:
        return 0
    cur = store.ttl_ms(c.db, key)
    if (nx and cur is not None) or (xx and cur is None) or (gt and (cur is None or when <= cur)) \
            or (lt and cur is not None and when >= cur):
        return 0
    apply_deadline(e, c, key, when)
    return 1


@command("expire", -3, write=True)
def expire(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _expire(e, c, a, 1000, False, "expire")


@command("pexpire", -3, write=True)
def pexpire(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _expire(e, c, a, 1, False, "pexpire")


@command("expireat", -3, write=True)
def expireat(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _expire(e, c, a, 1000, True, "expireat")


@command("pexpireat", -3, write=True)
def pexpireat(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _expire(e, c, a, 1, True, "pexpireat")


def _ttl(e: Engine, c: KVClient, key: bytes) -> int | None:
    """Remaining ms; -2 missing, -1 persistent (as a negative sentinel)."""
    if e.store.lookup(c.db, key) is None:
        return -2
    when = e.store.ttl_ms(c.db, key)
    if when is None:
        return -1
    return max(when - e.store.now_ms(), 0)


@command("ttl", 2)
def ttl(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    t = _ttl(e, c, a[1])
    assert t is not None
    return t if t < 0 else (t + 500) // 1000


@command("pttl", 2)
def pttl(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _ttl(e, c, a[1])


@command("expiretime", 2)
def expiretime(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    if e.store.lookup(c.db, a[1]) is None:
        return -2
    when = e.store.ttl_ms(c.db, a[1])
    return -1 if when is None else (when + 500) // 1000


@command("pexpiretime", 2)
def pexpiretime(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    if e.store.lookup(c.db, a[1]) is None:
        return -2
    when = e.store.ttl_ms(c.db, a[1])
    return -1 if when is None else when


@command("persist", 2, write=True)
def persist(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    if e.store.lookup(c.db, a[1]) is None:
        return 0
    if e.store.dbs[c.db].expires.pop(a[1], None) is None:
        return 0
    e.store.touch(c.db, a[1])
    e.notify(N_GENERIC, "persist", c.db, a[1])
    return 1


@command("type", 2)
def type_(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    v = e.store.lookup(c.db, a[1])
    return Simple(b"none" if v is None else TYPE_NAMES[type(v)])


def _rename(e: Engine, c: KVClient, a: list[bytes], nx: bool) -> Any:
    store = e.store
    src, dst = a[1], a[2]
    value = store.lookup(c.db, src)
    if value is None:
        raise CommandError(b"ERR no such key")
    if src == dst:
        return 0 if nx else OK
    if store.lookup(c.db, dst) is not None and nx:  # an expired dst goes first, as in redis-server
        return 0
    when = store.ttl_ms(c.db, src)
    store.delete(c.db, src)
    store.put(c.db, dst, value, fresh=True)  # redis-server deletes dst and adds it: "new"
    if when is not None:
        store.set_expire(c.db, dst, when)
    store.signal_ready(c.db, dst)
    e.notify(N_GENERIC, "rename_from", c.db, src)
    e.notify(N_GENERIC, "rename_to", c.db, dst)
    return 1 if nx else OK


@command("rename", 3, write=True)
def rename(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _rename(e, c, a, False)


@command("renamenx", 3, write=True)
def renamenx(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _rename(e, c, a, True)


@command("keys", 2)
def keys(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    pattern = a[1]
    if pattern == b"*":
        return list(e.store.keys(c.db))
    return [k for k in e.store.keys(c.db) if glob_match(pattern, k)]


def key_hash(key: bytes) -> int:
    return hash(key) & _HASH_MASK


def scan_items(items: Iterable[Any], key_of: Callable[[Any], bytes], cursor: int, count: int,
               size: int) -> tuple[int, list[Any]]:
    """One SCAN step over `items` (module docstring): (next cursor, items visited)."""
    if size <= SCAN_ALL_AT_ONCE and cursor == 0:
        return 0, list(items)
    ordered = sorted((key_hash(key_of(it)), key_of(it), it) for it in items)
    import bisect

    start = bisect.bisect_left(ordered, (cursor - 1, b"")) if cursor else 0
    chunk = ordered[start:start + count]
    rest = start + count
    nxt = ordered[rest][0] + 1 if rest < len(ordered) else 0
    return nxt, [it for _h, _k, it in chunk]


def parse_scan(a: list[bytes], first: int, allow_type: bool) -> tuple[int, bytes | None, int, bytes | None]:
    """cursor, MATCH pattern, COUNT, TYPE of a SCAN-like command's arguments."""
    raw = a[first - 1]
    if not raw.isdigit() or len(raw) > 20 or int(raw) >= 1 << 64:
        raise CommandError(b"ERR invalid cursor")
    cursor = int(raw)
    pattern: bytes | None = None
    count = 10
    typ: bytes | None = None
    i = first
    while i < len(a):
        opt = a[i].lower()
        if i + 1 >= len(a):
            raise syntax_error()
        if opt == b"count":
            count = parse_int(a[i + 1])
            if count < 1:
                raise syntax_error()
        elif opt == b"match":
            pattern = a[i + 1]
        elif opt == b"type" and allow_type:
            typ = a[i + 1].lower()
        else:
            raise syntax_error()
        i += 2
    return cursor, pattern, count, typ


@command("scan", -2)
def scan(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    cursor, pattern, count, typ = parse_scan(a, 2, True)
    store = e.store
    all_keys = list(store.keys(c.db))
    nxt, visited = scan_items(all_keys, lambda k: k, cursor, count, SCAN_ALL_AT_ONCE + 1)
    out = []
    data = store.dbs[c.db].data
    for k in visited:
        if pattern is not None and not glob_match(pattern, k):
            continue
        if typ is not None and TYPE_NAMES.get(type(data.get(k))) != typ:
            continue
        out.append(k)
    return [b"%d" % nxt, out]


@command("randomkey", 1)
def randomkey(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    ks = list(e.store.keys(c.db))
    return e.store.rng.choice(ks) if ks else None


@command("dbsize", 1)
def dbsize(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return len(e.store.dbs[c.db].data)


def _flush_arg(a: list[bytes]) -> None:
    if len(a) > 2 or (len(a) == 2 and a[1].lower() not in (b"async", b"sync")):
        raise syntax_error()


@command("flushdb", -1, write=True)
def flushdb(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    _flush_arg(a)
    e.store.flush(c.db)
    e.prop = [[b"FLUSHDB"]]
    return OK


@command("flushall", -1, write=True)
def flushall(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    _flush_arg(a)
    e.store.flush(None)
    e.prop = [[b"FLUSHALL"]]
    return OK


@command("move", 3, write=True)
def move(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    dst = parse_ranged(a[2], INT32_MIN, INT32_MAX)
    store = e.store
    if not 0 <= dst < len(store.dbs):
        raise CommandError(b"ERR DB index is out of range")
    if dst == c.db:
        raise CommandError(b"ERR source and destination objects are the same")
    value = store.lookup(c.db, a[1])
    if value is None or store.lookup(dst, a[1]) is not None:
        return 0
    when = store.ttl_ms(c.db, a[1])
    store.delete(c.db, a[1])
    store.put(dst, a[1], value)
    if when is not None:
        store.set_expire(dst, a[1], when)
    store.signal_ready(dst, a[1])
    e.notify(N_GENERIC, "move_from", c.db, a[1])
    e.notify(N_GENERIC, "move_to", dst, a[1])
    return 1
