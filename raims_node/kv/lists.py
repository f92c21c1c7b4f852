"""List commands (Redis 7.0), the blocking pops included.

BLPOP / BRPOP / BLMOVE / BRPOPLPUSH answer at once when a list has elements; else the
client is parked (Engine.block) and the command is run again when a push makes one of
its keys ready, or answered with a null array at its deadline. In MULTI they never
block. A served blocking pop is logged as its plain form (LPOP / RPOP / LMOVE).
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import Any

from raims_node.kv.commands import (
    INT64_MIN,
    N_GENERIC,
    N_LIST,
    Engine,
    KVClient,
    command,
    parse_count,
    parse_int,
    parse_mpop,
    syntax_error,
)
from raims_node.kv.errors import CommandError
from raims_node.kv.reply import NULL_ARRAY, OK

_WHERE = {b"left": True, b"right": False}


def _list(e: Engine, c: KVClient, key: bytes) -> deque[bytes] | None:
    v: deque[bytes] | None = e.get(c.db, key, deque)
    return v


def _push(e: Engine, c: KVClient, a: list[bytes], left: bool, only_existing: bool) -> Any:
    lst = _list(e, c, a[1])
    if lst is None:
        if only_existing:
            return 0
        lst, _ = e.get_or_new(c.db, a[1], deque)
    if left:
        lst.extendleft(a[2:])
    else:
        lst.extend(a[2:])
    store = e.store
    store.touch(c.db, a[1])
    if store.blocked:
        store.signal_ready(c.db, a[1])
    if e.notify_flags:
        e.notify(N_LIST, "lpush" if left else "rpush", c.db, a[1])
    return len(lst)


@command("lpush", -3, write=True)
def lpush(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _push(e, c, a, True, False)


@command("rpush", -3, write=True)
def rpush(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _push(e, c, a, False, False)


@command("lpushx", -3, write=True)
def lpushx(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _push(e, c, a, True, True)


@command("rpushx", -3, write=True)
def rpushx(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _push(e, c, a, False, True)


def _removed(e: Engine, c: KVClient, key: bytes, event: str) -> None:
    e.store.touch(c.db, key)
    e.notify(N_LIST, event, c.db, key)
    if e.store.drop_if_empty(c.db, key):
        e.notify(N_GENERIC, "del", c.db, key)


def _pop(e: Engine, c: KVClient, a: list[bytes], left: bool) -> Any:
    if len(a) > 3:
        raise CommandError(b"ERR wrong number of arguments for '%s' command" % a[0].lower())
    count = parse_count(a[2]) if len(a) == 3 else None
    lst = _list(e, c, a[1])
    if lst is None:
        return None if count is None else NULL_ARRAY
    pop = lst.popleft if left else lst.pop
    if count is None:
        out: Any = pop()
    else:
        out = [pop() for _ in range(min(count, len(lst)))]
        if not out:
            return out
    _removed(e, c, a[1], "lpop" if left else "rpop")
    return out


@command("lpop", -2, write=True)
def lpop(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _pop(e, c, a, True)


@command("rpop", -2, write=True)
def rpop(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _pop(e, c, a, False)


@command("llen", 2)
def llen(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return len(_list(e, c, a[1]) or ())


@command("lindex", 3)
def lindex(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    lst = _list(e, c, a[1])
    i = parse_int(a[2])
    if lst is None:
        return None
    if i < 0:
        i += len(lst)
    return lst[i] if 0 <= i < len(lst) else None


def _range(n: int, start: int, end: int) -> tuple[int, int]:
    """Redis's index normalization; (start, stop) with stop exclusive, maybe empty."""
    if start < 0:
        start += n
    if end < 0:
        end += n
    start = max(start, 0)
    if start > end or start >= n:
        return 0, 0
    return start, min(end, n - 1) + 1


