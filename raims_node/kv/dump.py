"""DUMP and RESTORE (Redis 7.0): values in redis-server 7.0's serialized form (RDB
version 10, rdb.py and rdb_values.py), so keys copy between a redis-server and the map.

RESTORE checks as redis-server 7.0.15 does and in its order: the options (REPLACE,
ABSTTL, IDLETIME seconds, FREQ frequency; IDLETIME and FREQ exclude each other), an
existing key (BUSYKEY without REPLACE), the TTL, the payload's version and checksum,
then the value ("ERR Bad data format"). A TTL of 0 is no deadline; a deadline already
past creates nothing (and deletes the replaced key: a "del" notification), as
redis-server does. Notification "restore" (generic).

Decisions: IDLETIME and FREQ are checked and then ignored (the map keeps no access
times or counters; OBJECT IDLETIME / FREQ answer as for any key). A relative TTL is
added to the clock with redis-server's 64-bit wrap-around (a huge TTL wraps into the
past and creates nothing). RESTORE is logged as its effect: `RESTORE key deadline
payload REPLACE ABSTTL` (or DEL), so a replay rebuilds the same key at any time.
"""

from __future__ import annotations

from typing import Any

from raims_node.kv import rdb
from raims_node.kv.commands import N_GENERIC, Engine, KVClient, command, parse_int, syntax_error
from raims_node.kv.errors import CommandError
from raims_node.kv.rdb_values import BadPayload, dump, load
from raims_node.kv.reply import OK

BUSYKEY = b"BUSYKEY Target key name already exists."
BAD_PAYLOAD = b"ERR DUMP payload version or checksum are wrong"
BAD_DATA = b"ERR Bad data format"


@command("dump", 2)
def dump_(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    value = e.store.lookup(c.db, a[1])
    return None if value is None else dump(value)


def _wrap64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


@command("restore", -4, write=True)
def restore(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    replace = absttl = False
    idle = freq = -1
    j = 4
    while j < len(a):
        opt = a[j].lower()
        more = j + 1 < len(a)
        if opt == b"replace":
            replace = True
        elif opt == b"absttl":
            absttl = True
        elif opt == b"idletime" and more and freq == -1:
            idle = parse_int(a[j + 1])
            if idle < 0:
                raise CommandError(b"ERR Invalid IDLETIME value, must be >= 0")
            j += 1
        elif opt == b"freq" and more and idle == -1:
            freq = parse_int(a[j + 1])
            if not 0 <= freq <= 255:
                raise CommandError(b"ERR Invalid FREQ value, must be >= 0 and <= 255")
            j += 1
        else:
            raise syntax_error()
        j += 1
    store = e.store
    key = a[1]
    if not replace and store.lookup(c.db, key) is not None:
        raise CommandError(BUSYKEY)
    ttl = parse_int(a[2])
    if ttl < 0:
        raise CommandError(b"ERR Invalid TTL value, must be >= 0")
    if not rdb.verify(a[3]):
        raise CommandError(BAD_PAYLOAD)
    try:
        value = load(a[3])
    except (BadPayload, RecursionError):
        raise CommandError(BAD_DATA) from None
    deleted = store.delete(c.db, key) if replace else False
    now = store.now_ms()
    when = ttl if absttl or not ttl else _wrap64(ttl + now)
    if ttl and when <= now:
        if deleted:
            e.prop = [[b"DEL", key]]
            e.notify(N_GENERIC, "del", c.db, key)
        return OK
    store.put(c.db, key, value)
    if ttl:
        store.set_expire(c.db, key, when)
    e.prop = [[b"RESTORE", key, b"%d" % (when if ttl else 0), a[3], b"REPLACE", b"ABSTTL"]]
    e.notify(N_GENERIC, "restore", c.db, key)
    return OK
