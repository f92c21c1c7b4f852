"""Fast forms of the commands a pipeline repeats most (GET, SET, INCR, LPUSH, RPUSH,
ZADD), for the Redis bridge's batch path (bridges/redis_batch.py).

Each takes (engine, client, args) and returns the encoded reply, or None when the
command is not in its plain case (another arity or type, options, a key with a
deadline, notifications on, no map, clients blocked on lists, a value that needs the
general checks): the caller then runs it through `Engine.execute`, whose result is the
reference. A fast form must change the store, the WATCH marks (`KVStore.touch`), the
counters and the map's log exactly as the general command does; the differential tests
run both paths (tests/unit/test_kv_fast.py compares them on random inputs).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from raims_node.kv.commands import Engine, KVClient
from raims_node.kv.notify import N_KEY_MISS
from raims_node.kv.store import ZSet

FastHandler = Callable[[Engine, KVClient, list[bytes]], bytes | None]

OK = b"+OK\r\n"
_NIL = (b"$-1\r\n", b"$-1\r\n", b"$-1\r\n", b"_\r\n")  # by RESP version


def _log(e: Engine, db: int, args: list[bytes]) -> None:
    """The map's log, as Engine.execute writes it for a command logged as itself."""
    log = e.log_encoded
    if log is not None:
        log(db, b"*%d\r\n" % len(args) + b"".join([b"$%d\r\n%s\r\n" % (len(a), a) for a in args]))


def get(e: Engine, c: KVClient, a: list[bytes]) -> bytes | None:
    if len(a) != 2:
        return None
    d = e.store.dbs[c.db]
    key = a[1]
    v = d.data.get(key)
    if v is None:
        if e.notify_flags & N_KEY_MISS:  # its "keymiss" (notify.py)
            return None
        e.commands_processed += 1
        return _NIL[c.resp]
    if type(v) is not bytes or (d.expires and key in d.expires):
        return None
    e.commands_processed += 1
    return b"$%d\r\n%s\r\n" % (len(v), v)


def set_(e: Engine, c: KVClient, a: list[bytes]) -> bytes | None:
    store = e.store
    if len(a) != 3 or e.notify_flags or not store.writable or store.blocked:  # an overwrite unblocks XREADGROUP
        return None
    db = c.db
    d = store.dbs[db]
    key, value = a[1], a[2]
    d.data[key] = value
    if d.expires:
        d.expires.pop(key, None)
    store.touch(db, key)
    e.commands_processed += 1
    log = e.log_encoded
    if log is not None:
        log(db, b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(key), key, len(value), value))
    return OK


def incr(e: Engine, c: KVClient, a: list[bytes]) -> bytes | None:
    store = e.store
    if len(a) != 2 or e.notify_flags or not store.writable:
        return None
    db = c.db
    d = store.dbs[db]
    key = a[1]
    v = d.data.get(key)
    if v is None:
        new = 1
    elif type(v) is bytes and 0 < len(v) < 19 and v.isdigit() and (v[0] != 48 or len(v) == 1) \
            and not (d.expires and key in d.expires):
        new = int(v) + 1  # below 10**18: no overflow
    else:
        return None  # negative, other type, deadline, not a number: the general checks
    d.data[key] = b"%d" % new
    store.touch(db, key)
    e.commands_processed += 1
    log = e.log_encoded
    if log is not None:
        log(db, b"*2\r\n$4\r\nINCR\r\n$%d\r\n%s\r\n" % (len(key), key))
    return b":%d\r\n" % new


def _push(e: Engine, c: KVClient, a: list[bytes], left: bool) -> bytes | None:
    store = e.store
    if len(a) < 3 or e.notify_flags or not store.writable or store.blocked:
        return None
    db = c.db
    d = store.dbs[db]
    key = a[1]
    lst = d.data.get(key)
    if lst is None:
        lst = d.data[key] = deque()
    elif type(lst) is not deque or (d.expires and key in d.expires):
        return None
    store.touch(db, key)
    e.commands_processed += 1
    log = e.log_encoded
    if len(a) == 3:
        value = a[2]
        if left:
            lst.appendleft(value)
        else:
            lst.append(value)
        if log is not None:
            log(db, b"*3\r\n$5\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (
                b"LPUSH" if left else b"RPUSH", len(key), key, len(value), value))
    else:
        if left:
            lst.extendleft(a[2:])
        else:
            lst.extend(a[2:])
        _log(e, db, a)
    return b":%d\r\n" % len(lst)


def lpush(e: Engine, c: KVClient, a: list[bytes]) -> bytes | None:
    return _push(e, c, a, True)


def rpush(e: Engine, c: KVClient, a: list[bytes]) -> bytes | None:
    return _push(e, c, a, False)


def zadd(e: Engine, c: KVClient, a: list[bytes]) -> bytes | None:
    """The plain form with an integer score: ZADD key score member."""
    store = e.store
    if len(a) != 4 or e.notify_flags or not store.writable or store.blocked:
        return None
    raw = a[2]
    if not (raw.isdigit() and len(raw) < 16):
        return None
    score = float(int(raw))
    db = c.db
    d = store.dbs[db]
    key = a[1]
    z = d.data.get(key)
    if z is None:
        z = d.data[key] = ZSet()
    elif type(z) is not ZSet or (d.expires and key in d.expires):
        return None
    e.commands_processed += 1
    member = a[3]
    old = z.scores.get(member)
    if old == score:
        return b":0\r\n"
    z.add(member, score)
    store.touch(db, key)
    log = e.log_encoded
    if log is not None:
        log(db, b"*4\r\n$4\r\nZADD\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (
            len(key), key, len(raw), raw, len(member), member))
    return b":1\r\n" if old is None else b":0\r\n"


FAST: dict[bytes, FastHandler] = {b"get": get, b"set": set_, b"incr": incr, b"lpush": lpush,
                                  b"rpush": rpush, b"zadd": zadd}
