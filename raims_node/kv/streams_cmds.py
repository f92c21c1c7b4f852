"""Stream commands without consumer groups (Redis 7.0): XADD, XLEN, XRANGE, XREVRANGE,
XDEL, XTRIM, XSETID and XREAD (blocking with BLOCK).

Decisions:
- XADD with an automatic id (`*`, `ms-*`) is logged with the id it made, and an
  approximate trim (`~`) as the exact trim it did (MAXLEN = or MINID = of the result),
  as redis-server propagates them.
- A blocked XREAD waits for an XADD to one of its keys that makes an entry after its ids
  (`$` is the stream's last id when it blocked); it is then answered with the one stream
  that received it, at most COUNT (1000 without COUNT) entries, as redis-server does.
"""

from __future__ import annotations

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
from raims_node.kv.reply import NULL_ARRAY, OK, Map
from raims_node.kv.streams import (
    APPROX_LIMIT,
    MAX_ID,
    ZERO_ID,
    Stream,
    StreamID,
    decr_id,
    fmt_id,
    incr_id,
    parse_id,
    parse_interval,
    parse_xadd_id,
)

XREAD_BLOCK_COUNT = 1000  # redis-server's XREAD_BLOCKED_DEFAULT_COUNT
_NOT_COMPATIBLE = b"ERR syntax error, MAXLEN and MINID options at the same time are not compatible"


def get_stream(e: Engine, c: KVClient, key: bytes) -> Stream | None:
    v: Stream | None = e.get(c.db, key, Stream)
    return v


def changed(e: Engine, c: KVClient, key: bytes, event: str) -> None:
    e.store.touch(c.db, key)
    e.notify(N_STREAM, event, c.db, key)


class TrimArgs:
    """The trimming options of XADD and XTRIM (streamParseAddOrTrimArgsOrReply)."""

    __slots__ = ("maxlen", "minid", "approx", "limit", "nomkstream", "id", "seq_given", "auto", "next")

    def __init__(self) -> None:
        self.maxlen: int | None = None
        self.minid: StreamID | None = None
        self.approx = False
        self.limit = 0
        self.nomkstream = False
        self.id: StreamID = ZERO_ID
        self.seq_given = False
        self.auto = True
        self.next = 0  # the argument after the options (XADD: the id)

    @property
    def trimming(self) -> bool:
        return self.maxlen is not None or self.minid is not None


def parse_trim(a: list[bytes], xadd: bool, replay: bool) -> TrimArgs:
    t = TrimArgs()
    limit_given = False
    i = 2
    n = len(a)
    while i < n:
        more = n - 1 - i
        opt = a[i]
        low = opt.lower()
        if xadd and opt == b"*":
            break
        if low in (b"maxlen", b"minid") and more:
            if t.trimming:
                raise CommandError(_NOT_COMPATIBLE)
            t.approx = False
            if more >= 2 and a[i + 1] in (b"~", b"="):
                t.approx = a[i + 1] == b"~"
                i += 1
            if low == b"maxlen":
                t.maxlen = parse_int(a[i + 1])
                if t.maxlen < 0:
                    raise CommandError(b"ERR The MAXLEN argument must be >= 0.")
            else:
                t.minid = parse_id(a[i + 1], strict=True)
            i += 2
        elif low == b"limit" and more:
            t.limit = parse_int(a[i + 1])
            if t.limit < 0:
                raise CommandError(b"ERR The LIMIT argument must be >= 0.")
            limit_given = True
            i += 2
        elif xadd and low == b"nomkstream":
            t.nomkstream = True
            i += 1
        elif xadd:
            t.id, t.seq_given = parse_xadd_id(opt)
            t.auto = False
            break
        else:
            raise CommandError(SYNTAX)
    t.next = i
    if t.limit and not t.trimming:
        raise CommandError(b"ERR syntax error, LIMIT cannot be used without specifying a trimming strategy")
    if not xadd and not t.trimming:
        raise CommandError(b"ERR syntax error, XTRIM must be called with a trimming strategy")
    if replay:
        t.limit = 0
    elif limit_given:
        if not t.approx:
            raise CommandError(b"ERR syntax error, LIMIT cannot be used without the special ~ option")
    else:
        t.limit = APPROX_LIMIT if t.approx else 0
    return t


def do_trim(s: Stream, t: TrimArgs) -> int:
    return s.trim(t.maxlen, t.minid, t.approx, t.limit)


def _trim_effect(s: Stream, t: TrimArgs) -> list[bytes]:
    """The exact trim an approximate one amounted to (streamRewriteTrimArgument)."""
    if t.maxlen is not None:
        return [b"MAXLEN", b"=", b"%d" % len(s)]
    first = s.entries.peekitem(0)[0] if len(s) else incr_id(s.last_id) or s.last_id
    return [b"MINID", b"=", fmt_id(first)]


