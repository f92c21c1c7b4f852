"""Values to and from redis-server 7.0's serialized form (rdb.py's pieces): `load(body)`
for RESTORE, `dump(value)` for DUMP.

Read: every form redis-server 7.0.15 writes and the older ones it still reads (strings;
lists as quicklist 2, quicklist of ziplists, ziplist or plain; sets plain or intset;
hashes plain, listpack, ziplist or zipmap; sorted sets ZSET_2, ZSET, listpack or
ziplist; streams as STREAM_LISTPACKS_2 or the older STREAM_LISTPACKS). Module values
are refused. Stricter than redis-server without `sanitize-dump-payload yes`: empty
values, duplicate members, out-of-order stream entries, stream nodes whose counts do
not match their entries, pending entries without a consumer are bad data.

Written (decisions, values redis-server reads back the same): strings, members and
blobs as redis-server writes strings (rdb.StringWriter: integer-encoded or LZF-compressed
where it would, up to rdb.COMPRESS_MAX bytes); lists as quicklist 2 of listpack nodes (at most
NODE_ELEMENTS elements or about NODE_BYTES bytes each); sets as intsets (at most 512
integer members) or plain; hashes plain; sorted sets ZSET_2; streams STREAM_LISTPACKS_2
with one listpack per node of the map's model, holding the node's live entries only
(the map keeps no deleted entries, so a node's deleted count is written as 0).
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable
from typing import Any

from raims_node.kv import rdb
from raims_node.kv.rdb import BadPayload, Reader, StringWriter, enc_len, to_bytes, to_int
from raims_node.kv.store import ZSet
from raims_node.kv.streams import U64, ZERO_ID, Consumer, Group, Nack, Node, Stream, StreamID

NODE_ELEMENTS = 128
NODE_BYTES = 8192
INTSET_MAX = 512  # redis-server's set-max-intset-entries
_QL_PLAIN, _QL_PACKED = 1, 2
_SAMEFIELDS, _DELETED = 2, 1


def load(payload: bytes) -> Any:
    """The value a payload holds (read from its front, as redis-server reads it: its
    footer may be read into a value cut short, bytes after the value are ignored);
    BadPayload for anything else."""
    r = Reader(payload)
    t = r.byte()
    value = _LOADERS.get(t, _unknown)(r, t)
    if not value and type(value) not in (bytes, Stream):
        raise BadPayload("empty value")
    return value


def _unknown(r: Reader, t: int) -> Any:
    raise BadPayload(f"unknown value type {t}")


def _string(r: Reader, t: int) -> bytes:
    return r.string()


def _plain_list(r: Reader, t: int) -> deque[bytes]:
    return deque(r.string() for _ in range(r.length()))


def _ziplist_list(r: Reader, t: int) -> deque[bytes]:
    return deque(to_bytes(x) for x in rdb.parse_ziplist(r.string()))


def _quicklist(r: Reader, t: int) -> deque[bytes]:
    out: deque[bytes] = deque()
    for _ in range(r.length()):
        if t == rdb.T_LIST_QUICKLIST:
            out.extend(to_bytes(x) for x in rdb.parse_ziplist(r.string()))
            continue
        container = r.length()
        blob = r.string()
        if container == _QL_PLAIN:
            out.append(blob)
        elif container == _QL_PACKED:
            out.extend(to_bytes(x) for x in rdb.parse_listpack(blob))
        else:
            raise BadPayload("bad quicklist container")
    return out


def _unique(items: list[bytes]) -> set[bytes]:
    s = set(items)
    if len(s) != len(items):
        raise BadPayload("duplicate set members")
    return s


def _plain_set(r: Reader, t: int) -> set[bytes]:
    return _unique([r.string() for _ in range(r.length())])


def _intset(r: Reader, t: int) -> set[bytes]:
    return {b"%d" % v for v in rdb.parse_intset(r.string())}


def _pairs_dict(pairs: list[tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    d = dict(pairs)
    if len(d) != len(pairs):
        raise BadPayload("duplicate hash fields")
    return d


def _flat_pairs(items: list[bytes | int]) -> list[tuple[bytes, bytes]]:
    if len(items) % 2:
        raise BadPayload("odd element count")
    return [(to_bytes(items[i]), to_bytes(items[i + 1])) for i in range(0, len(items), 2)]


def _plain_hash(r: Reader, t: int) -> dict[bytes, bytes]:
    return _pairs_dict([(r.string(), r.string()) for _ in range(r.length())])


def _packed_hash(r: Reader, t: int) -> dict[bytes, bytes]:
    blob = r.string()
    if t == rdb.T_HASH_ZIPMAP:
        return _pairs_dict(rdb.parse_zipmap(blob))
    parse = rdb.parse_listpack if t == rdb.T_HASH_LISTPACK else rdb.parse_ziplist
    return _pairs_dict(_flat_pairs(parse(blob)))


def _zset_of(pairs: list[tuple[bytes, float]]) -> ZSet:
    z = ZSet()
    for member, score in pairs:
        if member in z.scores:
            raise BadPayload("duplicate sorted set members")
        z.add(member, score)
    return z


def _plain_zset(r: Reader, t: int) -> ZSet:
    score = r.binary_double if t == rdb.T_ZSET_2 else r.string_double
    return _zset_of([(r.string(), score()) for _ in range(r.length())])


def _packed_zset(r: Reader, t: int) -> ZSet:
    parse = rdb.parse_listpack if t == rdb.T_ZSET_LISTPACK else rdb.parse_ziplist
    pairs = _flat_pairs(parse(r.string()))
    return _zset_of([(m, rdb.text_double(s)) for m, s in pairs])


# ------------------------------------------------------------------ streams

def _raw_id(r: Reader) -> StreamID:
    ms, seq = struct.unpack(">QQ", r.take(16))
    return ms, seq


def _len_id(r: Reader) -> StreamID:
    return r.length(), r.length()


def _stream_node(s: Stream, master: StreamID, blob: bytes) -> None:
    """The entries of one listpack node (redis-server's t_stream.c layout) into `s`."""
    items = rdb.parse_listpack(blob)
    it = iter(items)

    def nxt() -> bytes | int:
        try:
            return next(it)
        except StopIteration:
            raise BadPayload("stream node cut short") from None

    live, deleted, nfields = to_int(nxt()), to_int(nxt()), to_int(nxt())
    if nfields < 0 or nfields > len(items):
        raise BadPayload("bad stream node header")
    fields = tuple(to_bytes(nxt()) for _ in range(nfields))
    if to_int(nxt()) != 0:
        raise BadPayload("bad stream node header")
    node = Node(master, fields)
    seen_live = seen_deleted = 0
    for first in it:
        flags = to_int(first)
        sid = ((master[0] + to_int(nxt())) & U64, (master[1] + to_int(nxt())) & U64)
        if flags & _SAMEFIELDS:
            flat = [x for f in fields for x in (f, to_bytes(nxt()))]
            want = 3 + nfields
        else:
            n = to_int(nxt())
            if n < 0 or n > len(items):
                raise BadPayload("bad stream entry")
            flat = [to_bytes(nxt()) for _ in range(2 * n)]
            want = 4 + 2 * n
        if flags & ~3 or to_int(nxt()) != want or sid < master or sid <= node.last and seen_live + seen_deleted:
            raise BadPayload("bad stream entry")
        if s.entries and sid <= s.entries.peekitem(-1)[0]:
            raise BadPayload("stream entries out of order")
        node.last = sid
        if flags & _DELETED:
            seen_deleted += 1
        else:
            seen_live += 1
            s.entries[sid] = flat
    if (seen_live, seen_deleted) != (live, deleted) or not seen_live + seen_deleted:
        raise BadPayload("stream node counts mismatch")
    if s.nodes and master <= s.nodes.peekitem(-1)[1].last:
        raise BadPayload("stream nodes out of order")
    node.live, node.deleted = live, deleted
    node.body = max(0, len(blob) - node.lp_bytes())
    if live:
        s.nodes[master] = node


def _stream(r: Reader, t: int) -> Stream:
    s = Stream()
    for _ in range(r.length()):
        key = r.string()
        if len(key) != 16:
            raise BadPayload("bad stream node key")
        master = struct.unpack(">QQ", key)
        _stream_node(s, master, r.string())
    length = r.length()
    s.last_id = _len_id(r)
    if length != len(s.entries) or (s.entries and s.entries.peekitem(-1)[0] > s.last_id):
        raise BadPayload("stream length or last id mismatch")
    s.first_id = s.entries.peekitem(0)[0] if s.entries else ZERO_ID
    if t == rdb.T_STREAM_LISTPACKS_2:
        _len_id(r)  # the recorded first id: the map derives it from the entries
        s.max_deleted = _len_id(r)
        s.entries_added = r.length()
    else:
        s.entries_added = length
    for _ in range(r.length()):
        name = r.string()
        last = _len_id(r)
        if t == rdb.T_STREAM_LISTPACKS_2:
            read = r.length()
            read = read - (1 << 64) if read >= 1 << 63 else read
        else:
            est = s.estimate_read(last)
            read = -1 if est is None else est
        if name in s.groups:
            raise BadPayload("duplicate consumer group")
        g = s.groups[name] = Group(last, read)
        _group_pel(r, g)
    return s


def _group_pel(r: Reader, g: Group) -> None:
    for _ in range(r.length()):
        sid = _raw_id(r)
        if sid in g.pel:
            raise BadPayload("duplicate pending entry")
        g.pel[sid] = Nack(b"", r.millis(), r.length())
    for _ in range(r.length()):
        cname = r.string()
        if cname in g.consumers:
            raise BadPayload("duplicate consumer")
        cons = g.consumers[cname] = Consumer(cname, r.millis())
        for _ in range(r.length()):
            sid = _raw_id(r)
            nack = g.pel.get(sid)
            if nack is None or nack.consumer or sid in cons.pel:
                raise BadPayload("consumer pending entry not in its group's")
            nack.consumer = cname
            cons.pel[sid] = nack
    if any(not n.consumer for n in g.pel.values()):
        raise BadPayload("pending entry without a consumer")


_LOADERS: dict[int, Callable[[Reader, int], Any]] = {
    rdb.T_STRING: _string, rdb.T_LIST: _plain_list, rdb.T_LIST_ZIPLIST: _ziplist_list,
    rdb.T_LIST_QUICKLIST: _quicklist, rdb.T_LIST_QUICKLIST_2: _quicklist,
    rdb.T_SET: _plain_set, rdb.T_SET_INTSET: _intset,
    rdb.T_HASH: _plain_hash, rdb.T_HASH_ZIPMAP: _packed_hash, rdb.T_HASH_ZIPLIST: _packed_hash,
    rdb.T_HASH_LISTPACK: _packed_hash,
    rdb.T_ZSET: _plain_zset, rdb.T_ZSET_2: _plain_zset, rdb.T_ZSET_ZIPLIST: _packed_zset,
    rdb.T_ZSET_LISTPACK: _packed_zset,
    rdb.T_STREAM_LISTPACKS: _stream, rdb.T_STREAM_LISTPACKS_2: _stream,
}


# ------------------------------------------------------------------ writing

def dump(value: Any) -> bytes:
    """The DUMP payload of `value` (footer included)."""
    t = type(value)
    w = StringWriter()
    if t is bytes:
        body = bytes([rdb.T_STRING]) + w(value)
    elif t is deque:
        body = bytes([rdb.T_LIST_QUICKLIST_2]) + _dump_list(value, w)
    elif t is set:
        body = _dump_set(value, w)
    elif t is dict:
        body = bytes([rdb.T_HASH]) + enc_len(len(value)) + b"".join(
            w(k) + w(v) for k, v in value.items())
    elif t is ZSet:
        body = bytes([rdb.T_ZSET_2]) + enc_len(len(value)) + b"".join(
            w(m) + struct.pack("<d", s) for s, m in reversed(value.order))
    elif t is Stream:
        body = bytes([rdb.T_STREAM_LISTPACKS_2]) + _dump_stream(value, w)
    else:
        raise TypeError(f"no serialized form for {t.__name__}")
    return rdb.frame(body)


def _dump_list(items: deque[bytes], w: StringWriter) -> bytes:
    nodes: list[bytes] = []
    part: list[bytes | int] = []
    size = 0
    for el in items:
        part.append(el)
        size += len(el) + 2
        if len(part) >= NODE_ELEMENTS or size >= NODE_BYTES:
            nodes.append(rdb.listpack(part))
            part, size = [], 0
    if part:
        nodes.append(rdb.listpack(part))
    return enc_len(len(nodes)) + b"".join(enc_len(_QL_PACKED) + w(n) for n in nodes)


def _dump_set(members: set[bytes], w: StringWriter) -> bytes:
    ints = [rdb.canonical_int(m) for m in members]
    if len(members) <= INTSET_MAX and all(v is not None for v in ints):
        values = sorted(v for v in ints if v is not None)
        width = 2 if all(-32768 <= v <= 32767 for v in values) else (
            4 if all(-(1 << 31) <= v < 1 << 31 for v in values) else 8)
        fmt = {2: "h", 4: "i", 8: "q"}[width]
        blob = struct.pack(f"<II{len(values)}{fmt}", width, len(values), *values)
        return bytes([rdb.T_SET_INTSET]) + w(blob)
    return bytes([rdb.T_SET]) + enc_len(len(members)) + b"".join(w(m) for m in members)


def _s64(v: int) -> int:
    v &= U64
    return v - (1 << 64) if v >= 1 << 63 else v


def _dump_node(s: Stream, node: Node, w: StringWriter) -> bytes:
    items: list[bytes | int] = [node.live, 0, len(node.fields), *node.fields, 0]
    for sid, flat in s.entries.items()[s.entries.bisect_left(node.master):s.entries.bisect_right(node.last)]:
        d_ms, d_seq = _s64(sid[0] - node.master[0]), _s64(sid[1] - node.master[1])
        names = flat[0::2]
        if tuple(names) == node.fields:
            items += [_SAMEFIELDS, d_ms, d_seq, *flat[1::2], 3 + len(names)]
        else:
            items += [0, d_ms, d_seq, len(names), *flat, 4 + 2 * len(names)]
    return w(struct.pack(">QQ", *node.master)) + w(rdb.listpack(items))


def _dump_stream(s: Stream, w: StringWriter) -> bytes:
    out = [enc_len(len(s.nodes))]
    out += [_dump_node(s, node, w) for node in s.nodes.values()]
    first = s.entries.peekitem(0)[0] if s.entries else ZERO_ID
    out.append(enc_len(len(s.entries)))
    for sid in (s.last_id, first, s.max_deleted):
        out.append(enc_len(sid[0]) + enc_len(sid[1]))
    out.append(enc_len(s.entries_added))
    out.append(enc_len(len(s.groups)))
    for name, g in s.groups.items():
        out.append(w(name) + enc_len(g.last_id[0]) + enc_len(g.last_id[1]) + enc_len(g.entries_read & U64))
        out.append(enc_len(len(g.pel)))
        out += [struct.pack(">QQ", *sid) + struct.pack("<q", n.delivery_time) + enc_len(n.delivery_count)
                for sid, n in g.pel.items()]
        out.append(enc_len(len(g.consumers)))
        for cname, cons in g.consumers.items():
            out.append(w(cname) + struct.pack("<q", cons.seen_time) + enc_len(len(cons.pel)))
            out += [struct.pack(">QQ", *sid) for sid in cons.pel]
    return b"".join(out)


__all__ = ["BadPayload", "dump", "load"]
