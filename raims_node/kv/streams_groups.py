"""Stream consumer groups (Redis 7.0): XGROUP, XREADGROUP, XACK and XPENDING (XCLAIM,
XAUTOCLAIM and the map file's restore commands are in streams_claim.py).

Decisions:
- Commands whose effect depends on the clock are logged as their effect with absolute
  times, through commands of the map file only (REPLAY_ONLY, never a client's):
  `XRESTORE.NACK key group consumer id delivery-ms count` (a pending entry, its consumer
  created if missing), `XRESTORE.CONSUMER key group consumer seen-ms` and
  `XRESTORE.STREAM key last-id entries-added max-deleted-id` (persist.py's snapshot of
  an empty stream and the counters); XREADGROUP, XCLAIM, XAUTOCLAIM and XGROUP
  CREATECONSUMER log those, XACK for pending entries dropped, and XGROUP SETID ...
  ENTRIESREAD for the group's position. redis-server propagates XCLAIM ... FORCE
  instead, which cannot restore a pending entry whose stream entry was deleted, nor a
  consumer's seen-time.
- A blocked XREADGROUP is served by an XADD after its group's last id, and answered
  -NOGROUP when its group is destroyed, -UNBLOCKED when its key is deleted, expires,
  is renamed away, overwritten or flushed, as redis-server 7.0.15 does; also when MOVE
  takes it to another database (redis-server leaves that client blocked).
- XGROUP HELP is not provided (as the other HELP subcommands of the map).
"""

from __future__ import annotations

from itertools import islice
from typing import Any

from raims_node.kv.commands import (
    BLOCK_READY,
    BLOCK_TYPES,
    N_STREAM,
    Engine,
    KVClient,
    command,
    parse_int,
)
from raims_node.kv.errors import SYNTAX, CommandError
from raims_node.kv.reply import NULL_ARRAY, OK, Err
from raims_node.kv.streams import (
    MAX_ID,
    Consumer,
    Group,
    Nack,
    Stream,
    StreamID,
    decr_id,
    fmt_id,
    incr_id,
    parse_id,
    parse_interval,
)
from raims_node.kv.streams_cmds import (
    XREAD_BLOCK_COUNT,
    changed,
    get_stream,
    parse_read,
    read_reply,
)

_NO_KEY = (b"ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use "
           b"the MKSTREAM option to create an empty stream automatically.")


def sub_arity(a: list[bytes], container: str, arities: dict[bytes, int]) -> bytes:
    """The subcommand of a container command, its arity checked as redis-server does."""
    sub = a[1].lower()
    arity = arities.get(sub)
    if arity is None:
        raise CommandError(b"ERR unknown subcommand '%s'. Try %s HELP." % (a[1][:128], container.encode()))
    n = len(a)
    if (arity > 0 and n != arity) or n < -arity:
        raise CommandError(b"ERR wrong number of arguments for '%s|%s' command" % (container.lower().encode(), sub))
    return sub


def _sub_syntax(a: list[bytes]) -> CommandError:
    return CommandError(b"ERR unknown subcommand or wrong number of arguments for '%s'. Try XGROUP HELP."
                        % a[1][:128])


def new_consumer(e: Engine, c: KVClient, key: bytes, g: Group, name: bytes) -> Consumer:
    cons = Consumer(name, e.store.now_ms())
    g.consumers[name] = cons
    e.notify(N_STREAM, "xgroup-createconsumer", c.db, key)
    return cons


def _entries_read(raw: bytes) -> int:
    v = parse_int(raw)
    if v < -1:
        raise CommandError(b"ERR value for ENTRIESREAD must be positive or -1")
    return v


def _xgroup_denyoom(e: Engine, a: list[bytes]) -> bool:
    """XGROUP CREATE and CREATECONSUMER are denyoom (once their arity is right)."""
    sub = a[1].lower()
    return (sub == b"create" and len(a) >= 5) or (sub == b"createconsumer" and len(a) == 5)


@command("xgroup", -2, write=True, subcommands=("create", "setid", "destroy", "createconsumer", "delconsumer"),
         denyoom=_xgroup_denyoom)