@command("xadd", -5, write=True)
def xadd(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    t = parse_trim(a, True, e.loading)
    fpos = t.next + 1
    if len(a) - fpos < 2 or (len(a) - fpos) % 2:
        raise CommandError(b"ERR wrong number of arguments for 'xadd' command")
    if not t.auto and t.seq_given and t.id == ZERO_ID:
        raise CommandError(b"ERR The ID specified in XADD must be greater than 0-0")
    key = a[1]
    s = get_stream(e, c, key)
    if s is None:
        if t.nomkstream:
            return None
        s = Stream()
        e.store.dbs[c.db].data[key] = s
        e.created(c.db, key)
    if s.last_id == MAX_ID:
        raise CommandError(b"ERR The stream has exhausted the last possible ID, unable to add more items")
    if t.auto:
        now = e.store.now_ms()
        new: StreamID | None = (now, 0) if now > s.last_id[0] else incr_id(s.last_id)
    elif not t.seq_given:
        new = t.id
        if t.id[0] == s.last_id[0]:
            if s.last_id[1] == (1 << 64) - 1:  # redis-server 7.0 answers so (its errno is not EDOM)
                raise CommandError(b"ERR Elements are too large to be stored")
            new = incr_id(s.last_id)
    else:
        new = t.id
    if new is None or new <= s.last_id:
        raise CommandError(b"ERR The ID specified in XADD is equal or smaller than the target stream top item")
    s.append(new, a[fpos:])
    changed(e, c, key, "xadd")
    effect = list(a)
    if t.trimming:
        if do_trim(s, t):
            e.notify(N_STREAM, "xtrim", c.db, key)
        if t.approx:
            start = 2
            while effect[start].lower() not in (b"maxlen", b"minid"):
                start += 1
            end = start + (3 if effect[start + 1] in (b"~", b"=") else 2)
            if end < len(effect) and effect[end].lower() == b"limit":
                end += 2
            effect[start:end] = _trim_effect(s, t)
    if t.auto or not t.seq_given:
        at = len(effect) - (len(a) - t.next)
        effect[at] = fmt_id(new)
    e.prop = [effect]
    e.store.signal_ready(c.db, key)
    return fmt_id(new)


@command("xlen", 2)
def xlen(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    s = get_stream(e, c, a[1])
    return 0 if s is None else len(s)


def _xrange(e: Engine, c: KVClient, a: list[bytes], rev: bool) -> Any:
    lo_raw, hi_raw = (a[3], a[2]) if rev else (a[2], a[3])
    start, startex = parse_interval(lo_raw, 0)
    end, endex = parse_interval(hi_raw, (1 << 64) - 1)
    if startex:
        nxt = incr_id(start)
        if nxt is None:
            raise CommandError(b"ERR invalid start ID for the interval")
        start = nxt
    if endex:
        prev = decr_id(end)
        if prev is None:
            raise CommandError(b"ERR invalid end ID for the interval")
        end = prev
    count = -1
    j = 4
    while j < len(a):
        if a[j].lower() == b"count" and j + 1 < len(a):
            count = parse_int(a[j + 1])
            if count < 0:
                count = 0
            j += 2
        else:
            raise CommandError(SYNTAX)
    s = get_stream(e, c, a[1])
    if s is None:
        return []
    if count == 0:
        return NULL_ARRAY
    return s.range(start, end, max(count, 0), rev)


@command("xrange", -4)
def xrange_(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _xrange(e, c, a, False)


@command("xrevrange", -4)
def xrevrange(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _xrange(e, c, a, True)


@command("xdel", -3, write=True)
def xdel(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    s = get_stream(e, c, a[1])
    if s is None:
        return 0
    ids = [parse_id(raw, strict=True) for raw in a[2:]]
    n = sum(1 for sid in ids if s.delete(sid))
    if n:
        changed(e, c, a[1], "xdel")
    return n


@command("xtrim", -4, write=True)
def xtrim(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    t = parse_trim(a, False, e.loading)
    s = get_stream(e, c, a[1])
    if s is None:
        return 0
    n = do_trim(s, t)
    if n:
        changed(e, c, a[1], "xtrim")
        if t.approx:
            e.prop = [[b"XTRIM", a[1], *_trim_effect(s, t)]]
    return n


@command("xsetid", -3, write=True)
def xsetid(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    sid = parse_id(a[2], strict=True)
    added = -1
    maxdel = ZERO_ID
    i = 3
    while i < len(a):
        opt = a[i].lower()
        if opt == b"entriesadded" and i + 1 < len(a):
            added = parse_int(a[i + 1])
            if added < 0:
                raise CommandError(b"ERR entries_added must be positive")
        elif opt == b"maxdeletedid" and i + 1 < len(a):
            maxdel = parse_id(a[i + 1], strict=True)
            if sid < maxdel:
                raise CommandError(b"ERR The ID specified in XSETID is smaller than the provided "
                                   b"max_deleted_entry_id")
        else:
            raise CommandError(SYNTAX)
        i += 2
    s = get_stream(e, c, a[1])
    if s is None:
        raise CommandError(b"ERR no such key")
    if sid < s.max_deleted:
        raise CommandError(b"ERR The ID specified in XSETID is smaller than current max_deleted_entry_id")
    if len(s):
        if sid < s.last_valid():
            raise CommandError(b"ERR The ID specified in XSETID is smaller than the target stream top item")
        if added != -1 and len(s) > added:
            raise CommandError(b"ERR The entries_added specified in XSETID is smaller than the target "
                               b"stream length")
    s.last_id = sid
    if added != -1:
        s.entries_added = added
    if maxdel != ZERO_ID:
        s.max_deleted = maxdel
    changed(e, c, a[1], "xsetid")
    return OK


# ------------------------------------------------------------------ XREAD

class ReadArgs:
    __slots__ = ("block", "count", "noack", "group", "consumer", "keys", "ids", "first")

    def __init__(self) -> None:
        self.block = -1
        self.count = 0
        self.noack = False
        self.group: bytes | None = None
        self.consumer = b""
        self.keys: list[bytes] = []
        self.ids: list[bytes] = []
        self.first = 0  # the index of the first key


def parse_block_ms(raw: bytes) -> int:
    """getTimeoutFromObjectOrReply in ms: an integer, not negative."""
    v = parse_int(raw, b"ERR timeout is not an integer or out of range")
    if v < 0:
        raise CommandError(b"ERR timeout is negative")
    return v


def parse_read(a: list[bytes], group: bool, scripted: bool = False) -> ReadArgs:
    """XREAD's / XREADGROUP's arguments; BLOCK refused from a script (`scripted`), as
    redis-server does."""
    r = ReadArgs()
    i = 1
    n = len(a)
    while i < n:
        more = n - i - 1
        o = a[i].lower()
        if o == b"block" and more:
            if scripted:
                raise CommandError(b"ERR %s command is not allowed with BLOCK option from scripts" % a[0])
            r.block = parse_block_ms(a[i + 1])
            i += 2
        elif o == b"count" and more:
            r.count = max(parse_int(a[i + 1]), 0)
            i += 2
        elif o == b"streams" and more:
            r.first = i + 1
            rest = n - r.first
            if rest % 2:
                raise CommandError(b"ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' "
                                   b"must be specified.")
            r.keys = a[r.first:r.first + rest // 2]
            r.ids = a[r.first + rest // 2:]
            break
        elif o == b"group" and more >= 2:
            if not group:
                raise CommandError(b"ERR The GROUP option is only supported by XREADGROUP. You called XREAD "
                                   b"instead.")
            r.group, r.consumer = a[i + 1], a[i + 2]
            i += 3
        elif o == b"noack":
            if not group:
                raise CommandError(b"ERR The NOACK option is only supported by XREADGROUP. You called XREAD "
                                   b"instead.")
            r.noack = True
            i += 1
        else:
            raise CommandError(SYNTAX)
    if not r.first:
        raise CommandError(SYNTAX)
    if group and r.group is None:
        raise CommandError(b"ERR Missing GROUP option for XREADGROUP")
    return r


def _xread_ids(e: Engine, c: KVClient, r: ReadArgs) -> list[StreamID]:
    ids: list[StreamID] = []
    for key, raw in zip(r.keys, r.ids, strict=True):
        s = get_stream(e, c, key)
        if raw == b"$":
            ids.append(s.last_id if s is not None else ZERO_ID)
        elif raw == b">":
            raise CommandError(b"ERR The > ID can be specified only when calling XREADGROUP using the GROUP "
                               b"<group> <consumer> option.")
        else:
            ids.append(parse_id(raw, strict=True))
    return ids


def read_reply(c: KVClient, items: list[tuple[bytes, list[Any]]]) -> Any:
    if c.resp == 3:
        return Map([(k, v) for k, v in items])
    return [[k, v] for k, v in items]


@command("xread", -4)
def xread(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    r = parse_read(a, False, e.in_script)
    ids = _xread_ids(e, c, r)
    out = []
    for key, after in zip(r.keys, ids, strict=True):
        s = get_stream(e, c, key)
        if s is None or not len(s) or s.last_valid() <= after:
            continue
        start = incr_id(after)
        assert start is not None
        out.append((key, s.range(start, MAX_ID, r.count)))
    if out:
        return read_reply(c, out)
    if r.block < 0:
        return NULL_ARRAY
    # the ids are fixed now: `$` means the last id at the time of blocking
    args = [a[0], b"COUNT", b"%d" % (r.count or XREAD_BLOCK_COUNT), b"STREAMS", *r.keys,
            *(fmt_id(i) for i in ids)]
    return e.block(c, r.keys, r.block, args)


def _xread_ready(e: Engine, c: KVClient, args: list[bytes], key: bytes) -> list[bytes] | None:
    """A blocked XREAD is served when `key` holds an entry after its id for it: the
    command to run then reads that stream alone."""
    s = e.store.dbs[c.db].data.get(key)
    if type(s) is not Stream or not len(s):
        return None
    r = parse_read(args, False)
    for k, raw in zip(r.keys, r.ids, strict=True):
        if k == key and s.last_valid() > parse_id(raw, strict=True):
            return [args[0], b"COUNT", b"%d" % r.count, b"STREAMS", key, raw]
    return None


BLOCK_TYPES[b"xread"] = Stream
BLOCK_READY[b"xread"] = _xread_ready
