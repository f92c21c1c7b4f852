"""The Rai MS node, sans-IO: frames, connection events and a clock in; actions out.

Implements the manual's "Link State", "Internal Protocol", "System Subjects",
"Heartbeat Subjects", "Subscription Subjects", "Inbox Subjects", "Example Message
Flow" and "Message Loss" (seed 000). The driver (the daemon's transports, or the
simulator) owns sockets and time; it calls

    node.add_transport(name, type, cost) -> tport_id
    node.on_connect(conn_id, tport_id, now_ns)      -> actions   (a link came up)
    node.on_frame(conn_id, frame_bytes, now_ns)     -> actions   (one whole frame)
    node.on_disconnect(conn_id, now_ns)             -> actions
    node.tick(now_ns)                               -> actions   (timers; call often)
    node.subscribe / psubscribe / unsubscribe / publish         -> actions
    node.shutdown(now_ns)                           -> actions   (_X.BYE on every link)

and carries out the returned `Send`, `Deliver`, `Close` and `Log` actions in order.

Decisions where the manual is vague (see also messages.py):
- `_Z.*` broadcasts and `_S.*` / `_P.*` subscription updates are flooded to every
  authenticated neighbour except the one they came from, and suppressed as duplicates
  by (origin, seqno).
- Missed updates are repaired with `adj_req` to the neighbour that forwarded the
  update (it has the state, having just applied it); unknown peers with `sync_req`
  to that neighbour, whose `sync_rpy` carries the session key, links and bloom.
- Heartbeats carry `uid_cnt` / `uid_csum` (count and XOR of the bridges known) and the
  link and subscription seqno sums; a neighbour that disagrees for two heartbeats in a
  row gets our peer summary (`add_rte`), from which it requests what it lacks.
- A peer that no path reaches any more (after a link went away) is dropped.
- `_Z.ADD` is broadcast when a peer is added by authentication, not when it is learned
  from a `sync_rpy`: the links in that reply already lead every node to the peers behind
  it, and re-announcing every learned peer costs O(peers^2) floods in a large join.
- The network is converged when every stored peer's link set is held, every link is
  listed by both of its ends, and no sync request is outstanding.
"""

from __future__ import annotations

import logging
import random
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import mmh3

from raims_node import RaimsError
from raims_node.bloom import BloomError, BloomFilter, Shard, SubjectHashes
from raims_node.crypto import mac
from raims_node.crypto.credentials import Credentials
from raims_node.crypto.handshake import Authenticated, Confirmed, Handshake, Rejected
from raims_node.crypto.handshake import Send as HsSend
from raims_node.crypto.mac import MacKey
from raims_node.linkstate.db import LinkStateDB, NeedsSync
from raims_node.linkstate.records import Cost, LinkRecord, PeerRecord
from raims_node.linkstate.routes import RouteTable, path_for_hash
from raims_node.router.actions import Action, Close, Connect, Deliver, Log, Send
from raims_node.router.events import Ev, EventRecorder
from raims_node.router.localsubs import Change, LocalSub, LocalSubs
from raims_node.router.messages import (
    FMT_SYNTAX,
    SYNTAX_FMT,
    MalformedMessage,
    PeerSummary,
    get_bytes,
    get_int,
    get_str,
    link_fields,
    links_value,
    parse_link,
    parse_links,
    parse_sub_list,
    parse_summary,
    sub_list_value,
    summary_fields,
    unwrap_session_key,
    wrap_session_key,
)
from raims_node.router.peer import Peer
from raims_node.router.seqwin import PubWindow, SubWindow, Verdict
from raims_node.subject import SubjectError, compile_pattern
from raims_node.wire import (
    Fid,
    Fields,
    Frame,
    Header,
    Message,
    MsgType,
    decode_frame,
    encode_frame,
    encode_message_fields,
    frame_with_body,
    message_of,
    path_opt,
    peek,
    peeked_message,
)
from raims_node.wire import subjects as S

log = logging.getLogger("raims.router")

NS = 1_000_000_000
HB_TIMEOUT_FACTOR = 1.5
HB_DIFF_LIMIT = 2  # heartbeats in disagreement before we resend our peer summary
BCAST_SEEN_LIMIT = 16384
RPC_RETRIES = 3
PARK_LIMIT = 64  # frames kept per unknown source until its sync reply arrives
PARK_SOURCES = 256
FORWARD_CACHE_LIMIT = 65536
PUBLISH_CACHE_LIMIT = 65536  # subjects whose bytes, hashes and path are kept for publishing
INBOX_WINDOW = 64
ACK_HISTORY = 1024
ANYCAST_HOPS = 4  # nodes an anycast frame may try before it is dropped
OPT_ACK = 1
OPT_TRACE = 2
OPT_ANY = 4
EARLY_LIMIT = 64  # link updates held per peer while waiting for the ones before them
INBOX_MASK = (1 << INBOX_WINDOW) - 1
VERSION = "raims-0.1.0"


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
    dup_bcast: int = 0
    no_route: int = 0
    forwarded: int = 0
    mcast_recv: int = 0
    anycast: int = 0
    ibx_repeat: int = 0
    internal_errors: int = 0
    delivered: int = 0
    published: int = 0
    pub_recv: dict[str, int] = field(default_factory=dict)
    pub_send: dict[str, int] = field(default_factory=dict)


@dataclass
class _Pending:
    kind: str  # "sync" | "adj"
    about: bytes
    via: bytes
    deadline_ns: int
    tries: int = 1


