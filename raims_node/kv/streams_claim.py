"""XCLAIM and XAUTOCLAIM (Redis 7.0), and the map file's own commands that restore
streams, consumers and pending entries (streams_groups.py's docstring: why).

Decisions:
- XAUTOCLAIM's COUNT above 2^32 answers redis-server's "Insufficient memory" error (it
  allocates 16 bytes per COUNT first; where that fails depends on the machine).
- Both are logged as their effect (XRESTORE.NACK / XRESTORE.CONSUMER, XACK for pending
  entries whose stream entry was deleted, XGROUP SETID for LASTID).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import Any

from raims_node.kv.commands import INT64_MAX, REPLAY_ONLY, Engine, KVClient, command, parse_int
from raims_node.kv.errors import SYNTAX, CommandError
from raims_node.kv.streams import (
    MAX_ID,
    Consumer,
    Group,
    Nack,
    Stream,
    StreamID,
    fmt_id,
    incr_id,
    parse_id,
    parse_interval,
)
from raims_node.kv.streams_cmds import get_stream
from raims_node.kv.streams_groups import (
    Effects,
    drop_nack,
    give_nack,
    group_or_none,
    lookup_consumer,
    nogroup,
)


def _claim_one(e: Engine, c: KVClient, key: bytes, s: Stream, g: Group, sid: StreamID, n: Nack,
               get_cons: Callable[[], Consumer], when: int, bump: bool, justid: bool, fx: Effects) -> Any:
    cons = get_cons()
    give_nack(g, sid, n, cons)
    n.delivery_time = when
    if bump:
        n.delivery_count += 1
    fx.nack(sid, n)
    return fmt_id(sid) if justid else [fmt_id(sid), list(s.entries[sid])]


def _opt_int(raw: bytes, what: bytes) -> int:
    return parse_int(raw, b"ERR Invalid %s argument for XCLAIM" % what)


@command("xclaim", -6, write=True)
def xclaim(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    key, gname = a[1], a[2]
    s, g = group_or_none(e, c, key, gname)
    if s is None or g is None:
        raise nogroup(key, gname)
    minidle = max(parse_int(a[4], b"ERR Invalid min-idle-time argument for XCLAIM"), 0)
    ids: list[StreamID] = []
    j = 5
    while j < len(a):
        try:
            ids.append(parse_id(a[j], strict=True))
        except CommandError:
            break
        j += 1
    now = e.store.now_ms()
    force = justid = False
    retry = -1
    when = -1
    last: StreamID = (0, 0)
    while j < len(a):
        more = len(a) - 1 - j
        opt = a[j].lower()
        if opt == b"force":
            force = True
        elif opt == b"justid":
            justid = True
        elif opt == b"idle" and more:
            j += 1
            when = now - _opt_int(a[j], b"IDLE option")
        elif opt == b"time" and more:
            j += 1
            when = _opt_int(a[j], b"TIME option")
        elif opt == b"retrycount" and more:
            j += 1
            retry = _opt_int(a[j], b"RETRYCOUNT option")
        elif opt == b"lastid" and more:
            j += 1
            last = parse_id(a[j], strict=True)
        else:
            raise CommandError(b"ERR Unrecognized XCLAIM option '%s'" % a[j])
        j += 1
    fx = Effects(key, gname)
    if last > g.last_id:
        g.last_id = last
        fx.position(g)
    if when < 0 or when > now:
        when = now
    holder: list[Consumer] = []

    def get_cons() -> Consumer:
        if not holder:
            holder.append(lookup_consumer(e, c, key, g, a[3], fx))
        return holder[0]

    out = []
    for sid in ids:
        n = g.pel.get(sid)
        if sid not in s.entries:
            if n is not None:
                drop_nack(g, sid)
                fx.ack(sid)
            continue
        if force and n is None:
            n = Nack(b"", when, 0)
        elif n is None or (minidle and now - n.delivery_time < minidle):
            continue
        if retry >= 0:
            n.delivery_count = retry
        out.append(_claim_one(e, c, key, s, g, sid, n, get_cons, when, retry < 0 and not justid, justid, fx))
    if fx.cmds:
        e.store.touch(c.db, key)
        e.prop = fx.cmds
    return out


_MAX_AUTOCLAIM = INT64_MAX // 16
# redis-server allocates 16 bytes per COUNT up front and answers an error when the
# allocation fails; here past 2^32 (64 GiB), a documented limit
_AUTOCLAIM_ALLOC = 1 << 32


@command("xautoclaim", -6, write=True)
def xautoclaim(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    key, gname = a[1], a[2]
    minidle = max(parse_int(a[4], b"ERR Invalid min-idle-time argument for XAUTOCLAIM"), 0)
    start, startex = parse_interval(a[5], 0)
    if startex:
        nxt = incr_id(start)
        if nxt is None:
            raise CommandError(b"ERR invalid start ID for the interval")
        start = nxt
    count = 100
    justid = False
    j = 6
    while j < len(a):
        opt = a[j].lower()
        if opt == b"count" and j + 1 < len(a):
            count = parse_int(a[j + 1], b"ERR COUNT must be > 0")
            if not 1 <= count <= _MAX_AUTOCLAIM:
                raise CommandError(b"ERR COUNT must be > 0")
            j += 2
        elif opt == b"justid":
            justid = True
            j += 1
        else:
            raise CommandError(SYNTAX)
    s, g = group_or_none(e, c, key, gname)
    if s is None or g is None:
        raise nogroup(key, gname)
    if count > _AUTOCLAIM_ALLOC:
        raise CommandError(b"ERR Insufficient memory, failed allocating transient memory, COUNT too high.")
    attempts = count * 10
    now = e.store.now_ms()
    fx = Effects(key, gname)
    holder: list[Consumer] = []

    def get_cons() -> Consumer:
        if not holder:
            holder.append(lookup_consumer(e, c, key, g, a[3], fx))
        return holder[0]

    out: list[Any] = []
    deleted: list[bytes] = []
    pending = list(islice(g.pel.irange(start, MAX_ID), attempts + 1))  # the last one: the cursor
    i = 0
    while attempts and count and i < len(pending):
        attempts -= 1
        sid = pending[i]
        i += 1
        n = g.pel[sid]
        if sid not in s.entries:
            drop_nack(g, sid)
            fx.ack(sid)
            deleted.append(fmt_id(sid))
            count -= 1
            continue
        if minidle and now - n.delivery_time < minidle:
            continue
        out.append(_claim_one(e, c, key, s, g, sid, n, get_cons, now, not justid, justid, fx))
        count -= 1
    cursor = fmt_id(pending[i]) if i < len(pending) else b"0-0"
    if fx.cmds:
        e.store.touch(c.db, key)
        e.prop = fx.cmds
    return [cursor, out, deleted]


# ------------------------------------------------------------------ the map file's own

def _restore_group(e: Engine, c: KVClient, a: list[bytes]) -> tuple[Group, Consumer]:
    s = get_stream(e, c, a[1])
    if s is None or a[2] not in s.groups:
        raise CommandError(b"ERR no such stream group in the map file")
    g = s.groups[a[2]]
    cons = g.consumers.get(a[3])
    if cons is None:
        cons = g.consumers[a[3]] = Consumer(a[3], 0)
    return g, cons


def _restore_nack(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    g, cons = _restore_group(e, c, a)
    sid = parse_id(a[4], strict=True)
    n = g.pel.get(sid) or Nack(cons.name, 0, 0)
    n.delivery_time, n.delivery_count = int(a[5]), int(a[6])
    give_nack(g, sid, n, cons)
    if not cons.seen_time:
        cons.seen_time = n.delivery_time
    e.store.touch(c.db, a[1])


def _restore_consumer(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    _g, cons = _restore_group(e, c, a)
    cons.seen_time = int(a[4])
    e.store.touch(c.db, a[1])


def _restore_stream(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    s = get_stream(e, c, a[1])
    if s is None:
        s = Stream()
        e.store.dbs[c.db].data[a[1]] = s
    s.last_id = parse_id(a[2], strict=True)
    s.entries_added = int(a[3])
    s.max_deleted = parse_id(a[4], strict=True)
    e.store.touch(c.db, a[1])


REPLAY_ONLY[b"xrestore.nack"] = _restore_nack
REPLAY_ONLY[b"xrestore.consumer"] = _restore_consumer
REPLAY_ONLY[b"xrestore.stream"] = _restore_stream
