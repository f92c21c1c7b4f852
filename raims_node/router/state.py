"""What the node's parts share: identity, peers, connections, the link-state database,
the outbox of actions, the sync bookkeeping, and the primitives that put frames out.

The router core is split by concern (links, flood, interest, rpc, mesh, forward,
remote; `node.py` is the facade). Each part holds a `NodeState` and calls the others
only through the few methods the facade wires; none reads another's private fields.
The outgoing primitives live here because every part sends: `emit` (one frame on one
connection), `bcast` (a `_Z/_S/_P` flood from us), `send_inbox` (a point-to-point
message routed to a peer) and `request` (a sync or adjacency RPC with its retry record).
"""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass, field

from raims_node.bloom import BloomFilter
from raims_node.crypto.credentials import Credentials
from raims_node.crypto.handshake import Handshake
from raims_node.crypto.mac import MacKey
from raims_node.linkstate.db import LinkStateDB
from raims_node.linkstate.records import Cost, LinkRecord, PeerRecord
from raims_node.linkstate.routes import RouteTable
from raims_node.router.actions import Action, Close, Log, Send
from raims_node.router.batch import Z_BAT, FloodBatcher, flood_key, split_batches
from raims_node.router.events import Ev, EventRecorder
from raims_node.router.localsubs import LocalSubs
from raims_node.router.messages import PeerSummary, summary_fields
from raims_node.router.peer import Peer
from raims_node.router.seqwin import PubWindow, SubWindow
from raims_node.router.uids import UidTable
from raims_node.wire import (
    DIGEST_LEN,
    DIGEST_OFFSET,
    Fid,
    Fields,
    MsgType,
    encode_fields,
    encode_frame,
    frame_with_body,
)
from raims_node.wire import subjects as S

NS = 1_000_000_000
BCAST_SEEN_LIMIT = 16384
PARK_LIMIT = 64  # frames kept per unknown source until its sync reply arrives
PARK_SOURCES = 256
PARK_BYTES = 16 << 20  # and at most this many bytes of them in all
VERSION = "raims-0.1.0"
OPT_ACK = 1  # frame header options (wire/frame.py Opt): receivers acknowledge
OPT_TRACE = 2  # every router on the way answers
OPT_ANY = 4  # point to point to one subscriber


