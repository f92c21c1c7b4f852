"""The stream value type (Redis 7.0): entries by (ms, seq) id, consumer groups, and the
parsing of stream ids; the commands are in streams_cmds.py, streams_groups.py and
streams_info.py.

Decisions:
- Entries live in a SortedDict of id -> flat [field, value, ...]. redis-server keeps them
  in radix-tree nodes (listpacks) of at most `stream-node-max-entries` (100) entries and
  `stream-node-max-bytes` (4096) bytes; the `~` trims remove whole nodes only, so the
  nodes are modelled (`Node`: its master id and fields, live and deleted counts, and
  the listpack's byte size computed as listpack.c encodes) to trim exactly as
  redis-server does. After a restart the nodes are rebuilt from the live entries (the
  snapshot re-adds them), as redis-server's AOF rewrite does.
- XINFO's `radix-tree-nodes` is the node count of a compressed radix tree holding the
  nodes' 16-byte keys (rax's canonical shape); rax may keep another shape after some
  deletions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sortedcontainers import SortedDict

from raims_node.kv.errors import CommandError

U64 = (1 << 64) - 1
MAX_ID = (U64, U64)
ZERO_ID = (0, 0)
NODE_MAX_ENTRIES = 100  # redis-server's stream-node-max-entries
NODE_MAX_BYTES = 4096  # stream-node-max-bytes
APPROX_LIMIT = 100 * NODE_MAX_ENTRIES  # the default LIMIT of a `~` trim
INVALID_ID = b"ERR Invalid stream ID specified as stream command argument"
StreamID = tuple[int, int]

_LL = re.compile(rb"0|-?[1-9][0-9]{0,18}")
_SPACE = b" \t\n\r\x0b\x0c"


def _string2ll(b: bytes) -> int | None:
    if _LL.fullmatch(b) is None:
        return None
    v = int(b)
    return v if -(1 << 63) <= v < 1 << 63 else None


def string2ull(b: bytes) -> int | None:
    """redis-server's string2ull: a strict long long, else what strtoull accepts whole."""
    v = _string2ll(b)
    if v is not None:
        return v if v >= 0 else None
    s = b.lstrip(_SPACE)
    neg = False
    if s[:1] in (b"+", b"-"):
        neg = s[:1] == b"-"
        s = s[1:]
    if not s or not s.isdigit():
        return None
    v = int(s)
    if v > U64:
        return None
    return (-v) & U64 if neg else v


def fmt_id(sid: StreamID) -> bytes:
    return b"%d-%d" % sid


def parse_id(raw: bytes, missing_seq: int = 0, strict: bool = False) -> StreamID:
    """A stream id: `-`, `+` (not when strict), `ms` (seq `missing_seq`) or `ms-seq`."""
    if len(raw) > 127:
        raise CommandError(INVALID_ID)
    if not strict and len(raw) == 1:
        if raw == b"-":
            return ZERO_ID
        if raw == b"+":
            return MAX_ID
    ms_part, dash, seq_part = raw.partition(b"-")
    ms = string2ull(ms_part)
    if ms is None:
        raise CommandError(INVALID_ID)
    if not dash:
        return ms, missing_seq
    seq = string2ull(seq_part)
    if seq is None:
        raise CommandError(INVALID_ID)
    return ms, seq


def parse_xadd_id(raw: bytes) -> tuple[StreamID, bool]:
    """XADD's explicit id: (id, seq given); `ms-*` leaves the sequence to the stream."""
    if len(raw) <= 127 and raw.endswith(b"-*") and raw.count(b"-") >= 1:
        ms_part = raw[:-2]
        if b"-" not in ms_part:
            ms = string2ull(ms_part)
            if ms is None:
                raise CommandError(INVALID_ID)
            return (ms, 0), False
    return parse_id(raw, strict=True), True


def parse_interval(raw: bytes, missing_seq: int) -> tuple[StreamID, bool]:
    """An XRANGE bound: (id, exclusive)."""
    if len(raw) > 1 and raw[:1] == b"(":
        return parse_id(raw[1:], missing_seq, strict=True), True
    return parse_id(raw, missing_seq), False


def incr_id(sid: StreamID) -> StreamID | None:
    ms, seq = sid
    if seq == U64:
        return None if ms == U64 else (ms + 1, 0)
    return ms, seq + 1


def decr_id(sid: StreamID) -> StreamID | None:
    ms, seq = sid
    if seq == 0:
        return None if ms == 0 else (ms - 1, U64)
    return ms, seq - 1


# ------------------------------------------------------------------ listpack sizes

def _int_size(v: int) -> int:
    if 0 <= v <= 127:
        return 2
    if -4096 <= v <= 4095:
        return 3
    if -32768 <= v <= 32767:
        return 4
    if -8388608 <= v <= 8388607:
        return 5
    if -(1 << 31) <= v < 1 << 31:
        return 6
    return 10