class Node:
    def __init__(
        self,
        creds: Credentials,
        *,
        now_ns: int,
        rng: random.Random | None = None,
        params: NodeParams | None = None,
        bridge: bytes | None = None,
    ) -> None:
        self.creds = creds
        self.user = creds.user
        self.service = creds.svc
        self.rng = rng or random.Random()
        self.params = params or NodeParams()
        self.bridge = bridge or self.rng.randbytes(16)
        self.start_ns = now_ns
        self.session_key = self.rng.randbytes(32)
        self._mac = MacKey(self.session_key)
        self.db = LinkStateDB()
        self.routes = RouteTable(self.db, self.bridge)
        self.peers: dict[bytes, Peer] = {}
        self.zombies: dict[bytes, Peer] = {}
        self.tports: list[Tport] = []
        self.conns: dict[int, Conn] = {}
        self.subs = LocalSubs()
        self.bloom = BloomFilter()
        self.sub_seqno = 0
        self.link_seqno = 0
        self.bcast_seqno = 0
        self.pub_window = PubWindow(self.params.pub_window_size, self.params.pub_window_time_ns, now_ns)
        self.sub_window = SubWindow(self.params.sub_window_size, self.params.sub_window_time_ns, now_ns)
        self.events = EventRecorder()
        self.counters = Counters()
        self._bcast_seen: OrderedDict[tuple[bytes, int], None] = OrderedDict()
        self._pending: dict[tuple[str, bytes], _Pending] = {}
        self._parked: dict[bytes, list[tuple[int, bytes]]] = {}
        self._mesh_urls: dict[int, str] = {}  # tport_id -> our listener's url
        self._member_urls: dict[tuple[int, bytes], str] = {}  # (tport_id, peer) -> its url
        self._mesh_dialed: set[tuple[int, bytes]] = set()
        self._queue_turn: dict[str, int] = {}
        self._macs: dict[bytes, MacKey] = {}
        self.acks: deque[tuple[str, str, str, int, str, int]] = deque(maxlen=ACK_HISTORY)  # (kind, user, ...)
        self._rem_token = 0
        self._rem_waiters: dict[int, object] = {}
        self._link_wanted: dict[bytes, int] = {}  # peer -> newest link seqno seen in a delta
        self._early: dict[bytes, dict[int, tuple[bool, LinkRecord]]] = {}  # held link updates
        self._fwd_cache: dict[tuple[bytes, int, bytes], tuple[int, ...]] = {}
        self._published: dict[str, tuple[bytes, SubjectHashes, int, int]] = {}
        self._fwd_version: tuple[int, int, int] = (-1, -1, -1)
        self._filters_version = 0  # bumped whenever a peer's filter changes
        self._consistency_version = -1
        self._consistency_ok = False
        self._out: list[Action] = []
        self.converged = True
        self.converge_ns = now_ns
        self._unconverged_since_ns = now_ns
        self._change_reason = "startup"
        self.rem_handler: Callable[[str], str] | None = None
        self.hs = Handshake(creds, self.bridge, now_ns, interval_s=max(1, self.params.heartbeat_ns // NS),
                            session_key=self.session_key)
        self._hello: bytes | None = None
        self._next_hb_ns = now_ns
        self._next_ping_ns = now_ns + self.params.heartbeat_ns * 3 // 2
        self.db.put_peer(PeerRecord(self.bridge, self.user, now_ns))
        self.db.apply_full(self.bridge, 0, ())
        self.events.add(now_ns, Ev.STARTUP, user=self.user)

    # ------------------------------------------------------------------ driver API

    def add_transport(self, name: str, type_: str, cost: Cost) -> int:
        t = Tport(name, len(self.tports), type_, cost)
        self.tports.append(t)
        self._changed("add_tport")
        return t.tport_id

    def set_mesh_url(self, tport_id: int, url: str) -> None:
        """The address other members of mesh transport `tport_id` reach us at."""
        self._mesh_urls[tport_id] = url

    def on_connect(self, conn_id: int, tport_id: int, now_ns: int) -> list[Action]:
        tport = self.tports[tport_id]
        conn = Conn(conn_id, tport, now_ns, last_recv_ns=now_ns)
        self.conns[conn_id] = conn
        self.events.add(now_ns, Ev.ON_CONNECT, tport=tport.name, user=self.user)
        if self._hello is None:
            self._heartbeat(now_ns)
        else:
            self._emit(conn_id, self._hello)
        self.events.add(now_ns, Ev.SEND_HELLO, tport=tport.name, user=self.user)
        return self._flush(now_ns)

    def on_disconnect(self, conn_id: int, now_ns: int) -> list[Action]:
        conn = self.conns.pop(conn_id, None)
        if conn is not None:
            self.events.add(now_ns, Ev.ON_SHUTDOWN, tport=conn.tport.name, user=self._name(conn.peer))
            if conn.peer is not None and conn.active:
                self._link_down(conn, now_ns, "disconnect")
        return self._flush(now_ns)

    def hold_liveness(self, conn_id: int, held: bool, now_ns: int) -> None:
        """The daemon paused (`held`) or resumed reading connection `conn_id`: while its
        bytes wait unread it is not timed out, and it gets a full heartbeat timeout after."""
        conn = self.conns.get(conn_id)
        if conn is not None:
            conn.held = held
            conn.last_recv_ns = max(conn.last_recv_ns, now_ns)

    def on_frame(self, conn_id: int, data: bytes, now_ns: int) -> list[Action]:
        return self.on_frames(conn_id, [data], now_ns)

    def on_frames(self, conn_id: int, frames: list[bytes], now_ns: int) -> list[Action]:
        """The frames received together on one connection, in order."""
        conns = self.conns
        counters = self.counters
        fast = self._forward_fast
        for data in frames:
            conn = conns.get(conn_id)  # a frame may close it (BYE, a refused key)
            if conn is None:
                break
            counters.frames_in += 1
            try:
                head = peek(data)
                if not fast(conn, data, head, now_ns):
                    self._receive(conn, data, head, now_ns)
            except RaimsError as exc:  # malformed frame or field, impossible record
                counters.bad_frames += 1
                log.debug("bad frame from conn %d: %s", conn_id, exc)
            except Exception:  # a bug must cost this frame only, never the node
                counters.internal_errors += 1
                log.exception("error handling a frame from conn %d", conn_id)
        return self._flush(now_ns)

    def _forward_fast(self, conn: Conn, data: bytes, head: Header, now_ns: int) -> bool:
        """The router's hot path: a multicast frame from a known source. Header read
        without decoding, MAC checked with the cached key, the forwarding set looked up by
        (source, path, subject hash), and, when subscribed here, the fields decoded once
        for the local delivery. False: take the full path."""
        if head.msg_type != MsgType.MCAST or not conn.active or head.opt & (OPT_ACK | OPT_TRACE):
            return False
        source = head.bridge
        key = self._mac_key(source)
        if key is None or source == self.bridge:
            return False
        if not key.verify(data):
            self.counters.bad_mac += 1
            return True
        conn.last_recv_ns = now_ns  # any authenticated frame is a sign of life
        self.counters.mcast_recv += 1
        sent = 0
        for conn_id in self._forward_set(source, (head.opt >> 3) & 3, head.subject, head.subject_hash):
            if conn_id != conn.conn_id:
                sent += 1
                self._out.append(Send(conn_id, data))
        self.counters.frames_out += sent
        self.counters.forwarded += sent
        if self.subs:
            subject = head.subject.decode("utf-8", "surrogateescape")
            subs = self.subs.match(subject)
            if subs:
                self._deliver_message(source, subject, peeked_message(data, head), subs, now_ns, own=False)
                return True
        if not sent:
            peer = self.peers[source]
            peer.loss.not_sub += 1
            peer.loss.not_sub_time = now_ns
        return True

    def _mac_key(self, source: bytes) -> MacKey | None:
        peer = self.peers.get(source)
        if peer is None or peer.session_key is None:
            return None
        cached = self._macs.get(source)
        if cached is None or cached.key != peer.session_key:
            cached = self._macs[source] = MacKey(peer.session_key)
        return cached

    def tick(self, now_ns: int) -> list[Action]:
        hb = self.params.heartbeat_ns
        for conn in list(self.conns.values()):
            if conn.active and not conn.held and now_ns - conn.last_recv_ns > hb * HB_TIMEOUT_FACTOR:
                self.events.add(now_ns, Ev.HB_TIMEOUT, tport=conn.tport.name, user=self._name(conn.peer))
                self._link_down(conn, now_ns, "hb_timeout")
        if now_ns >= self._next_hb_ns:
            self._heartbeat(now_ns)
        if now_ns >= self._next_ping_ns:
            self._ping(now_ns)
        for key, p in list(self._pending.items()):
            if now_ns >= p.deadline_ns:
                if p.tries >= RPC_RETRIES or p.about not in self.peers and p.kind == "adj":
                    del self._pending[key]
                    self._changed("sync_timeout")
                    continue
                p.tries += 1
                p.deadline_ns = now_ns + self.params.rpc_timeout_ns
                # a retry asks the origin when a path to it is known, else the next
                # neighbour: the one asked may lag as far behind
                routable = p.kind == "adj" and self._routable(p.about)
                via = p.about if routable else self._next_neighbor(p.via)
                if via is not None:
                    p.via = via
                    self._request(p.kind, p.about, via, now_ns, retry=True)
        return self._flush(now_ns)

    def shutdown(self, now_ns: int) -> list[Action]:
        for conn in self.conns.values():
            if conn.active:
                self._send_signed(conn, S.X_BYE, [(Fid.TIME, now_ns)], now_ns, MsgType.HEARTBEAT)
        return self._flush(now_ns)

    # ------------------------------------------------------------------ local pub/sub

    def subscribe(self, owner: object, sid: str, subject: str, now_ns: int, queue: str | None = None) -> list[Action]:
        self._remove_local(owner, sid, now_ns)
        self._announce_change(self.subs.add(owner, sid, subject, None, queue), True, now_ns)
        return self._flush(now_ns)

    def psubscribe(
        self, owner: object, sid: str, pattern: str, syntax: str, now_ns: int, queue: str | None = None,
        shard: Shard | None = None,
    ) -> list[Action]:
        """A pattern subscription; with `shard` (k of n) a shardcast: only the subjects
        whose hash falls in shard k reach it, the other shards go to other nodes."""
        compile_pattern(pattern, syntax)  # type: ignore[arg-type]  # a bad pattern raises before any change
        self._remove_local(owner, sid, now_ns)
        self._announce_change(self.subs.add(owner, sid, pattern, syntax, queue, shard), True, now_ns)
        return self._flush(now_ns)

    def unsubscribe(self, owner: object, sid: str, now_ns: int) -> list[Action]:
        self._remove_local(owner, sid, now_ns)
        return self._flush(now_ns)

    def drop_owner(self, owner: object, now_ns: int) -> list[Action]:
        for change in self.subs.drop_owner(owner):
            self._announce_change(change, False, now_ns)
        return self._flush(now_ns)

    def _remove_local(self, owner: object, sid: str, now_ns: int) -> None:
        change = self.subs.remove(owner, sid)
        if change is not None:
            self._announce_change(change, False, now_ns)

    def _announce_change(self, change: Change, added: bool, now_ns: int) -> None:
        sub = change.sub
        resized = False
        if change.text_edge:
            if sub.syntax is None:
                resized |= self.bloom.add_subject(sub.text) if added else self.bloom.remove_subject(sub.text)
                self._announce_sub((S.S_JOIN if added else S.S_LEAV) + sub.text, now_ns)
            else:
                assert sub.pattern is not None
                resized |= (self.bloom.add_pattern(sub.pattern, sub.shard) if added
                            else self.bloom.remove_pattern(sub.pattern, sub.shard))
                shard: Fields = [] if sub.shard is None else [(Fid.SHARD_ID, sub.shard.index),
                                                              (Fid.SHARD_CNT, sub.shard.count)]
                self._announce_sub((S.P_PSUB if added else S.P_STOP) + sub.text, now_ns,
                                   [(Fid.FMT, SYNTAX_FMT[sub.syntax]), *shard])
        marker = sub.queue_marker
        if change.queue_edge and marker is not None:
            resized |= self.bloom.add_subject(marker) if added else self.bloom.remove_subject(marker)
            self._announce_sub((S.S_JOIN if added else S.S_LEAV) + marker, now_ns)
        if resized:
            self._send_bloom(now_ns)

    def publish(
        self, subject: str, payload: bytes, now_ns: int, reply: str | None = None, headers: bytes | None = None,
        no_echo: object | None = None, opt: int = 0,
    ) -> list[Action]:
        """Publish from a local client; `no_echo` names an owner that must not receive it.
        `opt` may ask for acks from the receivers (OPT_ACK) or from every router on the
        way (OPT_TRACE); the replies collect in `self.acks`. A reply subject of a NATS
        style request (`_INBOX.`, after an optional namespace) is sent anycast: point to
        point to one node whose filter matches, as the manual's `any` encapsulation."""
        seqno, start = self.pub_window.next_seqno(subject, now_ns)
        cached = self._published.get(subject)
        if cached is None:
            if len(self._published) >= PUBLISH_CACHE_LIMIT:
                self._published.clear()
            sub = subject.encode("utf-8", "surrogateescape")
            hashes = SubjectHashes(sub)
            anycast = is_inbox_reply(subject)
            path = path_for_hash(hashes.full)
            cached = self._published[subject] = (sub, hashes, path, path_opt(path) | (OPT_ANY if anycast else 0))
        sub, hashes, path, subject_opt = cached
        anycast = bool(subject_opt & OPT_ANY)
        body = encode_message_fields(seqno, now_ns if start else 0, reply, headers, payload)
        frame = frame_with_body(MsgType.MCAST, sub, self.bridge, body, subject_opt | opt, hashes.full)
        self._mac.sign(frame)
        self.counters.published += 1
        local = self.subs.match(subject) if self.subs else ()
        if local:
            self._deliver(self.bridge, subject, seqno, local, payload, reply, headers, 0, no_echo)
        if anycast:
            if not local:
                self._anycast(bytes(frame), hashes, set(), now_ns, hops=0)
        else:
            self._forward_mcast(bytes(frame), self.bridge, hashes, path, None)
        return self._flush(now_ns)

    def _anycast(self, inner: bytes, hashes: SubjectHashes, tried: set[bytes], now_ns: int, hops: int) -> bool:
        """Send a frame point to point to one node whose filter matches its subject (the
        manual's `_I.<bridge>.any`); False when no untried node matches."""
        nodes = sorted(b for b, p in self.peers.items()
                       if b not in tried and isinstance(p.bloom, BloomFilter) and p.bloom.might_match(hashes))
        if not nodes:
            self.counters.no_route += 1
            return False
        dest = nodes[hashes.full % len(nodes)]
        self.counters.anycast += 1
        self._send_inbox(dest, "any", [(Fid.DATA, inner), (Fid.REF_CNT, hops)], now_ns)
        return True

    def remote(self, dest: bytes, command: str, owner: object, now_ns: int) -> list[Action]:
        """Run a console command on another node (`rem`); its text comes back to `owner`
        as a Deliver whose sid is the request's token."""
        self._rem_token += 1
        self._rem_waiters[self._rem_token] = owner
        self._send_inbox(dest, "rem", [(Fid.TOKEN, self._rem_token), (Fid.DATA, command.encode())], now_ns)
        return self._flush(now_ns)

    def interest(self, subject: str) -> tuple[int, int]:
        """(local subscriptions, remote nodes) a message on `subject` would reach."""
        hashes = SubjectHashes(subject.encode("utf-8", "surrogateescape"))
        remote = sum(1 for p in self.peers.values()
                     if isinstance(p.bloom, BloomFilter) and p.bloom.might_match(hashes))
        return len(self.subs.match(subject)), remote

    # ------------------------------------------------------------------ receive

    def _receive(self, conn: Conn, data: bytes, head: Header, now_ns: int) -> None:
        conn.last_recv_ns = now_ns
        if head.msg_type == MsgType.HEARTBEAT:
            self._on_heartbeat(conn, data, now_ns)
            return
        if head.msg_type == MsgType.INBOX and head.subject.endswith(b".auth"):
            frame = decode_frame(data)
            self._handshake(conn, self.hs.receive(now_ns, data, frame), now_ns)
            peer = self.peers.get(frame.bridge)
            seqno = frame.get(Fid.SEQNO)
            if peer is not None and isinstance(seqno, int) and peer.session_key == self._hs_key(frame.bridge):
                self._inbox_accept(peer, seqno, now_ns)  # auth shares the inbox stream
            return
        if conn.peer is None or not conn.active:
            self.counters.unauthenticated += 1
            return
        source = head.bridge
        if source == self.bridge:
            return
        peer = self.peers.get(source)
        if peer is None or peer.session_key is None:
            # park it: the sync reply may predate this update, which must not be lost
            self.counters.unknown_source += 1
            parked = self._parked.setdefault(source, [])
            if len(parked) < PARK_LIMIT and len(self._parked) <= PARK_SOURCES:
                parked.append((conn.conn_id, data))
            self._request("sync", source, conn.peer, now_ns)
            return
        key = self._mac_key(source)
        if key is None or not key.verify(data):
            self.counters.bad_mac += 1
            return
        if head.msg_type == MsgType.MCAST:
            self.counters.mcast_recv += 1
        else:
            self._count(self.counters.pub_recv, S.publish_type(head.subject.decode(errors="replace")).name.lower())
        if head.msg_type == MsgType.MCAST:
            self._on_mcast(conn, data, head.subject, head.subject_hash, source, head.opt, now_ns)
        elif head.msg_type == MsgType.INBOX:
            self._on_inbox(conn, data, peer, now_ns)
        else:
            self._on_bcast(conn, data, peer, now_ns)

    def _on_heartbeat(self, conn: Conn, data: bytes, now_ns: int) -> None:
        frame = decode_frame(data)
        b = frame.bridge
        if frame.subject == S.X_BYE:
            peer = self.peers.get(b)
            if conn.active and conn.peer == b and peer is not None and peer.session_key is not None \
                    and mac.verify(data, peer.session_key):
                self.events.add(now_ns, Ev.RECV_BYE, tport=conn.tport.name, user=peer.user)
                self._link_down(conn, now_ns, "bye")
                self._remove_peer(b, now_ns, "bye")
            return
        self._handshake(conn, self.hs.receive(now_ns, data, frame), now_ns)
        state = self.hs.peer(b)
        if state is None or state.session_key is None or not mac.verify(data, state.session_key):
            return
        if not conn.active:
            # a link to a peer we already hold a session with (a second link, or a link
            # back after a heartbeat timeout or a partition): no new key exchange
            if not state.trusts_us or state.user is None:
                return
            self._authenticated(conn, b, state.user, state.start_ns, state.session_key, now_ns)
        if conn.peer == b:
            peer = self.peers.get(b)
            if peer is not None:
                self._on_hb_state(conn, peer, frame, now_ns)

    def _hs_key(self, b: bytes) -> bytes | None:
        state = self.hs.peer(b)
        return state.session_key if state is not None else None

    def _handshake(self, conn: Conn, events: Sequence[object], now_ns: int) -> None:
        for ev in events:  # replies first: the peer must see our auth before what follows it
            if isinstance(ev, HsSend):
                self._emit(conn.conn_id, ev.frame)
                self._count(self.counters.pub_send, "u_inbox_auth")
        for ev in events:
            if isinstance(ev, Rejected):
                self.counters.auth_rejected += 1
                self.events.add(now_ns, Ev.AUTH_REMOVE, tport=conn.tport.name, user=ev.user or "",
                                data=ev.reason)
                self._out.append(Log(f"remove auth {ev.user or '?'} {ev.reason}"))
            elif isinstance(ev, Authenticated):
                self.events.add(now_ns, Ev.RECV_CHALLENGE, tport=conn.tport.name, user=ev.user)
                self._authenticated(conn, ev.bridge, ev.user, ev.start_ns, ev.session_key, now_ns)
            elif isinstance(ev, Confirmed):
                self.events.add(now_ns, Ev.RECV_TRUST, tport=conn.tport.name, user=ev.user)

    def _authenticated(self, conn: Conn, b: bytes, user: str, start_ns: int, key: bytes, now_ns: int) -> None:
        if b == self.bridge:
            self._emit_close(conn, "connected to itself")
            return
        self.events.add(now_ns, Ev.AUTH_ADD, tport=conn.tport.name, user=user, data="handshake")
        old = self.peers.get(b)
        is_new = old is None or old.start_ns != start_ns
        if old is None or is_new:
            if old is not None:
                self._remove_peer(b, now_ns, "restarted")
            peer = Peer(b, user, start_ns)
            self.peers[b] = peer
            self.zombies.pop(b, None)
            self.db.put_peer(PeerRecord(b, user, start_ns))
        else:
            peer = old
        peer.session_key = key
        self._pending.pop(("sync", b), None)
        self._link_up(conn, peer, now_ns)
        if is_new:
            self._bcast(S.Z_ADD, [(Fid.PEER_DB, summary_fields(self._summary(b)))], now_ns)
            self.events.add(now_ns, Ev.SEND_ADD_ROUTE, tport=conn.tport.name, user=user)
            # our filter, flooded: nodes learning of us through this neighbour may get
            # its sync reply before it holds our filter
            self._bcast(S.Z_BLM, [(Fid.SUB_SEQNO, self.sub_seqno), (Fid.BLOOM, self.bloom.to_bytes())], now_ns)
        self._send_inbox(b, "add_rte", self._peer_db_fields(b), now_ns)
        self._request("adj", b, b, now_ns)
        self._changed("add_user")

    def _link_up(self, conn: Conn, peer: Peer, now_ns: int) -> None:
        conn.peer = peer.bridge
        conn.active = True
        conn.last_recv_ns = now_ns
        peer.neighbor = True
        self.events.add(now_ns, Ev.ADD_USER_ROUTE, tport=conn.tport.name, user=peer.user, data="neighbor")
        if self._conn_for(conn.tport.tport_id, peer.bridge) is conn:
            self._add_my_link(conn, now_ns)
        url = self._mesh_urls.get(conn.tport.tport_id)
        if conn.tport.type == "mesh" and url is not None:
            self._send_inbox(peer.bridge, "mesh_req", [(Fid.TPORT, conn.tport.name), (Fid.MESH_URL, url)], now_ns)

    def _peer_db_fields(self, exclude: bytes) -> Fields:
        return [(Fid.PEER_DB, [(Fid.PEER_DB, summary_fields(s)) for s in self._summaries() if s.bridge != exclude])]

    # ------------------------------------------------------------------ heartbeats

    def _heartbeat(self, now_ns: int) -> None:
        """One `_X.HB` per interval, the same frame on every link (an AUTH answers one of
        the last two), carrying the state a neighbour compares with its own."""
        self._next_hb_ns = now_ns + self.params.heartbeat_ns
        sums = self.db.seqno_sums()
        frame = bytes(self.hs.hello(now_ns, heartbeat=self._hello is not None, extra=[
            (Fid.SUB_SEQNO, self.sub_seqno), (Fid.LINK_STATE, self.link_seqno),
            (Fid.CONVERGE, self.converge_ns), (Fid.UID_CNT, len(self.peers)),
            (Fid.UID_CSUM, self._uid_csum()), (Fid.LINK_SUM, sums.link_sum), (Fid.SUB_SUM, sums.sub_sum),
        ]))
        self._hello = frame
        for conn in self.conns.values():
            self._emit(conn.conn_id, frame)

    def _on_hb_state(self, conn: Conn, peer: Peer, frame: Frame, now_ns: int) -> None:
        d = frame.as_dict()
        peer.hb_seqno = get_int(d, Fid.SEQNO)
        peer.hb_time_ns = now_ns
        peer.hb_link_sum = get_int(d, Fid.LINK_SUM)
        peer.hb_sub_sum = get_int(d, Fid.SUB_SUM)
        agree = get_int(d, Fid.UID_CNT) == len(self.peers) and d.get(Fid.UID_CSUM) == self._uid_csum()
        sums = self.db.seqno_sums()
        agree = agree and peer.hb_link_sum == sums.link_sum and peer.hb_sub_sum == sums.sub_sum
        if agree:
            conn.hb_disagree = 0
            return
        conn.hb_disagree += 1
        peer.hb_diff += 1
        if conn.hb_disagree >= HB_DIFF_LIMIT and not self._pending:
            conn.hb_disagree = 0
            self._send_inbox(peer.bridge, "add_rte", self._peer_db_fields(peer.bridge), now_ns)

    def _ping(self, now_ns: int) -> None:
        """A ping to one random peer every 1.5 heartbeats: latency, clock skew, and a
        check of its link and subscription seqnos against ours ("ping_adj")."""
        self._next_ping_ns = now_ns + self.params.heartbeat_ns * 3 // 2
        known = [b for b, p in self.peers.items() if p.session_key is not None]
        if not known:
            return
        b = known[self.rng.randrange(len(known))]
        peer = self.peers[b]
        peer.ping_sent += 1
        peer.ping_time_ns = now_ns
        self._send_inbox(b, "ping", [(Fid.STAMP, now_ns), (Fid.LINK_STATE, self.link_seqno),
                                     (Fid.SUB_SEQNO, self.sub_seqno)], now_ns)

    def _in_any(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        """An anycast frame for us: deliver it, or, on a false match, pass it to another
        matching node (at most ANYCAST_HOPS tries)."""
        inner = d.get(Fid.DATA)
        if not isinstance(inner, bytes):
            raise MalformedMessage("any without an encapsulated frame")
        head = peek(inner)
        key = self._mac_key(head.bridge) if head.bridge != self.bridge else self._mac
        if key is None or not key.verify(inner):
            self.counters.bad_mac += 1
            return
        subject = head.subject.decode("utf-8", "surrogateescape")
        if self._deliver_local(head.bridge, subject, inner, now_ns, own=False):
            return
        hops = get_int(d, Fid.REF_CNT) + 1
        if hops < ANYCAST_HOPS:
            self._anycast(inner, SubjectHashes(head.subject, head.subject_hash),
                          {self.bridge, head.bridge, peer.bridge}, now_ns, hops)

    def _in_ack(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int, kind: str = "ack") -> None:
        self.acks.append((kind, peer.user, get_str(d, Fid.SUBJECT), get_int(d, Fid.REF_SEQNO),
                          get_str(d, Fid.TPORT), now_ns))

    def _in_trace(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        self._in_ack(peer, d, via, now_ns, "trace")

    def _in_rem(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        """A console command from another node: run it (when a handler is set) and send
        its text back on the numeric inbox `_I.<source>.<token>`."""
        command = d.get(Fid.DATA)
        token = get_int(d, Fid.TOKEN)
        if not isinstance(command, bytes):
            raise MalformedMessage("rem without a command")
        text = (self.rem_handler(command.decode(errors="replace")) if self.rem_handler is not None
                else "remote commands are not enabled on this node")
        self._send_inbox(peer.bridge, str(token), [(Fid.DATA, text.encode())], now_ns)

    def _in_reply(self, peer: Peer, suffix: str, d: dict[int, object], now_ns: int) -> None:
        owner = self._rem_waiters.pop(int(suffix), None)
        data = d.get(Fid.DATA)
        if owner is not None and isinstance(data, bytes):
            self._out.append(Deliver(owner, suffix, f"rem.{peer.user}", None, data, peer.bridge))

    def _in_ping(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        peer.ping_recv += 1
        self._send_inbox(peer.bridge, "pong", [(Fid.STAMP, get_int(d, Fid.STAMP)), (Fid.TIME, now_ns)], now_ns)
        rec = self.db.peer(peer.bridge)
        if rec is not None and (get_int(d, Fid.LINK_STATE) > rec.link_seqno
                                or get_int(d, Fid.SUB_SEQNO) > peer.sub_seqno):
            peer.ping_adj += 1
            self._request("adj", peer.bridge, peer.bridge, now_ns)

    def _in_pong(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        sent = get_int(d, Fid.STAMP)
        if sent <= 0 or sent > now_ns:
            return
        peer.pong_recv += 1
        lat = now_ns - sent
        peer.latency_ns = lat
        peer.lat_max_ns = max(peer.lat_max_ns, lat)
        peer.lat_sum_ns += lat
        # their clock at the midpoint of the round trip, against ours
        peer.pong_skew_ns = get_int(d, Fid.TIME) - (sent + lat // 2)

    def _uid_csum(self) -> bytes:
        acc = int.from_bytes(self.bridge)
        for b in self.peers:
            acc ^= int.from_bytes(b)
        return acc.to_bytes(16)

    # ------------------------------------------------------------------ links

    def _add_my_link(self, conn: Conn, now_ns: int) -> None:
        assert conn.peer is not None
        link = LinkRecord(self.bridge, conn.tport.name, conn.tport.tport_id, conn.peer, conn.tport.cost, conn.tport.type)
        self.link_seqno += 1
        self.db.apply_delta(self.bridge, self.link_seqno, True, link)
        self.events.add(now_ns, Ev.SEND_ADJ_CHANGE, tport=conn.tport.name, peer=self._name(conn.peer), data="add")
        self._bcast(S.Z_ADJ, [(Fid.LINK_STATE, self.link_seqno), (Fid.LINK_ADD, True),
                              (Fid.ADJACENCY, link_fields(link))], now_ns)

    def _link_down(self, conn: Conn, now_ns: int, reason: str) -> None:
        conn.active = False
        b = conn.peer
        if b is None:
            return
        conn.peer = None
        self._mesh_dialed.discard((conn.tport.tport_id, b))
        link = next((x for x in self.db.links(self.bridge)
                     if x.tport_id == conn.tport.tport_id and x.peer_bridge == b), None)
        if link is not None and not any(c.active and c.peer == b and c.tport.tport_id == conn.tport.tport_id
                                        for c in self.conns.values()):
            self.link_seqno += 1
            self.db.apply_delta(self.bridge, self.link_seqno, False, link)
            self.events.add(now_ns, Ev.SEND_ADJ_CHANGE, tport=conn.tport.name, peer=self._name(b), data="remove")
            self._bcast(S.Z_ADJ, [(Fid.LINK_STATE, self.link_seqno), (Fid.LINK_ADD, False),
                                  (Fid.ADJACENCY, link_fields(link))], now_ns)
        peer = self.peers.get(b)
        if peer is not None and not any(c.active and c.peer == b for c in self.conns.values()):
            peer.neighbor = False
            self.actions_log(f"remove auth {peer.user} {reason}")
        self._prune_unreachable(now_ns)
        self._changed("remove_link")

    def _prune_unreachable(self, now_ns: int) -> None:
        reach = {self.bridge}
        todo = [self.bridge]
        while todo:
            b = todo.pop()
            for link in self.db.links(b):
                if link.peer_bridge not in reach:
                    reach.add(link.peer_bridge)
                    todo.append(link.peer_bridge)
        for b in [b for b in self.peers if b not in reach and ("sync", b) not in self._pending]:
            peer = self.peers[b]
            if not peer.neighbor:
                self._remove_peer(b, now_ns, "unreachable")

    def _remove_peer(self, b: bytes, now_ns: int, reason: str) -> None:
        peer = self.peers.pop(b, None)
        if peer is None:
            return
        peer.zombie_since_ns = now_ns
        peer.neighbor = False
        self.zombies[b] = peer
        self.db.remove_peer(b)
        for key in [k for k in self._pending if k[1] == b]:
            del self._pending[key]
        self._parked.pop(b, None)
        self._link_wanted.pop(b, None)
        self._early.pop(b, None)
        self.events.add(now_ns, Ev.SEND_PEER_DEL, user=peer.user, data=reason)
        if reason == "bye":
            self._bcast(S.Z_DEL, [(Fid.SYNC_BRIDGE, b)], now_ns)
        self._changed("remove_user")

    # ------------------------------------------------------------------ broadcast (_Z, _S, _P)

    def _bcast(self, subject: str, fields: Fields, now_ns: int) -> None:
        self.bcast_seqno += 1
        frame = encode_frame(MsgType.RTR_ALERT, subject, self.bridge,
                             [(Fid.SEQNO, self.bcast_seqno), (Fid.TIME, now_ns), *fields])
        self._mac.sign(frame)
        self._count(self.counters.pub_send, S.publish_type(subject).name.lower())
        self._seen((self.bridge, self.bcast_seqno))
        data = bytes(frame)
        for conn in self.conns.values():
            if conn.active:
                self._emit(conn.conn_id, data)

    def _seen(self, key: tuple[bytes, int]) -> bool:
        if key in self._bcast_seen:
            return True
        self._bcast_seen[key] = None
        if len(self._bcast_seen) > BCAST_SEEN_LIMIT:
            self._bcast_seen.popitem(last=False)
        return False

    def _on_bcast(self, conn: Conn, data: bytes, peer: Peer, now_ns: int) -> None:
        frame = decode_frame(data)
        d = frame.as_dict()
        if self._seen((peer.bridge, get_int(d, Fid.SEQNO))):
            self.counters.dup_bcast += 1
            return
        for other in self.conns.values():  # flood on before acting: neighbours converge sooner
            if other.active and other is not conn:
                self._emit(other.conn_id, data)
        via = conn.peer or peer.bridge
        subj = frame.subject
        if subj == S.Z_ADJ:
            self._on_adj_change(peer, d, via, now_ns)
        elif subj == S.Z_ADD:
            self._on_peer_add(d, via, now_ns)
        elif subj == S.Z_DEL:
            b = get_bytes(d, Fid.SYNC_BRIDGE)
            if b != self.bridge and not self._neighbor_conn(b):
                self._remove_peer(b, now_ns, "peer_del")
        elif subj == S.Z_BLM:
            self._set_bloom(peer, get_int(d, Fid.SUB_SEQNO), d.get(Fid.BLOOM), now_ns)
            self.events.add(now_ns, Ev.RECV_BLOOM, user=peer.user)
            if peer.bloom is not None and self.db.is_synced(peer.bridge):
                self._pending.pop(("adj", peer.bridge), None)
                self._changed("recv_bloom")
        elif subj.startswith((S.S_JOIN, S.S_LEAV, S.P_PSUB, S.P_STOP)):
            self._on_sub_change(peer, subj, d, via, now_ns)

    def _on_adj_change(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        link_value = d.get(Fid.ADJACENCY)
        if not isinstance(link_value, list):
            raise MalformedMessage("_Z.ADJ without adjacency")
        link = parse_link(peer.bridge, link_value)
        add = bool(d.get(Fid.LINK_ADD))
        self.events.add(now_ns, Ev.RECV_ADJ_CHANGE, user=peer.user, peer=self._name(link.peer_bridge),
                        data="add" if add else "remove")
        result = self.db.apply_delta(peer.bridge, get_int(d, Fid.LINK_STATE), add, link)
        if isinstance(result, NeedsSync):
            # hold the update until the gap before it is filled (by a reply or the missing
            # update); ask the origin itself when a path to it is known, since a neighbour
            # may be as far behind as we are
            early = self._early.setdefault(peer.bridge, {})
            if len(early) < EARLY_LIMIT:
                early[result.got] = (add, link)
            self._link_wanted[peer.bridge] = max(self._link_wanted.get(peer.bridge, 0), result.got)
            self._request("adj", peer.bridge, peer.bridge if self._routable(peer.bridge) else via, now_ns)
        elif result.changed:
            self._replay_early(peer.bridge)
            if add and link.peer_bridge not in self.peers and link.peer_bridge != self.bridge:
                self._request("sync", link.peer_bridge, via, now_ns)
            if not add:
                self._prune_unreachable(now_ns)
            self._changed("adj_change")

    def _on_peer_add(self, d: dict[int, object], via: bytes, now_ns: int) -> None:
        value = d.get(Fid.PEER_DB)
        if not isinstance(value, list):
            raise MalformedMessage("_Z.ADD without peer_db")
        s = parse_summary(value)
        self.events.add(now_ns, Ev.RECV_ADD_ROUTE, user=s.user)
        self._consider_summary(s, via, now_ns)

    def _consider_summary(self, s: PeerSummary, via: bytes, now_ns: int) -> None:
        if s.bridge == self.bridge:
            return
        peer = self.peers.get(s.bridge)
        if peer is None or peer.start_ns < s.start_ns:
            self._request("sync", s.bridge, via, now_ns)
            return
        rec = self.db.peer(s.bridge)
        if peer.start_ns == s.start_ns and rec is not None and (
            rec.link_seqno < s.link_seqno or peer.sub_seqno < s.sub_seqno or not self.db.is_synced(s.bridge)
        ):
            self._request("adj", s.bridge, via, now_ns)

    # ------------------------------------------------------------------ subscriptions

    def _announce_sub(self, subject: str, now_ns: int, extra: Fields = ()) -> None:  # type: ignore[assignment]
        self.sub_seqno += 1
        self.db.put_peer(PeerRecord(self.bridge, self.user, self.start_ns, self.sub_seqno))
        self._bcast(subject, [(Fid.SUB_SEQNO, self.sub_seqno), *extra], now_ns)

    def _send_bloom(self, now_ns: int) -> None:
        """`_Z.BLM`: the filter was resized, so replicas cannot follow by deltas."""
        self.events.add(now_ns, Ev.RESIZE_BLOOM, user=self.user)
        self._bcast(S.Z_BLM, [(Fid.SUB_SEQNO, self.sub_seqno), (Fid.BLOOM, self.bloom.to_bytes())], now_ns)

    def _on_sub_change(self, peer: Peer, subj: str, d: dict[int, object], via: bytes, now_ns: int) -> None:
        seqno = get_int(d, Fid.SUB_SEQNO)
        if seqno <= peer.sub_seqno:
            return
        if seqno != peer.sub_seqno + 1 or peer.bloom is None:
            peer.bloom_stale = True
            self._request("adj", peer.bridge, via, now_ns)
            return
        bloom = peer.bloom
        assert isinstance(bloom, BloomFilter)
        text = subj[len(S.S_JOIN):]
        syntax = FMT_SYNTAX.get(get_int(d, Fid.FMT, 0), "rv")
        try:
            if subj.startswith(S.S_JOIN):
                bloom.add_subject(text)
                peer.subjects.add(text)
            elif subj.startswith(S.S_LEAV):
                bloom.remove_subject(text)
                peer.subjects.discard(text)
            elif subj.startswith(S.P_PSUB):
                bloom.add_pattern(compile_pattern(text, syntax), _shard(d))  # type: ignore[arg-type]
                peer.patterns.add((syntax, text))
            else:
                bloom.remove_pattern(compile_pattern(text, syntax), _shard(d))  # type: ignore[arg-type]
                peer.patterns.discard((syntax, text))
        except (BloomError, SubjectError):
            peer.bloom_stale = True
            self._request("adj", peer.bridge, via, now_ns)
            return
        peer.sub_seqno = seqno
        self._filters_version += 1
        self._put_sub_seqno(peer)

    def _set_bloom(self, peer: Peer, seqno: int, raw: object, now_ns: int) -> None:
        if isinstance(raw, bytes) and seqno >= peer.sub_seqno:
            peer.bloom = BloomFilter.from_bytes(raw)
            self._filters_version += 1
            peer.sub_seqno = seqno
            peer.bloom_stale = False
            self._put_sub_seqno(peer)

    def _put_sub_seqno(self, peer: Peer) -> None:
        rec = self.db.peer(peer.bridge)
        if rec is not None and rec.sub_seqno != peer.sub_seqno:
            self.db.put_peer(PeerRecord(peer.bridge, peer.user, peer.start_ns, peer.sub_seqno))

    # ------------------------------------------------------------------ inbox and RPCs

    def _send_inbox(self, dest: bytes, suffix: str, fields: Fields, now_ns: int) -> None:
        peer = self.peers.get(dest)
        if peer is None:
            return
        peer.inbox_sent = self.hs.next_inbox_seqno(dest)
        subject = S.inbox_subject(dest, suffix)
        frame = encode_frame(MsgType.INBOX, subject, self.bridge,
                             [(Fid.SEQNO, peer.inbox_sent), (Fid.TIME, now_ns), *fields])
        self._mac.sign(frame)
        self._count(self.counters.pub_send, S.publish_type(subject).name.lower())
        self._route_inbox(dest, bytes(frame))

    def _route_inbox(self, dest: bytes, data: bytes) -> None:
        conn = self._neighbor_conn(dest)
        if conn is None:
            for link in self.routes.next_hops(dest, 0):
                conn = self._conn_for(link.tport_id, link.peer_bridge)
                if conn is not None:
                    break
        if conn is None:
            self.counters.no_route += 1
            return
        self._emit(conn.conn_id, data)

    def _on_inbox(self, conn: Conn, data: bytes, peer: Peer, now_ns: int) -> None:
        head = peek(data)
        dest, suffix = S.parse_inbox(head.subject.decode())
        if dest != self.bridge:
            self.counters.forwarded += 1
            self._route_inbox(dest, data)
            return
        frame = decode_frame(data)
        d = frame.as_dict()
        seqno = get_int(d, Fid.SEQNO)
        if not self._inbox_accept(peer, seqno, now_ns):
            self.counters.ibx_repeat += 1
            return
        via = conn.peer or peer.bridge
        handler = _INBOX_HANDLERS.get(suffix)
        if handler is not None:
            handler(self, peer, d, via, now_ns)
        elif suffix.isdigit():
            self._in_reply(peer, suffix, d, now_ns)

    @staticmethod
    def _inbox_accept(peer: Peer, seqno: int, now_ns: int) -> bool:
        """Replay check of a peer's inbox stream with a window of INBOX_WINDOW seqnos:
        routes change while a network converges, so inbox messages may arrive out of
        order; a gap counts as loss until (unless) the late message arrives."""
        high = peer.inbox_recv
        if seqno > high:
            shift = seqno - high
            peer.inbox_seen = ((peer.inbox_seen << shift) | 1) & INBOX_MASK if shift < INBOX_WINDOW else 1
            if high and shift > 1:
                peer.loss.ibx_loss += shift - 1
                peer.loss.ibx_time = now_ns
            peer.inbox_recv = seqno
            return True
        off = high - seqno
        if off >= INBOX_WINDOW or (peer.inbox_seen >> off) & 1:
            return False
        peer.inbox_seen |= 1 << off
        peer.loss.ibx_loss = max(0, peer.loss.ibx_loss - 1)
        return True

    def _request(self, kind: str, about: bytes, via: bytes | None, now_ns: int, retry: bool = False) -> None:
        if via is None or about == self.bridge:
            return
        key = (kind, about)
        if not retry:
            if key in self._pending:
                return
            self._pending[key] = _Pending(kind, about, via, now_ns + self.params.rpc_timeout_ns)
        if kind == "sync":
            self.events.add(now_ns, Ev.SEND_SYNC_REQ, user=self._name(via), peer=self._name(about))
            self._send_inbox(via, "sync_req", [(Fid.SYNC_BRIDGE, about)], now_ns)
        else:
            rec = self.db.peer(about)
            peer = self.peers.get(about)
            self.events.add(now_ns, Ev.SEND_ADJ_REQ, user=self._name(via), peer=self._name(about))
            self._send_inbox(via, "adj_req", [
                (Fid.SYNC_BRIDGE, about), (Fid.LINK_STATE, rec.link_seqno if rec else 0),
                (Fid.SUB_SEQNO, peer.sub_seqno if peer else 0),
            ], now_ns)
        self._changed("sync_req")

    def _in_add_rte(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        value = d.get(Fid.PEER_DB)
        self.events.add(now_ns, Ev.RECV_PEER_DB, user=peer.user)
        if isinstance(value, list):
            for fid, sub in value:
                if fid == Fid.PEER_DB and isinstance(sub, list):
                    self._consider_summary(parse_summary(sub), peer.bridge, now_ns)

    def _in_sync_req(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        about = get_bytes(d, Fid.SYNC_BRIDGE)
        self.events.add(now_ns, Ev.RECV_SYNC_REQ, user=peer.user, peer=self._name(about))
        target = self.peers.get(about)
        if about == self.bridge:
            key = self.session_key
        elif target is not None and target.session_key is not None:
            key = target.session_key
        else:
            self._send_inbox(peer.bridge, "sync_rpy", [(Fid.SYNC_BRIDGE, about), (Fid.AUTH_STAGE, 0)], now_ns)
            return
        assert peer.session_key is not None
        fields = self._state_fields(about)
        fields.append((Fid.SESS_KEY, wrap_session_key(key, peer.session_key, about)))
        self._send_inbox(peer.bridge, "sync_rpy", fields, now_ns)

    def _in_sync_rpy(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        about = get_bytes(d, Fid.SYNC_BRIDGE)
        self._pending.pop(("sync", about), None)
        wrapped = d.get(Fid.SESS_KEY)
        if not isinstance(wrapped, bytes):
            self.events.add(now_ns, Ev.RECV_SYNC_FAIL, user=peer.user, peer=self._name(about))
            self._changed("sync_fail")
            return
        s = parse_summary([(f, v) for f, v in d.items()])
        if about == self.bridge:
            return
        existing = self.peers.get(about)
        if existing is not None and existing.start_ns > s.start_ns:
            return  # stale: we know a newer incarnation
        if existing is None or existing.start_ns != s.start_ns:
            if existing is not None:
                self._remove_peer(about, now_ns, "restarted")
            existing = Peer(about, s.user, s.start_ns)
            self.peers[about] = existing
            self.zombies.pop(about, None)
            self.db.put_peer(PeerRecord(about, s.user, s.start_ns))
        existing.session_key = unwrap_session_key(wrapped, self.session_key, about)
        self.events.add(now_ns, Ev.SYNC_RESULT, user=peer.user, peer=s.user)
        self._apply_state(existing, d, s, peer.bridge, now_ns)
        for conn_id, data in self._parked.pop(about, ()):
            conn = self.conns.get(conn_id)
            if conn is not None and conn.active:
                self._receive(conn, data, peek(data), now_ns)

    def _in_adj_req(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        about = get_bytes(d, Fid.SYNC_BRIDGE)
        self.events.add(now_ns, Ev.RECV_ADJ_REQ, user=peer.user, peer=self._name(about))
        if about != self.bridge and about not in self.peers:
            self._send_inbox(peer.bridge, "adj_rpy", [(Fid.SYNC_BRIDGE, about), (Fid.AUTH_STAGE, 0)], now_ns)
            return
        self.events.add(now_ns, Ev.SEND_ADJ, user=peer.user, peer=self._name(about))
        self._send_inbox(peer.bridge, "adj_rpy", self._state_fields(about), now_ns)

    def _in_adj_rpy(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        about = get_bytes(d, Fid.SYNC_BRIDGE)
        self._pending.pop(("adj", about), None)
        target = self.peers.get(about)
        self.events.add(now_ns, Ev.RECV_ADJ_RESULT, user=peer.user, peer=self._name(about))
        if target is None or Fid.USER not in d:
            self._changed("adj_fail")
            return
        s = parse_summary([(f, v) for f, v in d.items()])
        if s.start_ns != target.start_ns:
            self._request("sync", about, peer.bridge, now_ns)
            return
        self._apply_state(target, d, s, peer.bridge, now_ns)
        wanted = self._link_wanted.get(about, 0)
        rec = self.db.peer(about)
        if rec is not None and rec.link_seqno < wanted:
            # the reply is older than an update we saw: ask again after a timeout, of the
            # origin when a path to it is known (no tight loop between lagging nodes)
            self._pending.setdefault(("adj", about), _Pending(
                "adj", about, about if self._routable(about) else self._next_neighbor(peer.bridge) or peer.bridge,
                now_ns + self.params.rpc_timeout_ns))
        else:
            self._link_wanted.pop(about, None)

    def _in_mesh_req(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        """A mesh member tells us its url: answer with the other members we know, and
        tell those members about it, so that every pair of members learns of each other."""
        tport = self._mesh_tport(get_str(d, Fid.TPORT))
        url = get_str(d, Fid.MESH_URL)
        if tport is None or not url:
            return
        self._member_urls[(tport.tport_id, peer.bridge)] = url
        members = [(b, u) for (tid, b), u in self._member_urls.items()
                   if tid == tport.tport_id and b != peer.bridge and self._conn_for(tid, b)]
        me = self._mesh_urls.get(tport.tport_id)
        entries = [(Fid.MESH_DB, [(Fid.SYNC_BRIDGE, b), (Fid.MESH_URL, u)]) for b, u in members]
        if me:
            entries.append((Fid.MESH_DB, [(Fid.SYNC_BRIDGE, self.bridge), (Fid.MESH_URL, me)]))
        self._send_inbox(peer.bridge, "mesh_rpy", [(Fid.TPORT, tport.name), (Fid.MESH_DB, entries)], now_ns)
        news = [(Fid.MESH_DB, [(Fid.SYNC_BRIDGE, peer.bridge), (Fid.MESH_URL, url)])]
        for b, _ in members:
            self._send_inbox(b, "mesh_rpy", [(Fid.TPORT, tport.name), (Fid.MESH_DB, news)], now_ns)

    def _in_mesh_rpy(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        tport = self._mesh_tport(get_str(d, Fid.TPORT))
        entries = d.get(Fid.MESH_DB)
        if tport is None or not isinstance(entries, list):
            return
        for fid, sub in entries:
            if fid != Fid.MESH_DB or not isinstance(sub, list):
                continue
            e = dict(sub)
            b, url = get_bytes(e, Fid.SYNC_BRIDGE), get_str(e, Fid.MESH_URL)
            key = (tport.tport_id, b)
            if b == self.bridge or not url or self._conn_for(tport.tport_id, b):
                continue
            self._member_urls[key] = url
            # the member with the smaller bridge dials, so a pair makes one link
            if self.bridge < b and key not in self._mesh_dialed:
                self._mesh_dialed.add(key)
                self._out.append(Connect(tport.tport_id, url))

    def _mesh_tport(self, name: str) -> Tport | None:
        return next((t for t in self.tports if t.name == name and t.type == "mesh"), None)

    def _state_fields(self, about: bytes) -> Fields:
        s = self._summary(about)
        bloom = self.bloom if about == self.bridge else self.peers[about].bloom
        fields: Fields = [*summary_fields(s), (Fid.ADJACENCY, links_value(self.db.links(about)))]
        if isinstance(bloom, BloomFilter):
            fields.append((Fid.BLOOM, bloom.to_bytes()))
        if about == self.bridge:
            subjects, patterns = list(self.subs.subjects()) + list(self.subs.queue_markers()), self.subs.patterns()
        else:
            subjects, patterns = list(self.peers[about].subjects), iter(self.peers[about].patterns)
        fields.append((Fid.SUB_LIST, sub_list_value(subjects, patterns)))
        return fields

    def _apply_state(self, target: Peer, d: dict[int, object], s: PeerSummary, via: bytes, now_ns: int) -> None:
        links = parse_links(target.bridge, d.get(Fid.ADJACENCY))
        before = set(self.db.links(target.bridge))
        result = self.db.apply_full(target.bridge, s.link_seqno, links)
        self._replay_early(target.bridge)
        if s.sub_seqno >= target.sub_seqno and Fid.SUB_LIST in d:
            target.subjects, target.patterns = parse_sub_list(d[Fid.SUB_LIST])
        self._set_bloom(target, s.sub_seqno, d.get(Fid.BLOOM), now_ns)
        if target.bloom is None and ("adj", target.bridge) not in self._pending:
            # the replier had no filter for it yet: ask again after a timeout
            self._pending[("adj", target.bridge)] = _Pending("adj", target.bridge, via,
                                                             now_ns + self.params.rpc_timeout_ns)
        for link in links:
            if link.peer_bridge != self.bridge and link.peer_bridge not in self.peers:
                self._request("sync", link.peer_bridge, via, now_ns)
        if result.changed and not before <= set(links):
            self._prune_unreachable(now_ns)  # only a removed link can strand a peer
        self._changed("sync_result")

    def _replay_early(self, b: bytes) -> None:
        """Apply held link updates of `b` that now follow on from its link seqno."""
        early = self._early.get(b)
        rec = self.db.peer(b)
        while early and rec is not None:
            nxt = early.pop(rec.link_seqno + 1, None)
            if nxt is None:
                for seqno in [s for s in early if s <= rec.link_seqno]:
                    del early[seqno]
                break
            self.db.apply_delta(b, rec.link_seqno + 1, nxt[0], nxt[1])
            rec = self.db.peer(b)
        if not early:
            self._early.pop(b, None)

    def _routable(self, b: bytes) -> bool:
        return self._neighbor_conn(b) is not None or bool(self.routes.next_hops(b, 0))

    def _summary(self, b: bytes) -> PeerSummary:
        if b == self.bridge:
            return PeerSummary(b, self.user, self.start_ns, self.link_seqno, self.sub_seqno)
        peer = self.peers[b]
        rec = self.db.peer(b)
        return PeerSummary(b, peer.user, peer.start_ns, rec.link_seqno if rec else 0, peer.sub_seqno)

    def _summaries(self) -> list[PeerSummary]:
        return [self._summary(self.bridge)] + [self._summary(b) for b in self.peers if self.peers[b].session_key]

    # ------------------------------------------------------------------ multicast data

    def _on_mcast(self, conn: Conn, data: bytes, sub: bytes, h: int, source: bytes, opt: int, now_ns: int) -> None:
        subject = sub.decode("utf-8", "surrogateescape")
        path = (opt >> 3) & 3
        forwarded = self._forward_mcast(data, source, SubjectHashes(sub, h), path, conn)
        delivered = self._deliver_local(source, subject, data, now_ns, own=False, transit=forwarded > 0)
        if opt & (OPT_ACK | OPT_TRACE):
            self._ack_reply(source, subject, data, conn, "trace" if opt & OPT_TRACE else "ack",
                            bool(opt & OPT_TRACE) or delivered, now_ns)

    def _ack_reply(self, source: bytes, subject: str, data: bytes, conn: Conn, kind: str, send: bool,
                   now_ns: int) -> None:
        """`_I.<source>.trace` from every router a traced message passes, `.ack` from the
        nodes that deliver an acked one, naming the transport it arrived on."""
        if not send:
            return
        seqno = decode_frame(data).get(Fid.SEQNO)
        self._send_inbox(source, kind, [(Fid.REF_SEQNO, seqno if isinstance(seqno, int) else 0),
                                        (Fid.SUBJECT, subject), (Fid.TPORT, conn.tport.name)], now_ns)

    def _forward_mcast(self, data: bytes, source: bytes, hashes: SubjectHashes, path: int, came: Conn | None) -> int:
        sent = 0
        for conn_id in self._forward_set(source, path, hashes.subject, hashes.full):
            if came is None or conn_id != came.conn_id:
                sent += 1
                self._emit(conn_id, data)
        self.counters.forwarded += sent
        return sent

    def _forward_set(self, source: bytes, path: int, subject: bytes, h: int) -> tuple[int, ...]:
        """Connections a multicast from `source` on `path` goes out on, pruned by the
        filters behind each link; cached until the link state or any filter changes."""
        version = (self.db.version, self._filters_version, len(self.conns))
        if version != self._fwd_version:
            self._fwd_cache.clear()
            self._fwd_version = version
        key = (source, path, subject)
        conns = self._fwd_cache.get(key)
        if conns is None:
            hashes = SubjectHashes(subject, h)

            def matches(b: bytes) -> bool:
                peer = self.peers.get(b)
                return peer is not None and isinstance(peer.bloom, BloomFilter) and peer.bloom.might_match(hashes)

            out = []
            for link in self.routes.forward_links(source, path, matches):
                conn = self._conn_for(link.tport_id, link.peer_bridge)
                if conn is not None:
                    out.append(conn.conn_id)
            conns = tuple(out)
            if len(self._fwd_cache) >= FORWARD_CACHE_LIMIT:
                self._fwd_cache.clear()
            self._fwd_cache[key] = conns
        return conns

    def _deliver_local(self, source: bytes, subject: str, data: bytes | bytearray, now_ns: int, own: bool,
                       transit: bool = False, no_echo: object | None = None) -> bool:
        """Deliver a received frame to the local subscriptions; True when any got it."""
        subs = self.subs.match(subject)
        if not subs:
            peer = self.peers.get(source)
            if peer is not None and not own and not transit:
                peer.loss.not_sub += 1
                peer.loss.not_sub_time = now_ns
            return False
        return self._deliver_message(source, subject, message_of(decode_frame(data).fields), subs, now_ns, own,
                                     no_echo)

    def _deliver_message(self, source: bytes, subject: str, msg: Message, subs: Sequence[LocalSub], now_ns: int,
                         own: bool, no_echo: object | None = None) -> bool:
        """Deliver `msg` to `subs` after the sequence check; False when it repeats one
        already delivered."""
        loss = 0
        if not own:
            verdict, loss = self.sub_window.check(source, subject, msg.seqno, msg.stamp, now_ns)
            if verdict is Verdict.REPEAT or loss:
                peer = self.peers.get(source)
                if verdict is Verdict.REPEAT:
                    if peer is not None:
                        peer.loss.repeat += 1
                        peer.loss.repeat_time = now_ns
                    return False
                if peer is not None:
                    peer.loss.msg_loss += loss
                    peer.loss.loss_time = now_ns
        self._deliver(source, subject, msg.seqno, subs, msg.payload, msg.reply, msg.headers, loss, no_echo)
        return True

    def _deliver(self, source: bytes, subject: str, seqno: int, subs: Sequence[LocalSub], payload: bytes,
                 reply: str | None, headers: bytes | None, loss: int, no_echo: object | None) -> None:
        """One Deliver per plain subscription, one per queue group this node is chosen for."""
        out = self._out
        groups: dict[str, list[LocalSub]] | None = None
        n = 0
        for sub in subs:
            if sub.owner is no_echo and no_echo is not None:
                continue
            if sub.queue is None:
                n += 1
                out.append(Deliver(sub.owner, sub.sid, subject, reply, payload, source, loss, headers))
            else:
                if groups is None:
                    groups = {}
                groups.setdefault(sub.queue_marker or "", []).append(sub)
        if groups is not None:
            for marker, members in groups.items():
                if self._queue_chosen(marker, source, seqno):
                    turn = self._queue_turn.get(marker, 0)
                    self._queue_turn[marker] = turn + 1
                    sub = members[turn % len(members)]
                    n += 1
                    out.append(Deliver(sub.owner, sub.sid, subject, reply, payload, source, loss, headers))
        self.counters.delivered += n

    def _queue_chosen(self, marker: str, source: bytes, seqno: int) -> bool:
        """Whether this node delivers a message to its member of a queue group: every
        node with members computes the same choice from the replicated subject lists,
        so exactly one of them delivers (anycast to one member among all nodes)."""
        nodes = sorted([self.bridge, *(b for b, p in self.peers.items() if marker in p.subjects)])
        if len(nodes) == 1:
            return True
        pick = mmh3.hash(source + seqno.to_bytes(8, "big"), 0, False) % len(nodes)
        return nodes[pick] == self.bridge

    # ------------------------------------------------------------------ helpers

    def _send_signed(self, conn: Conn, subject: str, fields: Fields, now_ns: int, mtype: MsgType) -> None:
        frame = encode_frame(mtype, subject, self.bridge, fields)
        self._mac.sign(frame)
        self._count(self.counters.pub_send, S.publish_type(subject).name.lower())
        self._emit(conn.conn_id, bytes(frame))

    def _emit(self, conn_id: int, data: bytes) -> None:
        self.counters.frames_out += 1
        self._out.append(Send(conn_id, data))

    def _emit_close(self, conn: Conn, reason: str) -> None:
        self._out.append(Close(conn.conn_id, reason))

    def actions_log(self, text: str) -> None:
        self._out.append(Log(text))

    def _neighbor_conn(self, b: bytes) -> Conn | None:
        for c in self.conns.values():
            if c.active and c.peer == b:
                return c
        return None

    def _next_neighbor(self, after: bytes) -> bytes | None:
        """The authenticated neighbour after `after` in bridge order (the first when
        `after` is none of them), so that repeated requests go round the neighbours."""
        around = sorted({c.peer for c in self.conns.values() if c.active and c.peer is not None})
        if not around:
            return None
        later = [b for b in around if b > after]
        return later[0] if later else around[0]

    def _conn_for(self, tport_id: int, peer: bytes) -> Conn | None:
        for c in self.conns.values():
            if c.active and c.peer == peer and c.tport.tport_id == tport_id:
                return c
        return None

    def _name(self, b: bytes | None) -> str:
        if b is None:
            return ""
        if b == self.bridge:
            return self.user
        p = self.peers.get(b) or self.zombies.get(b)
        return p.user if p else S.bridge_b64(b)[:8]

    @staticmethod
    def _count(table: dict[str, int], key: str) -> None:
        table[key] = table.get(key, 0) + 1

    def _changed(self, reason: str) -> None:
        if self.converged:
            self._unconverged_since_ns = -1
        self.converged = False
        self._change_reason = reason

    def _consistent(self) -> bool:
        if self._consistency_version != self.db.version:
            self._consistency_version = self.db.version
            self._consistency_ok = self.db.consistency().ok
        return self._consistency_ok

    def _flush(self, now_ns: int) -> list[Action]:
        if not self.converged:
            if self._unconverged_since_ns < 0:
                self._unconverged_since_ns = now_ns
            if not self._pending and self._consistent():
                self.converged = True
                self.converge_ns = now_ns
                secs = (now_ns - self._unconverged_since_ns) / NS
                n = sum(1 for p in self.peers.values() if p.session_key)
                self.events.add(now_ns, Ev.CONVERGE, user=self.user, data=self._change_reason)
                self._out.append(Log(f"network converges {secs:.3f} secs, {n} uids authenticated, "
                                     f"{self._change_reason}"))
        out, self._out = self._out, []
        return out



def _shard(d: dict[int, object]) -> Shard | None:
    count = get_int(d, Fid.SHARD_CNT)
    return Shard(get_int(d, Fid.SHARD_ID), count) if count else None


def is_inbox_reply(subject: str) -> bool:
    """A NATS-style reply subject: `_INBOX.` first, or second after a namespace."""
    return subject.startswith(S.NATS_INBOX) or subject.partition(".")[2].startswith(S.NATS_INBOX)


_INBOX_HANDLERS: dict[str, Callable[[Node, Peer, dict[int, object], bytes, int], None]] = {
    "add_rte": Node._in_add_rte,
    "sync_req": Node._in_sync_req,
    "sync_rpy": Node._in_sync_rpy,
    "adj_req": Node._in_adj_req,
    "adj_rpy": Node._in_adj_rpy,
    "mesh_req": Node._in_mesh_req,
    "ping": Node._in_ping,
    "any": Node._in_any,
    "ack": Node._in_ack,
    "trace": Node._in_trace,
    "rem": Node._in_rem,
    "pong": Node._in_pong,
    "mesh_rpy": Node._in_mesh_rpy,
}