def xgroup(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    sub = sub_arity(a, "XGROUP", {b"create": -5, b"setid": -5, b"destroy": 4, b"createconsumer": 5,
                                  b"delconsumer": 5, b"help": 2})
    if sub == b"help":
        raise CommandError(b"ERR unknown subcommand 'help'. Try XGROUP HELP.")
    mkstream = False
    entries_read = -1
    if sub == b"create":
        if len(a) > 8:
            raise _sub_syntax(a)
        i = 5
        while i < len(a):
            opt = a[i].lower()
            if opt == b"mkstream":
                mkstream = True
                i += 1
            elif opt == b"entriesread" and i + 1 < len(a):
                entries_read = _entries_read(a[i + 1])
                i += 2
            else:
                raise _sub_syntax(a)
    elif sub == b"setid":
        if len(a) not in (5, 7):
            raise _sub_syntax(a)
        if len(a) == 7:
            if a[5].lower() != b"entriesread":
                raise _sub_syntax(a)
            entries_read = _entries_read(a[6])
    key, name = a[2], a[3]
    s = get_stream(e, c, key)
    if s is None and not mkstream:
        raise CommandError(_NO_KEY)
    g = s.groups.get(name) if s is not None else None
    if g is None and sub in (b"setid", b"createconsumer", b"delconsumer"):
        raise CommandError(b"NOGROUP No such consumer group '%s' for key name '%s'" % (name, key))
    if sub == b"create":
        sid = (s.last_id if s is not None else (0, 0)) if a[4] == b"$" else parse_id(a[4], strict=True)
        if s is None:
            s = Stream()
            e.store.dbs[c.db].data[key] = s
            e.store.touch(c.db, key)
            e.created(c.db, key)
        if name in s.groups:
            raise CommandError(b"BUSYGROUP Consumer Group name already exists")
        s.groups[name] = Group(sid, entries_read)
        changed(e, c, key, "xgroup-create")
        e.prop = [[b"XGROUP", b"CREATE", key, name, fmt_id(sid), b"MKSTREAM", b"ENTRIESREAD", b"%d" % entries_read]]
        return OK
    assert s is not None
    if sub == b"setid":
        assert g is not None
        g.last_id = s.last_id if a[4] == b"$" else parse_id(a[4])
        g.entries_read = entries_read
        changed(e, c, key, "xgroup-setid")
        e.prop = [[b"XGROUP", b"SETID", key, name, fmt_id(g.last_id), b"ENTRIESREAD", b"%d" % entries_read]]
        return OK
    if sub == b"destroy":
        if g is None:
            return 0
        del s.groups[name]
        changed(e, c, key, "xgroup-destroy")
        e.store.signal_ready(c.db, key)
        return 1
    assert g is not None
    if sub == b"createconsumer":
        if a[4] in g.consumers:
            return 0
        cons = new_consumer(e, c, key, g, a[4])
        e.store.touch(c.db, key)
        e.prop = [[b"XRESTORE.CONSUMER", key, name, a[4], b"%d" % cons.seen_time]]
        return 1
    gone = g.consumers.pop(a[4], None)
    if gone is None:
        return 0
    cons = gone
    for sid in cons.pel:
        del g.pel[sid]
    changed(e, c, key, "xgroup-delconsumer")
    return len(cons.pel)


# ------------------------------------------------------------------ effects

class Effects:
    """The log commands of a group command's clock-dependent changes."""

    def __init__(self, key: bytes, group: bytes) -> None:
        self.key, self.group = key, group
        self.cmds: list[list[bytes]] = []

    def nack(self, sid: StreamID, n: Nack) -> None:
        self.cmds.append([b"XRESTORE.NACK", self.key, self.group, n.consumer, fmt_id(sid),
                          b"%d" % n.delivery_time, b"%d" % n.delivery_count])

    def ack(self, sid: StreamID) -> None:
        self.cmds.append([b"XACK", self.key, self.group, fmt_id(sid)])

    def consumer(self, cons: Consumer) -> None:
        self.cmds.append([b"XRESTORE.CONSUMER", self.key, self.group, cons.name, b"%d" % cons.seen_time])

    def position(self, g: Group) -> None:
        self.cmds.append([b"XGROUP", b"SETID", self.key, self.group, fmt_id(g.last_id), b"ENTRIESREAD",
                          b"%d" % g.entries_read])


def drop_nack(g: Group, sid: StreamID) -> None:
    n = g.pel.pop(sid)
    g.consumers[n.consumer].pel.pop(sid, None)


def give_nack(g: Group, sid: StreamID, n: Nack, cons: Consumer) -> None:
    """Assign pending entry `n` to `cons`."""
    if n.consumer != cons.name:
        old = g.consumers.get(n.consumer)
        if old is not None and old.pel.get(sid) is n:
            del old.pel[sid]
        n.consumer = cons.name
    cons.pel[sid] = n
    g.pel[sid] = n


def lookup_consumer(e: Engine, c: KVClient, key: bytes, g: Group, name: bytes, fx: Effects) -> Consumer:
    """streamLookupConsumer with refresh, or a new consumer."""
    cons = g.consumers.get(name)
    if cons is None:
        cons = new_consumer(e, c, key, g, name)
    else:
        cons.seen_time = e.store.now_ms()
    fx.consumer(cons)
    return cons


# ------------------------------------------------------------------ XREADGROUP

def _deliver(e: Engine, s: Stream, g: Group, cons: Consumer, after: StreamID, count: int, noack: bool,
             fx: Effects) -> list[Any]:
    """The entries after the group's last id: the group advances, the entries become pending."""
    out: list[Any] = []
    start = incr_id(after)
    if start is None:
        return out
    now = e.store.now_ms()
    for sid in s.entries.irange(start, MAX_ID):
        if sid > g.last_id:
            if g.entries_read != -1 and not s.has_tombstones(sid):
                g.entries_read += 1
            elif s.entries_added:
                est = s.estimate_read(sid)
                g.entries_read = -1 if est is None else est
            g.last_id = sid
        if not noack:
            n = g.pel.get(sid)
            if n is None:
                n = Nack(cons.name, now, 1)
            else:
                n.delivery_time, n.delivery_count = now, 1
            give_nack(g, sid, n, cons)
            fx.nack(sid, n)
        out.append([fmt_id(sid), list(s.entries[sid])])
        if count and len(out) >= count:
            break
    fx.position(g)
    return out


def _history(e: Engine, s: Stream, cons: Consumer, after: StreamID, count: int, fx: Effects) -> list[Any]:
    out: list[Any] = []
    start = incr_id(after)
    if start is None:
        return out
    now = e.store.now_ms()
    for sid in list(islice(cons.pel.irange(start, MAX_ID), count or None)):
        if count and len(out) >= count:
            break
        fields = s.entries.get(sid)
        if fields is None:
            out.append([fmt_id(sid), NULL_ARRAY])
            continue
        n = cons.pel[sid]
        n.delivery_time = now
        n.delivery_count += 1
        fx.nack(sid, n)
        out.append([fmt_id(sid), list(fields)])
    return out


@command("xreadgroup", -7, write=True)
def xreadgroup(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    r = parse_read(a, True, e.in_script)
    assert r.group is not None
    resolved: list[tuple[bytes, Stream, Group, StreamID | None]] = []
    for key, raw in zip(r.keys, r.ids, strict=True):
        s = get_stream(e, c, key)
        g = s.groups.get(r.group) if s is not None else None
        if s is None or g is None:
            raise CommandError(b"NOGROUP No such key '%s' or consumer group '%s' in XREADGROUP with GROUP option"
                               % (key, r.group))
        if raw == b"$":
            raise CommandError(b"ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the "
                               b"history of this consumer by specifying a proper ID, or use the > ID to get new "
                               b"messages. The $ ID would just return an empty result set.")
        resolved.append((key, s, g, None if raw == b">" else parse_id(raw, strict=True)))
    out = []
    prop: list[list[bytes]] = []
    for key, s, g, after in resolved:
        if after is None and not (len(s) and s.last_valid() > g.last_id):
            continue
        fx = Effects(key, r.group)
        cons = lookup_consumer(e, c, key, g, r.consumer, fx)
        if after is None:
            items = _deliver(e, s, g, cons, g.last_id, r.count, r.noack, fx)
        else:
            items = _history(e, s, cons, after, r.count, fx)
        e.store.touch(c.db, key)
        out.append((key, items))
        prop += fx.cmds
    e.prop = prop
    if out:
        return read_reply(c, out)
    if r.block < 0:
        return NULL_ARRAY
    head = [a[0], b"GROUP", r.group, r.consumer, b"COUNT", b"%d" % (r.count or XREAD_BLOCK_COUNT)]
    if r.noack:
        head.append(b"NOACK")
    return e.block(c, r.keys, r.block, [*head, b"STREAMS", *r.keys, *r.ids])


def _xreadgroup_ready(e: Engine, c: KVClient, args: list[bytes], key: bytes) -> list[bytes] | Err | None:
    s = e.store.dbs[c.db].data.get(key)
    if type(s) is not Stream:
        return Err(b"UNBLOCKED the stream key no longer exists")
    r = parse_read(args, True)
    assert r.group is not None
    g = s.groups.get(r.group)
    if g is None:
        return Err(b"NOGROUP the consumer group this client was blocked on no longer exists")
    if not len(s) or s.last_valid() <= g.last_id:
        return None
    head = [args[0], b"GROUP", r.group, r.consumer, b"COUNT", b"%d" % r.count]
    if r.noack:
        head.append(b"NOACK")
    return [*head, b"STREAMS", key, b">"]


BLOCK_TYPES[b"xreadgroup"] = Stream
BLOCK_READY[b"xreadgroup"] = _xreadgroup_ready


# ------------------------------------------------------------------ XACK, XPENDING

def group_or_none(e: Engine, c: KVClient, key: bytes, name: bytes) -> tuple[Stream | None, Group | None]:
    s = get_stream(e, c, key)
    return s, (s.groups.get(name) if s is not None else None)


@command("xack", -4, write=True)
def xack(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    _s, g = group_or_none(e, c, a[1], a[2])
    if g is None:
        return 0
    ids = [parse_id(raw, strict=True) for raw in a[3:]]
    n = 0
    for sid in ids:
        if sid in g.pel:
            drop_nack(g, sid)
            n += 1
    if n:
        e.store.touch(c.db, a[1])
    return n


def nogroup(key: bytes, group: bytes) -> CommandError:
    return CommandError(b"NOGROUP No such key '%s' or consumer group '%s'" % (key, group))


def _bounds(start_raw: bytes, end_raw: bytes) -> tuple[StreamID, StreamID]:
    start, startex = parse_interval(start_raw, 0)
    if startex:
        nxt = incr_id(start)
        if nxt is None:
            raise CommandError(b"ERR invalid start ID for the interval")
        start = nxt
    end, endex = parse_interval(end_raw, (1 << 64) - 1)
    if endex:
        prev = decr_id(end)
        if prev is None:
            raise CommandError(b"ERR invalid end ID for the interval")
        end = prev
    return start, end


@command("xpending", -3)
def xpending(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    n = len(a)
    if n != 3 and not 6 <= n <= 9:
        raise CommandError(SYNTAX)
    minidle = count = 0
    consumer: bytes | None = None
    start = end = (0, 0)
    if n >= 6:
        at = 3
        if a[3].lower() == b"idle":
            minidle = parse_int(a[4])
            if n < 8:
                raise CommandError(SYNTAX)
            at = 5
        count = max(parse_int(a[at + 2]), 0)
        start, end = _bounds(a[at], a[at + 1])
        if at + 3 < n:
            consumer = a[at + 3]
    s, g = group_or_none(e, c, a[1], a[2])
    if s is None or g is None:
        raise nogroup(a[1], a[2])
    if n == 3:
        if not g.pel:
            return [0, None, None, NULL_ARRAY]
        per = [[name, b"%d" % len(cons.pel)] for name, cons in sorted(g.consumers.items()) if cons.pel]
        return [len(g.pel), fmt_id(g.pel.peekitem(0)[0]), fmt_id(g.pel.peekitem(-1)[0]), per]
    pel = g.pel
    if consumer is not None:
        cons = g.consumers.get(consumer)
        if cons is None:
            return []
        pel = cons.pel
    now = e.store.now_ms()
    out: list[Any] = []
    for sid in pel.irange(start, end):
        if len(out) >= count:
            break
        nack = pel[sid]
        if minidle and now - nack.delivery_time < minidle:
            continue
        out.append([fmt_id(sid), nack.consumer, max(now - nack.delivery_time, 0), nack.delivery_count])
    return out