def _backlen(n: int) -> int:
    if n <= 127:
        return 1
    if n < 16383:
        return 2
    if n < 2097151:
        return 3
    if n < 268435455:
        return 4
    return 5


def elem_size(b: bytes) -> int:
    """The bytes a listpack element holding `b` takes (an integer when canonical)."""
    if len(b) < 21:
        v = _string2ll(b)
        if v is not None:
            return _int_size(v)
    n = len(b)
    enc = 1 + n if n <= 63 else (2 + n if n <= 4095 else 5 + n)
    return enc + _backlen(enc)


def _s64(v: int) -> int:
    v &= U64
    return v - (1 << 64) if v >= 1 << 63 else v


@dataclass(slots=True)
class Node:
    """One radix-tree node of redis-server's stream: a listpack of entries."""

    master: StreamID
    fields: tuple[bytes, ...]
    live: int = 0
    deleted: int = 0
    body: int = 0  # bytes of the entries' elements
    last: StreamID = ZERO_ID  # the last entry's id, deleted or not

    def lp_bytes(self) -> int:
        head = _int_size(self.live) + _int_size(self.deleted) + _int_size(len(self.fields)) + 2
        return 7 + head + sum(elem_size(f) for f in self.fields) + self.body

    def entry_size(self, sid: StreamID, flat: list[bytes]) -> int:
        n = len(flat) // 2
        same = n == len(self.fields) and all(flat[2 * i] == f for i, f in enumerate(self.fields))
        size = 2 + _int_size(_s64(sid[0] - self.master[0])) + _int_size(_s64(sid[1] - self.master[1]))
        if same:
            size += sum(elem_size(flat[i]) for i in range(1, len(flat), 2)) + _int_size(3 + n)
        else:
            size += _int_size(n) + sum(elem_size(x) for x in flat) + _int_size(4 + 3 * n)
        return size


# ------------------------------------------------------------------ groups

@dataclass(slots=True)
class Nack:
    consumer: bytes
    delivery_time: int
    delivery_count: int


@dataclass(slots=True)
class Consumer:
    name: bytes
    seen_time: int
    pel: SortedDict = field(default_factory=SortedDict)  # id -> Nack (shared with the group's)


@dataclass(slots=True)
class Group:
    last_id: StreamID
    entries_read: int  # -1: unknown
    pel: SortedDict = field(default_factory=SortedDict)  # id -> Nack
    consumers: dict[bytes, Consumer] = field(default_factory=dict)