@command("lrange", 4)
def lrange(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    start, end = parse_int(a[2]), parse_int(a[3])
    lst = _list(e, c, a[1])
    if lst is None:
        return []
    lo, hi = _range(len(lst), start, end)
    if hi - lo > len(lst) // 2 and lo > len(lst) // 2:
        return list(itertools.islice(reversed(lst), len(lst) - hi, len(lst) - lo))[::-1]
    return list(itertools.islice(lst, lo, hi))


@command("lset", 4, write=True)
def lset(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    lst = _list(e, c, a[1])
    i = parse_int(a[2])
    if lst is None:
        raise CommandError(b"ERR no such key")
    if i < 0:
        i += len(lst)
    if not 0 <= i < len(lst):
        raise CommandError(b"ERR index out of range")
    lst[i] = a[3]
    e.store.touch(c.db, a[1])
    e.notify(N_LIST, "lset", c.db, a[1])
    return OK


@command("ltrim", 4, write=True)
def ltrim(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    start, end = parse_int(a[2]), parse_int(a[3])
    lst = _list(e, c, a[1])
    if lst is None:
        return OK
    lo, hi = _range(len(lst), start, end)
    keep = list(itertools.islice(lst, lo, hi))
    if len(keep) != len(lst):
        lst.clear()
        lst.extend(keep)
    _removed(e, c, a[1], "ltrim")
    return OK


@command("lrem", 4, write=True)
def lrem(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    count = parse_int(a[2])
    lst = _list(e, c, a[1])
    if lst is None:
        return 0
    items = list(lst)
    removed = 0
    limit = abs(count) or len(items)
    idx = range(len(items)) if count >= 0 else range(len(items) - 1, -1, -1)
    drop = set()
    for i in idx:
        if items[i] == a[3]:
            drop.add(i)
            removed += 1
            if removed >= limit:
                break
    if removed:
        lst.clear()
        lst.extend(v for i, v in enumerate(items) if i not in drop)
        _removed(e, c, a[1], "lrem")
    return removed


@command("linsert", 5, write=True)
def linsert(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    where = a[2].lower()
    if where not in (b"before", b"after"):
        raise syntax_error()
    lst = _list(e, c, a[1])
    if lst is None:
        return 0
    try:
        i = lst.index(a[3])
    except ValueError:
        return -1
    lst.insert(i if where == b"before" else i + 1, a[4])
    e.store.touch(c.db, a[1])
    e.notify(N_LIST, "linsert", c.db, a[1])
    return len(lst)


@command("lpos", -3)
def lpos(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    rank, count, maxlen = 1, None, 0
    i = 3
    while i < len(a):
        opt = a[i].lower()
        if i + 1 >= len(a):
            raise syntax_error()
        if opt == b"rank":
            rank = parse_int(a[i + 1])
            if rank == 0:
                raise CommandError(b"ERR RANK can't be zero: use 1 to start from the first match, "
                                   b"2 from the second ... or use negative to start from the end of the list")
        elif opt == b"count":
            count = parse_int(a[i + 1])
            if count < 0:
                raise CommandError(b"ERR COUNT can't be negative")
        elif opt == b"maxlen":
            maxlen = parse_int(a[i + 1])
            if maxlen < 0:
                raise CommandError(b"ERR MAXLEN can't be negative")
        else:
            raise syntax_error()
        i += 2
    lst = _list(e, c, a[1])
    if lst is None:
        return None if count is None else []
    n = len(lst)
    order = range(n) if rank > 0 else range(n - 1, -1, -1)
    # redis-server 7.0.15 negates a negative rank in a long: RANK -2^63 stays negative, so
    # every match from the tail ranks and COUNT never ends the scan (7.2 refuses it)
    wrapped = rank == INT64_MIN
    skip = 0 if wrapped else abs(rank) - 1
    found: list[int] = []
    for checked, j in enumerate(order):
        if maxlen and checked >= maxlen:
            break
        if lst[j] == a[2]:
            if skip:
                skip -= 1
                continue
            found.append(j)
            if count is None or (count and not wrapped and len(found) >= count):
                break
    if count is None:
        return found[0] if found else None
    return found


def _move(e: Engine, c: KVClient, src: bytes, dst: bytes, from_left: bool, to_left: bool) -> Any:
    lst = _list(e, c, src)
    if lst is None:
        return None
    target = _list(e, c, dst)  # WRONGTYPE before anything moves
    value = lst.popleft() if from_left else lst.pop()
    if target is None:  # never src: it held `value`
        target, _ = e.get_or_new(c.db, dst, deque)
    if to_left:
        target.appendleft(value)
    else:
        target.append(value)
    e.store.touch(c.db, dst)
    e.store.signal_ready(c.db, dst)
    # redis-server's order: the destination's events ("new", the push), then the source's
    e.notify(N_LIST, "lpush" if to_left else "rpush", c.db, dst)
    _removed(e, c, src, "lpop" if from_left else "rpop")
    return value


def _where(raw: bytes) -> bool:
    w = _WHERE.get(raw.lower())
    if w is None:
        raise syntax_error()
    return w


@command("lmove", 5, write=True)
def lmove(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _move(e, c, a[1], a[2], _where(a[3]), _where(a[4]))


@command("rpoplpush", 3, write=True)
def rpoplpush(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _move(e, c, a[1], a[2], False, True)


def parse_timeout(raw: bytes) -> int:
    """A blocking command's timeout in seconds (a double) as ms; 0 for ever."""
    try:
        if not raw or raw.strip() != raw or b"_" in raw:
            raise ValueError
        t = float(raw)
    except ValueError:
        raise CommandError(b"ERR timeout is not a float or out of range") from None
    if t != t:
        raise CommandError(b"ERR timeout is not a float or out of range")
    # redis-server casts ceil(t * 1000) to a long long: infinities and overflows turn negative
    if t < 0 or t in (float("inf"), float("-inf")) or t * 1000 >= 2.0 ** 63:
        raise CommandError(b"ERR timeout is negative")
    ms = int(t * 1000)
    if t > 0 and ms == 0:
        ms = 1
    return ms


def _bpop(e: Engine, c: KVClient, a: list[bytes], left: bool) -> Any:
    timeout = parse_timeout(a[-1])
    for key in a[1:-1]:
        lst = _list(e, c, key)
        if lst:
            value = lst.popleft() if left else lst.pop()
            _removed(e, c, key, "lpop" if left else "rpop")
            e.prop = [[b"LPOP" if left else b"RPOP", key]]
            return [key, value]
    return e.block(c, a[1:-1], timeout, a)


@command("blpop", -3, write=True)
def blpop(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _bpop(e, c, a, True)


@command("brpop", -3, write=True)
def brpop(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _bpop(e, c, a, False)


def _bmove(e: Engine, c: KVClient, a: list[bytes], src: bytes, dst: bytes, fl: bool, tl: bool,
           timeout_raw: bytes) -> Any:
    timeout = parse_timeout(timeout_raw)
    if _list(e, c, src):
        value = _move(e, c, src, dst, fl, tl)
        e.prop = [[b"LMOVE", src, dst, b"LEFT" if fl else b"RIGHT", b"LEFT" if tl else b"RIGHT"]]
        return value
    return e.block(c, [src], timeout, a)


@command("blmove", 6, write=True)
def blmove(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _bmove(e, c, a, a[1], a[2], _where(a[3]), _where(a[4]), a[5])


@command("brpoplpush", 4, write=True)
def brpoplpush(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _bmove(e, c, a, a[1], a[2], False, True, a[3])


def _mpop(e: Engine, c: KVClient, a: list[bytes], first: int, block: bool) -> Any:
    """LMPOP / BLMPOP from `first` (the numkeys argument): [key, [elements]] from the first
    non-empty list, else a null array (LMPOP) or the client blocks; logged as LPOP /
    RPOP with the count. redis-server's order of checks: numkeys, the side, COUNT, then
    the timeout."""
    keys, left, count = parse_mpop(a, first, (b"left", b"right"))
    timeout = parse_timeout(a[1]) if block else 0
    for key in keys:
        lst = _list(e, c, key)
        if lst:
            pop = lst.popleft if left else lst.pop
            out = [pop() for _ in range(min(count, len(lst)))]
            _removed(e, c, key, "lpop" if left else "rpop")
            e.prop = [[b"LPOP" if left else b"RPOP", key, b"%d" % count]]
            return [key, out]
    if not block:
        return NULL_ARRAY
    return e.block(c, keys, timeout, a)


@command("lmpop", -4, write=True)
def lmpop(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _mpop(e, c, a, 1, False)


@command("blmpop", -5, write=True)
def blmpop(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _mpop(e, c, a, 2, True)
