"""XINFO STREAM [FULL [COUNT n]] / GROUPS / CONSUMERS (Redis 7.0).

Decisions: XINFO HELP is not provided (as the other HELP subcommands of the map);
`radix-tree-nodes` is streams.py's model of rax's node count.
"""

from __future__ import annotations

from typing import Any

from raims_node.kv.commands import Engine, KVClient, command, parse_int
from raims_node.kv.errors import CommandError
from raims_node.kv.reply import Map
from raims_node.kv.streams import MAX_ID, ZERO_ID, Group, Stream, fmt_id
from raims_node.kv.streams_cmds import get_stream
from raims_node.kv.streams_groups import sub_arity


def _syntax(sub: bytes) -> CommandError:
    return CommandError(b"ERR unknown subcommand or wrong number of arguments for '%s'. Try XINFO HELP." % sub)


def _head(s: Stream) -> list[tuple[bytes, Any]]:
    return [(b"length", len(s)), (b"radix-tree-keys", len(s.nodes)), (b"radix-tree-nodes", s.radix_nodes()),
            (b"last-generated-id", fmt_id(s.last_id)), (b"max-deleted-entry-id", fmt_id(s.max_deleted)),
            (b"entries-added", s.entries_added), (b"recorded-first-entry-id", fmt_id(s.first_id))]


def _entries_read(g: Group) -> Any:
    return None if g.entries_read == -1 else g.entries_read


def _full_group(name: bytes, g: Group, s: Stream, count: int) -> Map:
    pel = list(g.pel.items())
    if count:
        pel = pel[:count]
    consumers = []
    for cname, cons in sorted(g.consumers.items()):
        cpel = list(cons.pel.items())
        if count:
            cpel = cpel[:count]
        consumers.append(Map([(b"name", cname), (b"seen-time", cons.seen_time), (b"pel-count", len(cons.pel)),
                              (b"pending", [[fmt_id(sid), n.delivery_time, n.delivery_count] for sid, n in cpel])]))
    return Map([(b"name", name), (b"last-delivered-id", fmt_id(g.last_id)), (b"entries-read", _entries_read(g)),
                (b"lag", s.lag(g)), (b"pel-count", len(g.pel)),
                (b"pending", [[fmt_id(sid), n.consumer, n.delivery_time, n.delivery_count] for sid, n in pel]),
                (b"consumers", consumers)])


def _stream_info(s: Stream, a: list[bytes]) -> Any:
    if len(a) == 3:
        first = s.range(ZERO_ID, MAX_ID, 1)
        last = s.range(ZERO_ID, MAX_ID, 1, rev=True)
        return Map([*_head(s), (b"groups", len(s.groups)), (b"first-entry", first[0] if first else None),
                    (b"last-entry", last[0] if last else None)])
    count = 10
    if len(a) == 6:
        count = parse_int(a[5])
        if count < 0:
            count = 10
    groups = [_full_group(name, g, s, count) for name, g in sorted(s.groups.items())]
    return Map([*_head(s), (b"entries", s.range(ZERO_ID, MAX_ID, count)), (b"groups", groups)])


@command("xinfo", -2, subcommands=("stream", "groups", "consumers"))
def xinfo(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    sub = sub_arity(a, "XINFO", {b"stream": -3, b"groups": 3, b"consumers": 4, b"help": 2})
    if sub == b"help":
        raise CommandError(b"ERR unknown subcommand 'help'. Try XINFO HELP.")
    s = get_stream(e, c, a[2])
    if s is None:
        raise CommandError(b"ERR no such key")
    if sub == b"stream" and len(a) > 3 and (
            len(a) not in (4, 6) or a[3].lower() != b"full" or (len(a) == 6 and a[4].lower() != b"count")):
        raise _syntax(a[1][:128])
    if sub == b"stream":
        return _stream_info(s, a)
    if sub == b"groups":
        return [Map([(b"name", name), (b"consumers", len(g.consumers)), (b"pending", len(g.pel)),
                     (b"last-delivered-id", fmt_id(g.last_id)), (b"entries-read", _entries_read(g)),
                     (b"lag", s.lag(g))]) for name, g in sorted(s.groups.items())]
    g = s.groups.get(a[3])
    if g is None:
        raise CommandError(b"NOGROUP No such consumer group '%s' for key name '%s'" % (a[3], a[2]))
    now = e.store.now_ms()
    return [Map([(b"name", name), (b"pending", len(cons.pel)), (b"idle", max(now - cons.seen_time, 0))])
            for name, cons in sorted(g.consumers.items())]