class Stream:
    """A stream: entries, its radix-tree nodes, the ids it keeps and its consumer groups.
    Always true: an empty stream is a key (Redis never drops one for being empty)."""

    __slots__ = ("entries", "nodes", "last_id", "max_deleted", "entries_added", "first_id", "groups")

    def __init__(self) -> None:
        self.entries: SortedDict = SortedDict()  # StreamID -> [field, value, ...]
        self.nodes: SortedDict = SortedDict()  # master id -> Node
        self.last_id: StreamID = ZERO_ID
        self.max_deleted: StreamID = ZERO_ID
        self.entries_added = 0
        self.first_id: StreamID = ZERO_ID
        self.groups: dict[bytes, Group] = {}

    def __bool__(self) -> bool:
        return True

    def __len__(self) -> int:
        return len(self.entries)

    # ------------------------------------------------------------ entries

    def append(self, sid: StreamID, flat: list[bytes]) -> None:
        """Add an entry whose id is above last_id, in the tail node or a new one."""
        tail: Node | None = self.nodes.peekitem(-1)[1] if self.nodes else None
        if tail is not None:
            total = sum(len(x) for x in flat)
            if tail.lp_bytes() + total >= NODE_MAX_BYTES or tail.live + tail.deleted >= NODE_MAX_ENTRIES:
                tail = None
        if tail is None:
            tail = Node(sid, tuple(flat[0::2]))
            self.nodes[sid] = tail
        tail.body += tail.entry_size(sid, flat)
        tail.live += 1
        tail.last = sid
        self.entries[sid] = flat
        if len(self.entries) == 1:
            self.first_id = sid
        self.last_id = sid
        self.entries_added += 1

    def node_of(self, sid: StreamID) -> Node:
        i = self.nodes.bisect_right(sid) - 1
        node: Node = self.nodes.peekitem(i)[1]
        return node

    def delete(self, sid: StreamID) -> bool:
        """XDEL of one id: marked deleted in its node, the node freed when left empty."""
        if sid not in self.entries:
            return False
        del self.entries[sid]
        node = self.node_of(sid)
        node.live -= 1
        node.deleted += 1
        if node.live == 0:
            del self.nodes[node.master]
        if sid > self.max_deleted:
            self.max_deleted = sid
        if sid == self.first_id:
            self.first_id = self.entries.peekitem(0)[0] if self.entries else ZERO_ID
        return True

    def trim(self, maxlen: int | None, minid: StreamID | None, approx: bool, limit: int) -> int:
        """redis-server's streamTrim: whole nodes first, then (exact only) entries of the
        first node left; `limit` 0 is no limit. The number of entries removed."""
        deleted = 0
        while self.nodes:
            if maxlen is not None and len(self.entries) <= maxlen:
                break
            master, node = self.nodes.peekitem(0)
            if limit and deleted + node.live > limit:
                break
            if maxlen is not None:
                whole = len(self.entries) - node.live >= maxlen
            else:
                assert minid is not None
                whole = node.last < minid
            if whole:
                for sid in list(self.entries.irange(master, node.last)):
                    del self.entries[sid]
                deleted += node.live
                del self.nodes[master]
                continue
            if approx:
                break
            for sid in list(self.entries.irange(master, node.last)):
                if (len(self.entries) <= maxlen) if maxlen is not None else sid >= minid:
                    break
                del self.entries[sid]
                node.live -= 1
                node.deleted += 1
                deleted += 1
            break
        self.first_id = self.entries.peekitem(0)[0] if self.entries else ZERO_ID
        return deleted

    def last_valid(self) -> StreamID:
        return self.entries.peekitem(-1)[0] if self.entries else ZERO_ID

    def range(self, start: StreamID, end: StreamID, count: int = 0, rev: bool = False) -> list[Any]:
        """[[id, [field, value, ...]], ...] between start and end inclusive."""
        out: list[Any] = []
        if start > end:
            return out
        for sid in self.entries.irange(start, end, reverse=rev):
            out.append([fmt_id(sid), list(self.entries[sid])])
            if count and len(out) >= count:
                break
        return out

    # ------------------------------------------------------------ groups

    def has_tombstones(self, start: StreamID) -> bool:
        """Whether entries deleted from the middle may lie from `start` on
        (streamRangeHasTombstones)."""
        if not self.entries or self.max_deleted == ZERO_ID or self.first_id > self.max_deleted:
            return False
        return start <= self.max_deleted

    def estimate_read(self, sid: StreamID) -> int | None:
        """The entries-read counter of a reader at `sid`, None when it cannot be known
        (streamEstimateDistanceFromFirstEverEntry)."""
        if not self.entries_added:
            return 0
        if not self.entries and sid <= self.last_id:
            return self.entries_added
        if sid == self.last_id:
            return self.entries_added
        if sid > self.last_id:
            return None
        if self.max_deleted == ZERO_ID or self.max_deleted < self.first_id:
            if sid < self.first_id:
                return self.entries_added - len(self.entries)
            if sid == self.first_id:
                return self.entries_added - len(self.entries) + 1
        return None

    def lag(self, g: Group) -> int | None:
        """The entries the group has yet to read, None when unknown (streamReplyWithCGLag)."""
        if not self.entries_added:
            return 0
        if g.entries_read != -1 and not self.has_tombstones(g.last_id):
            return self.entries_added - g.entries_read
        read = self.estimate_read(g.last_id)
        return None if read is None else self.entries_added - read

    def radix_nodes(self) -> int:
        """The node count of a compressed radix tree of the nodes' big-endian keys."""
        keys = [m.to_bytes(8, "big") + s.to_bytes(8, "big") for m, s in self.nodes]
        return _rax_count(keys, 0) if keys else 1


def _rax_count(keys: list[bytes], depth: int) -> int:
    """Nodes under a prefix shared by sorted `keys` at `depth` (all keys 16 bytes long)."""
    if len(keys) == 1:
        return 1 if depth == len(keys[0]) else 2
    first, last = keys[0], keys[-1]
    common = depth
    while first[common] == last[common]:
        common += 1
    if common > depth:  # a compressed node leading to the branching point
        return 1 + _rax_count(keys, common)
    n = 1
    start = 0
    for i in range(1, len(keys) + 1):
        if i == len(keys) or keys[i][depth] != keys[start][depth]:
            n += _rax_count(keys[start:i], depth + 1)
            start = i
    return n


def copy_stream(s: Stream) -> Stream:
    out = Stream()
    out.entries = SortedDict((k, list(v)) for k, v in s.entries.items())
    out.nodes = SortedDict((k, Node(n.master, n.fields, n.live, n.deleted, n.body, n.last))
                           for k, n in s.nodes.items())
    out.last_id, out.max_deleted, out.entries_added, out.first_id = (
        s.last_id, s.max_deleted, s.entries_added, s.first_id)
    for name, g in s.groups.items():
        ng = Group(g.last_id, g.entries_read)
        for cname, cons in g.consumers.items():
            ng.consumers[cname] = Consumer(cname, cons.seen_time)
        for sid, nack in g.pel.items():
            nn = Nack(nack.consumer, nack.delivery_time, nack.delivery_count)
            ng.pel[sid] = nn
            ng.consumers[nack.consumer].pel[sid] = nn
        out.groups[name] = ng
    return out
