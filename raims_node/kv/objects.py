"""COPY, SWAPDB and OBJECT (Redis 7.0): commands on whole values and databases.

COPY copies a value (a deep copy: the two keys change apart) with its deadline, to
another database with DB, over an existing key with REPLACE. SWAPDB swaps two databases
under every connection (a connection keeps its number and sees the other data); WATCHed
keys of either database that exist in either are marked changed, and clients blocked on
keys that now hold elements are served, as redis-server does.

OBJECT ENCODING / REFCOUNT / IDLETIME / FREQ answer as redis-server 7.0 answers for a
value just written by the commands that make it (decisions: the map keeps no encodings,
access times or counters, so the answers are derived from the value):
- ENCODING: strings `int` (a canonical integer of at most 20 characters), `embstr`
  (up to 44 bytes, but `raw` for a HyperLogLog, as the PF commands leave it) or `raw`;
  lists `quicklist`; hashes `listpack` up to 512 fields with fields and values up to
  64 bytes, else `hashtable`; sets `intset` when every member
  is a canonical integer and there are at most 512, else `hashtable`; sorted sets
  `listpack` up to 128 members of up to 64 bytes, else `skiplist`; streams `stream`. redis-server keeps
  an encoding once converted (a hash that shrank stays `hashtable`), answers `raw`
  for strings grown by APPEND or SETRANGE and `embstr` (refcount 1) for an integer
  INCRBYFLOAT wrote; here the current value decides.
- REFCOUNT: 2147483647 for the integers 0..9999 (redis-server's shared integers), else 1.
- IDLETIME: 0 (no access times are kept: every key looks just used).
- FREQ: redis-server's error without an LFU maxmemory policy (the map has none).
A missing key answers nil. OBJECT HELP is not provided (as the other HELP subcommands).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from sortedcontainers import SortedList

from raims_node.kv.commands import (
    INT32_MAX,
    INT32_MIN,
    N_GENERIC,
    Engine,
    KVClient,
    command,
    parse_int,
    parse_ranged,
)
from raims_node.kv.errors import SYNTAX, CommandError
from raims_node.kv.hll import is_hll
from raims_node.kv.reply import OK
from raims_node.kv.store import ZSet
from raims_node.kv.streams import Stream, copy_stream

_INT32 = 1 << 31


def copy_value(value: Any) -> Any:
    if type(value) is ZSet:
        z = ZSet()
        z.scores = dict(value.scores)
        z.order = SortedList(value.order)
        return z
    if type(value) is bytes:
        return value
    if type(value) is Stream:
        return copy_stream(value)
    return type(value)(value)  # dict, deque, set


@command("copy", -3, write=True)
def copy(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    store = e.store
    dst_db = c.db
    replace = False
    j = 3
    while j < len(a):
        opt = a[j].lower()
        if opt == b"replace":
            replace = True
        elif opt == b"db" and j + 1 < len(a):
            dst_db = parse_ranged(a[j + 1], INT32_MIN, INT32_MAX)
            if not 0 <= dst_db < len(store.dbs):
                raise CommandError(b"ERR DB index is out of range")
            j += 1
        else:
            raise CommandError(SYNTAX)
        j += 1
    src, dst = a[1], a[2]
    if dst_db == c.db and src == dst:
        raise CommandError(b"ERR source and destination objects are the same")
    value = store.lookup(c.db, src)
    if value is None:
        return 0
    when = store.ttl_ms(c.db, src)
    if store.lookup(dst_db, dst) is not None:
        if not replace:
            return 0
        store.delete(dst_db, dst)
    store.put(dst_db, dst, copy_value(value))
    if when is not None:
        store.set_expire(dst_db, dst, when)
    e.notify(N_GENERIC, "copy_to", dst_db, dst)
    return 1


def _db_index(raw: bytes, which: bytes) -> int:
    try:
        v = parse_int(raw)
    except CommandError:
        v = _INT32
    if not -_INT32 <= v < _INT32:
        raise CommandError(b"ERR invalid %s DB index" % which)
    return v


@command("swapdb", 3, write=True)
def swapdb(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    i, j = _db_index(a[1], b"first"), _db_index(a[2], b"second")
    store = e.store
    if not (0 <= i < len(store.dbs) and 0 <= j < len(store.dbs)):
        raise CommandError(b"ERR DB index is out of range")
    if i == j:
        return OK
    di, dj = store.dbs[i], store.dbs[j]
    for (wdb, key), clients in store.watchers.items():
        if wdb in (i, j) and (key in di.data or key in dj.data):
            for w in clients:
                w.watch_dirty = True
    store.dbs[i], store.dbs[j] = dj, di
    store.reindex_deadlines()
    store.dirty += 1
    for db in (i, j):  # and XREADGROUP's streams that went away
        for bdb, key in list(store.blocked):
            if bdb == db:
                store.ready.append((bdb, key))
    return OK


_LFU_ERROR = (b"ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note "
              b"that when switching between policies at runtime LRU and LFU data will take some time to adjust.")


def _canonical_int(b: bytes) -> bool:
    if not b or len(b) > 20:
        return False
    digits = b[1:] if b[:1] == b"-" else b
    if not digits.isdigit() or (digits[0] == 48 and (len(digits) > 1 or b[:1] == b"-")):
        return False
    return -(1 << 63) <= int(b) < 1 << 63


def encoding(value: Any) -> bytes:
    t = type(value)
    if t is bytes:
        if _canonical_int(value):
            return b"int"
        return b"embstr" if len(value) <= 44 and not is_hll(value) else b"raw"
    if t is deque:
        return b"quicklist"
    if t is dict:
        small = len(value) <= 512 and all(len(k) <= 64 and len(v) <= 64 for k, v in value.items())
        return b"listpack" if small else b"hashtable"
    if t is Stream:
        return b"stream"
    if t is set:
        return b"intset" if len(value) <= 512 and all(map(_canonical_int, value)) else b"hashtable"
    small = len(value) <= 128 and all(len(m) <= 64 for m in value.scores)
    return b"listpack" if small else b"skiplist"


_SUBCOMMANDS = (b"encoding", b"refcount", b"idletime", b"freq")


@command("object", -2, subcommands=("encoding", "refcount", "idletime", "freq"))
def object_(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    sub = a[1].lower()
    if sub not in _SUBCOMMANDS:
        raise CommandError(b"ERR unknown subcommand '%s'. Try OBJECT HELP." % a[1][:128])
    if len(a) != 3:
        raise CommandError(b"ERR wrong number of arguments for 'object|%s' command" % sub)
    value = e.store.lookup(c.db, a[2])
    if value is None:
        return None
    if sub == b"encoding":
        return encoding(value)
    if sub == b"refcount":
        return 2147483647 if type(value) is bytes and value.isdigit() and _canonical_int(value) \
            and int(value) < 10000 else 1
    if sub == b"idletime":
        return 0
    raise CommandError(_LFU_ERROR)