@dataclass
class NodeParams:
    heartbeat_ns: int = 10 * NS
    pub_window_size: int = 4 * 1024 * 1024
    sub_window_size: int = 8 * 1024 * 1024
    pub_window_time_ns: int = 10 * NS
    sub_window_time_ns: int = 10 * NS

    @property
    def rpc_timeout_ns(self) -> int:
        return max(self.heartbeat_ns // 2, NS // 4)


@dataclass
class Tport:
    name: str
    tport_id: int
    type: str
    cost: Cost


@dataclass
class Conn:
    conn_id: int
    tport: Tport
    opened_ns: int
    peer: bytes | None = None  # neighbour bridge once authenticated
    last_recv_ns: int = 0
    active: bool = False
    hb_disagree: int = 0
    peer_hb_ns: int = 0  # the heartbeat interval the peer announces (0: not yet known)
    held: bool = False  # its reading is paused by the daemon (backpressure): silence is not death


@dataclass
class Counters:
    frames_in: int = 0
    frames_out: int = 0
    bad_frames: int = 0
    bad_mac: int = 0
    unknown_source: int = 0
    unauthenticated: int = 0
    auth_rejected: int = 0
    rejects: dict[str, int] = field(default_factory=dict)  # by cause: handshake.REJECT_KINDS, ...
    dup_bcast: int = 0
    no_route: int = 0
    forwarded: int = 0
    mcast_recv: int = 0
    anycast: int = 0
    inbox_false: int = 0  # `_INBOX.` frames sent here that no subscription took (router/point.py)
    ibx_repeat: int = 0
    internal_errors: int = 0
    delivered: int = 0
    published: int = 0
    no_responders: int = 0  # requests answered 503 here: no subscriber took them (no_responders.py)
    pub_recv: dict[str, int] = field(default_factory=dict)
    pub_send: dict[str, int] = field(default_factory=dict)


@dataclass
class Pending:
    """An outstanding sync or adjacency request, retried until answered."""

    kind: str  # "sync" | "adj"
    about: bytes
    via: bytes
    deadline_ns: int
    tries: int = 1
    fails: int = 0  # failed replies in a row (sync: rpc.py's SYNC_FAIL_LIMIT)


@dataclass
class SyncBook:
    """What the node waits for about other peers: outstanding requests, frames parked
    until a source's key is known, link updates held until the gap before them fills."""

    pending: dict[tuple[str, bytes], Pending] = field(default_factory=dict)
    parked: dict[bytes, list[tuple[int, bytes]]] = field(default_factory=dict)
    early: dict[bytes, dict[int, tuple[bool, LinkRecord]]] = field(default_factory=dict)
    link_wanted: dict[bytes, int] = field(default_factory=dict)  # peer -> newest link seqno seen
    waiting: dict[bytes, list[bytes]] = field(default_factory=dict)  # peer -> who asked us for it
    # peer -> (subscription seqno a summary or ping claimed, when to check, via): see sub_claim
    sub_claims: dict[bytes, tuple[int, int, bytes]] = field(default_factory=dict)

    parked_bytes: int = 0

    def park(self, source: bytes, conn_id: int, data: bytes) -> None:
        """Keep a frame of a source whose key is not known yet, within PARK_LIMIT frames
        per source, PARK_SOURCES sources and PARK_BYTES in all; what is over is dropped
        (its source's stream counts the loss). Before (2026-11-27), a member sending 1 MiB
        frames from made-up sources left 256 MiB parked for good and an empty entry for
        every source past the cap (20,000 sources, 20,000 entries)."""
        parked = self.parked.get(source)
        if parked is None:
            if len(self.parked) >= PARK_SOURCES:
                return
            parked = self.parked[source] = []
        if len(parked) < PARK_LIMIT and self.parked_bytes + len(data) <= PARK_BYTES:
            parked.append((conn_id, data))
            self.parked_bytes += len(data)

    def unpark(self, source: bytes) -> list[tuple[int, bytes]]:
        """The frames parked for `source`, no longer held."""
        frames = self.parked.pop(source, [])
        self.parked_bytes -= sum(len(d) for _, d in frames)
        return frames

    def drop_unasked(self) -> None:
        """Forget the frames of sources no sync request is out for (given up, or never
        made): their key is not coming."""
        for source in [b for b in self.parked if ("sync", b) not in self.pending]:
            self.unpark(source)

    def forget(self, b: bytes) -> None:
        for key in [k for k in self.pending if k[1] == b]:
            del self.pending[key]
        self.unpark(b)
        self.link_wanted.pop(b, None)
        self.early.pop(b, None)
        self.waiting.pop(b, None)
        self.sub_claims.pop(b, None)


class NodeState:
    """Identity, tables and outbox of one node, shared by its parts."""

    def __init__(self, creds: Credentials, now_ns: int, rng: random.Random, params: NodeParams,
                 bridge: bytes | None) -> None:
        self.creds = creds
        self.user = creds.user
        self.service = creds.svc
        self.rng = rng
        self.params = params
        self.bridge = bridge or rng.randbytes(16)
        self.start_ns = now_ns
        self.session_key = rng.randbytes(32)
        self.mac = MacKey(self.session_key)
        self.db = LinkStateDB()
        self.routes = RouteTable(self.db, self.bridge)
        self.peers: dict[bytes, Peer] = {}
        self.zombies: dict[bytes, Peer] = {}  # dead peers, oldest first (router/uids.py)
        self.uids = UidTable()
        self.tports: list[Tport] = []
        self.conns: dict[int, Conn] = {}
        self.subs = LocalSubs()
        self.bloom = BloomFilter()
        self.sub_seqno = 0
        self.link_seqno = 0
        self.bcast_seqno = 0
        self.pub_window = PubWindow(params.pub_window_size, params.pub_window_time_ns, now_ns)
        self.sub_window = SubWindow(params.sub_window_size, params.sub_window_time_ns, now_ns)
        self.events = EventRecorder()
        self.counters = Counters()
        self.sync = SyncBook()
        self.filters_version = 0  # bumped whenever a peer's filter changes
        self.out: list[Action] = []
        self.converged = True
        self.said_bye = False  # shutdown sent _X.BYE: peers drop our queue members (router/queue_choice.py)
        self.converge_ns = now_ns
        self.unconverged_since_ns = now_ns
        self.change_reason = "startup"
        self.hs = Handshake(creds, self.bridge, now_ns, interval_s=max(1, params.heartbeat_ns // NS),
                            session_key=self.session_key)
        self._bcast_seen: OrderedDict[tuple[bytes, int], None] = OrderedDict()
        self.batch = FloodBatcher()
        self.bloom_due_ns: int | None = None  # our filter is flooded then (Interest.bcast_bloom_soon)
        self._macs: dict[bytes, MacKey] = {}

    # ------------------------------------------------------------------ sending

    def emit(self, conn_id: int, data: bytes) -> None:
        self.counters.frames_out += 1
        self.out.append(Send(conn_id, data))

    def emit_close(self, conn: Conn, reason: str) -> None:
        self.out.append(Close(conn.conn_id, reason))

    def log(self, text: str, key: str | None = None) -> None:
        """A log line; lines with a `key` may flood and are rate-limited by the driver."""
        self.out.append(Log(text, key))

    def count_reject(self, kind: str) -> None:
        """One refused frame or connection, by cause (show counters reject, /metrics)."""
        rejects = self.counters.rejects
        rejects[kind] = rejects.get(kind, 0) + 1

    def send_signed(self, conn: Conn, subject: str, fields: Fields, mtype: MsgType) -> None:
        frame = encode_frame(mtype, subject, self.bridge, fields)
        self.mac.sign(frame)
        count(self.counters.pub_send, S.publish_type_name(subject))
        self.emit(conn.conn_id, bytes(frame))

    def bcast(self, subject: str, fields: Fields, now_ns: int) -> None:
        """Flood a `_Z/_S/_P` update of ours to every authenticated neighbour."""
        self.bcast_seqno += 1
        frame = encode_frame(MsgType.RTR_ALERT, subject, self.bridge,
                             [(Fid.SEQNO, self.bcast_seqno), (Fid.TIME, now_ns), *fields])
        self.mac.sign(frame)
        count(self.counters.pub_send, S.publish_type_name(subject))
        self.seen((self.bridge, self.bcast_seqno))
        data = bytes(frame)
        self.batch.remember(flood_key(self.bridge, data[DIGEST_OFFSET:DIGEST_OFFSET + DIGEST_LEN]))
        self.batch.hold_own(data, now_ns)

    def _flood_own(self, data: bytes, now_ns: int) -> None:
        key = flood_key(self.bridge, data[DIGEST_OFFSET:DIGEST_OFFSET + DIGEST_LEN])
        self.batch.remember(key)
        self.log_flood(key, data, now_ns)
        for conn in self.conns.values():
            if conn.active:
                self.batch.hold(conn.conn_id, key, data, now_ns)

    def log_flood(self, key: bytes, data: bytes, now_ns: int) -> None:
        """Keep a flood for the links still shaking hands (batch.py); none: keep nothing."""
        for c in self.conns.values():  # a loop, not any(): this runs for every flood
            if not c.active:
                self.batch.log(key, data, now_ns)
                return
        self.batch.clear_log()

    @property
    def floods_held(self) -> bool:
        """Whether a flood waits: in the batcher, or a bloom update due (batch.py)."""
        return self.batch.holding or self.bloom_due_ns is not None

    def floods_first(self, now_ns: int) -> None:
        """Before a data frame goes out: every flood held goes first."""
        if self.floods_held:
            self.flush_floods(now_ns, force=True)

    def flush_floods(self, now_ns: int, force: bool = False) -> None:
        """Send the floods whose hold ended (all when `force`, batch.py): alone, or
        together in `_Z.BAT`."""
        if self.bloom_due_ns is not None and (self.bloom_due_ns <= now_ns or force):
            self.bloom_due_ns = None
            self.bcast(S.Z_BLM, [(Fid.SUB_SEQNO, self.sub_seqno), (Fid.BLOOM, self.bloom.to_bytes())], now_ns)
        own = self.batch.own_due(now_ns, force)
        if len(own) == 1:
            self._flood_own(own[0], now_ns)
        elif own:
            for group in split_batches(own):  # an origin batch: one update of ours
                self.bcast_seqno += 1
                self.seen((self.bridge, self.bcast_seqno))
                frame = encode_frame(MsgType.RTR_ALERT, Z_BAT, self.bridge, [
                    (Fid.SEQNO, self.bcast_seqno), (Fid.TIME, now_ns), *((Fid.DATA, f) for f in group)])
                self.mac.sign(frame)
                self._flood_own(bytes(frame), now_ns)
        for conn_id, frames in self.batch.due(now_ns, force):
            conn = self.conns.get(conn_id)
            if conn is None or not conn.active:
                self.batch.drop_conn(conn_id)
                continue
            if len(frames) == 1:
                self.emit(conn_id, frames[0])
                continue
            for group in split_batches(frames):
                frame = encode_frame(MsgType.RTR_ALERT, Z_BAT, self.bridge, [(Fid.DATA, f) for f in group])
                self.mac.sign(frame)
                self.batch.batches += 1
                self.emit(conn_id, bytes(frame))

    def seen(self, key: tuple[bytes, int]) -> bool:
        """Whether a flood (origin, seqno) was seen before; remembers it."""
        if key in self._bcast_seen:
            return True
        self._bcast_seen[key] = None
        if len(self._bcast_seen) > BCAST_SEEN_LIMIT:
            self._bcast_seen.popitem(last=False)
        return False

    def send_inbox(self, dest: bytes, suffix: str, fields: Fields, now_ns: int, opt: int = 0,
                   tail: bytes = b"") -> None:
        """An inbox message to `dest`: seqno, time, `fields`, then `tail` (fields encoded
        already, e.g. a sync reply's cached peer state)."""
        peer = self.peers.get(dest)
        if peer is None:
            return
        peer.inbox_sent = self.hs.next_inbox_seqno(dest)
        subject = S.inbox_subject(dest, suffix)
        body = encode_fields([(Fid.SEQNO, peer.inbox_sent), (Fid.TIME, now_ns), *fields])
        body += tail
        frame = frame_with_body(MsgType.INBOX, subject.encode("utf-8", "surrogateescape"), self.bridge, body, opt)
        self.mac.sign(frame)
        kind = S.publish_type_name(subject)
        count(self.counters.pub_send, kind)
        peer.inbox_sent_types.append((peer.inbox_sent, kind))
        self.route_inbox(dest, bytes(frame))

    def route_inbox(self, dest: bytes, data: bytes) -> None:
        conn = self.neighbor_conn(dest)
        if conn is None:
            for link in self.routes.next_hops(dest, 0):
                conn = self.conn_for(link.tport_id, link.peer_bridge)
                if conn is not None:
                    break
        if conn is None:
            self.counters.no_route += 1
            return
        self.emit(conn.conn_id, data)

    def sub_claim(self, peer: Peer, seqno: int, via: bytes, now_ns: int) -> None:
        """A peer summary or ping says `peer` made subscription changes up to `seqno`,
        past those we applied, while its filter follows by deltas: the `_S` / `_P` floods
        may be on the way (an origin or hop batch holds them a few ms, a burst of 100,000
        queues them, inboxes overtake them). Asked at once, a burst drew an adjacency
        reply (the whole subject list) per heartbeat and ping; so `adj` is asked only if
        we are still short of the first such claim one rpc timeout later (rpc.tick)."""
        if peer.bloom is None or peer.bloom_stale:
            self.request("adj", peer.bridge, via, now_ns)
        elif peer.bridge not in self.sync.sub_claims:
            self.sync.sub_claims[peer.bridge] = (seqno, now_ns + self.params.rpc_timeout_ns, via)

    def request(self, kind: str, about: bytes, via: bytes | None, now_ns: int, retry: bool = False) -> None:
        """Ask `via` for the state of `about`: "sync" (key, links, filter) or "adj"."""
        if via is None or about == self.bridge:
            return
        key = (kind, about)
        pending = self.sync.pending
        if not retry:
            if key in pending:
                return
            pending[key] = Pending(kind, about, via, now_ns + self.params.rpc_timeout_ns)
        if kind == "sync":
            self.events.add(now_ns, Ev.SEND_SYNC_REQ, user=self.name(via), peer=self.name(about))
            self.send_inbox(via, "sync_req", [(Fid.SYNC_BRIDGE, about)], now_ns)
        else:
            rec = self.db.peer(about)
            peer = self.peers.get(about)
            self.events.add(now_ns, Ev.SEND_ADJ_REQ, user=self.name(via), peer=self.name(about))
            self.send_inbox(via, "adj_req", [
                (Fid.SYNC_BRIDGE, about), (Fid.LINK_STATE, rec.link_seqno if rec else 0),
                (Fid.SUB_SEQNO, peer.sub_seqno if peer else 0),
            ], now_ns)
        self.changed("sync_req")

    # ------------------------------------------------------------------ receiving

    def forget_mac(self, source: bytes) -> None:
        """A removed peer's cached key (each incarnation is a new bridge)."""
        self._macs.pop(source, None)

    def mac_key(self, source: bytes) -> MacKey | None:
        """The cached MAC key of a peer's session, None while its key is unknown."""
        peer = self.peers.get(source)
        if peer is None or peer.session_key is None:
            return None
        cached = self._macs.get(source)
        if cached is None or cached.key != peer.session_key:
            cached = self._macs[source] = MacKey(peer.session_key)
        return cached

    @staticmethod
    def inbox_accept(peer: Peer, seqno: int, now_ns: int, kind: str) -> bool:
        """Replay check of a peer's inbox stream with a window of INBOX_WINDOW seqnos
        (`Peer.inbox`, crypto/replay.SeqWindow): routes change while a network converges,
        so inbox messages may arrive out of order; a gap counts as loss until (unless)
        the late message arrives. `kind`, the message's publish type, is logged when
        accepted (show inbox)."""
        gap = peer.inbox.accept(seqno)
        if gap is None:
            return False
        peer.inbox_recv_types.append((seqno, kind))
        if gap > 0:
            peer.loss.ibx_loss += gap
            peer.loss.ibx_time = now_ns
        elif gap < 0:
            loss = peer.loss
            loss.ibx_loss = max(0, loss.ibx_loss - 1)
            if not loss.ibx_loss:  # every gap filled: no loss to date (show loss: no time without a count)
                loss.ibx_time = 0
        return True

    # ------------------------------------------------------------------ lookups

    def neighbor_conn(self, b: bytes) -> Conn | None:
        for c in self.conns.values():
            if c.active and c.peer == b:
                return c
        return None

    def next_neighbor(self, after: bytes) -> bytes | None:
        """The authenticated neighbour after `after` in bridge order (the first when
        `after` is none of them), so that repeated requests go round the neighbours."""
        around = sorted({c.peer for c in self.conns.values() if c.active and c.peer is not None})
        if not around:
            return None
        later = [b for b in around if b > after]
        return later[0] if later else around[0]

    def conn_for(self, tport_id: int, peer: bytes) -> Conn | None:
        for c in self.conns.values():
            if c.active and c.peer == peer and c.tport.tport_id == tport_id:
                return c
        return None

    def next_wake_ns(self) -> int | None:
        """When a held flood or our delayed filter flood is due."""
        due = self.batch.next_due_ns()
        if self.bloom_due_ns is not None and (due is None or self.bloom_due_ns < due):
            return self.bloom_due_ns
        return due

    def routable(self, b: bytes) -> bool:
        """Whether a request may go to `b` itself: a neighbour, or a peer whose link set
        we hold and which lists a link to a peer we hold. A hint for where to ask (the
        routes are not recomputed for it while the database changes at every update; an
        unroutable request is retried round the neighbours)."""
        if self.neighbor_conn(b) is not None:
            return True
        db = self.db
        return db.is_synced(b) and any(db.is_synced(x.peer_bridge) for x in db.links(b))

    def name(self, b: bytes | None) -> str:
        if b is None:
            return ""
        if b == self.bridge:
            return self.user
        p = self.peers.get(b) or self.zombies.get(b)
        return p.user if p else S.bridge_b64(b)[:8]

    def summary(self, b: bytes) -> PeerSummary:
        if b == self.bridge:
            return PeerSummary(b, self.user, self.start_ns, self.link_seqno, self.sub_seqno)
        peer = self.peers[b]
        rec = self.db.peer(b)
        return PeerSummary(b, peer.user, peer.start_ns, rec.link_seqno if rec else 0, peer.sub_seqno)

    def summaries(self) -> list[PeerSummary]:
        return [self.summary(self.bridge)] + [self.summary(b) for b in self.peers if self.peers[b].session_key]

    def peer_db_fields(self, exclude: bytes) -> Fields:
        return [(Fid.PEER_DB, [(Fid.PEER_DB, summary_fields(s)) for s in self.summaries() if s.bridge != exclude])]

    def uid_csum(self) -> bytes:
        acc = int.from_bytes(self.bridge)
        for b in self.peers:
            acc ^= int.from_bytes(b)
        return acc.to_bytes(16)

    def put_sub_seqno(self, peer: Peer) -> None:
        rec = self.db.peer(peer.bridge)
        if rec is not None and rec.sub_seqno != peer.sub_seqno:
            self.db.put_peer(PeerRecord(peer.bridge, peer.user, peer.start_ns, peer.sub_seqno))

    def changed(self, reason: str) -> None:
        """The network's state changed: not converged until checked again."""
        if self.converged:
            self.unconverged_since_ns = -1
        self.converged = False
        self.change_reason = reason


def count(table: dict[str, int], key: str) -> None:
    table[key] = table.get(key, 0) + 1
