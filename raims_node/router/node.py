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

and carries out the returned `Send`, `Deliver`, `Close` and `Log` actions in order
(and `Connect`; `NodeEvent`s tell the layers above, such as the name table, of peers
coming and going and of their names frames: `send_names` sends those).
The work is done by the parts behind this facade, one module per concern (links,
flood, interest, rpc, mesh, forward, remote; see docs/DESIGN-NOTES.md "router: the
core's parts"); they share `state.NodeState`.

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
from collections import deque
from collections.abc import Callable
from dataclasses import replace

from raims_node import RaimsError
from raims_node.bloom import BloomFilter, Shard
from raims_node.crypto.credentials import Credentials
from raims_node.crypto.handshake import Handshake
from raims_node.linkstate.db import LinkStateDB
from raims_node.linkstate.records import Cost, PeerRecord
from raims_node.linkstate.routes import RouteTable
from raims_node.router.actions import Action, Log
from raims_node.router.events import Ev, EventRecorder
from raims_node.router.flood import Flood
from raims_node.router.forward import Forward, is_inbox_reply
from raims_node.router.interest import Interest
from raims_node.router.links import HB_TIMEOUT_FACTOR, Links
from raims_node.router.localsubs import LocalSubs
from raims_node.router.lone import LonePath
from raims_node.router.mesh import Mesh
from raims_node.router.messages import get_int
from raims_node.router.peer import Peer
from raims_node.router.reclaim import own_flood
from raims_node.router.remote import Remote
from raims_node.router.rpc import Rpc
from raims_node.router.seqwin import PubWindow, SubWindow
from raims_node.router.state import (
    NS,
    OPT_ACK,
    OPT_ANY,
    OPT_TRACE,
    VERSION,
    Conn,
    Counters,
    NodeParams,
    NodeState,
    Tport,
    count,
)
from raims_node.wire import Fid, Header, MsgType, decode_frame, peek, peeked_fields
from raims_node.wire import subjects as S
from raims_node.wire.batch import Run

log = logging.getLogger("raims.router")


__all__ = [
    "HB_TIMEOUT_FACTOR", "NS", "OPT_ACK", "OPT_ANY", "OPT_TRACE", "VERSION", "Conn", "Counters", "Node",
    "NodeParams", "Tport", "is_inbox_reply",
]

InboxHandler = Callable[[Peer, dict[int, object], bytes, int], None]


class Node:
    """The one sans-IO facade of a node: the driver API above, its parts behind it."""

    def __init__(self, creds: Credentials, *, now_ns: int, rng: random.Random | None = None,
                 params: NodeParams | None = None, bridge: bytes | None = None) -> None:
        st = self.state = NodeState(creds, now_ns, rng or random.Random(), params or NodeParams(), bridge)
        self.interest_part = Interest(st)
        self.mesh = Mesh(st)
        self.links = Links(st, self.interest_part, self.mesh)
        self.rpc = Rpc(st, self.links, self.interest_part, self._receive)
        self.flood = Flood(st, self.links, self.interest_part, self.rpc)
        self.remote_ops = Remote(st)
        self.forward = Forward(st, on_mping=self.remote_ops.pong)
        self.lone = LonePath(st, self.forward)
        self._inbox: dict[str, InboxHandler] = {
            "add_rte": self.rpc.in_add_rte,
            "sync_req": self.rpc.in_sync_req,
            "sync_rpy": self.rpc.in_sync_rpy,
            "adj_req": self.rpc.in_adj_req,
            "adj_rpy": self.rpc.in_adj_rpy,
            "mesh_req": self.mesh.in_mesh_req,
            "mesh_rpy": self.mesh.in_mesh_rpy,
            "ping": self.remote_ops.in_ping,
            "pong": self.remote_ops.in_pong,
            "rem": self.remote_ops.in_rem,
            "ack": self.remote_ops.in_ack,
            "trace": self.remote_ops.in_trace,
            "any": self.forward.points.in_any,
            S.NAMES_SUFFIX: self.flood.in_names,
        }
        st.db.put_peer(PeerRecord(st.bridge, st.user, now_ns))
        st.db.apply_full(st.bridge, 0, ())
        st.events.add(now_ns, Ev.STARTUP, user=st.user)

    # ------------------------------------------------------------------ what others read

    @property
    def creds(self) -> Credentials:
        return self.state.creds

    @property
    def user(self) -> str:
        return self.state.user

    @property
    def service(self) -> str:
        return self.state.service

    @property
    def bridge(self) -> bytes:
        return self.state.bridge

    @property
    def start_ns(self) -> int:
        return self.state.start_ns

    @property
    def session_key(self) -> bytes:
        return self.state.session_key

    @property
    def params(self) -> NodeParams:
        return self.state.params

    @property
    def rng(self) -> random.Random:
        return self.state.rng

    @property
    def db(self) -> LinkStateDB:
        return self.state.db

    @property
    def routes(self) -> RouteTable:
        return self.state.routes

    @property
    def peers(self) -> dict[bytes, Peer]:
        return self.state.peers

    @property
    def zombies(self) -> dict[bytes, Peer]:
        return self.state.zombies

    @property
    def tports(self) -> list[Tport]:
        return self.state.tports

    @property
    def conns(self) -> dict[int, Conn]:
        return self.state.conns

    @property
    def subs(self) -> LocalSubs:
        return self.state.subs

    @property
    def bloom(self) -> BloomFilter:
        return self.state.bloom

    @property
    def sub_seqno(self) -> int:
        return self.state.sub_seqno

    @property
    def link_seqno(self) -> int:
        return self.state.link_seqno

    @property
    def pub_window(self) -> PubWindow:
        return self.state.pub_window

    @property
    def sub_window(self) -> SubWindow:
        return self.state.sub_window

    @property
    def events(self) -> EventRecorder:
        return self.state.events

    @property
    def counters(self) -> Counters:
        return self.state.counters

    @property
    def hs(self) -> Handshake:
        return self.state.hs

    @property
    def converged(self) -> bool:
        return self.state.converged

    @property
    def converge_ns(self) -> int:
        return self.state.converge_ns

    @property
    def acks(self) -> deque[tuple[str, str, str, int, str, int]]:
        return self.remote_ops.acks

    @property
    def rem_handler(self) -> Callable[[str], str] | None:
        return self.remote_ops.rem_handler

    @rem_handler.setter
    def rem_handler(self, handler: Callable[[str], str] | None) -> None:
        self.remote_ops.rem_handler = handler

    # ------------------------------------------------------------------ driver API

    def add_transport(self, name: str, type_: str, cost: Cost) -> int:
        t = Tport(name, len(self.state.tports), type_, cost)
        self.state.tports.append(t)
        self.state.changed("add_tport")
        return t.tport_id

    def set_mesh_url(self, tport_id: int, url: str) -> None:
        """The address other members of mesh transport `tport_id` reach us at."""
        self.mesh.urls[tport_id] = url

    def count_reject(self, kind: str) -> None:
        """A connection the driver refused, by cause (auth_timeout, pending_cap)."""
        self.state.count_reject(kind)

    def set_heartbeat(self, heartbeat_ns: int) -> None:
        """A new heartbeat interval (SIGHUP): announced from the next heartbeat on, which
        stays on the old schedule so that no neighbour times out in the change."""
        st = self.state
        st.params = replace(st.params, heartbeat_ns=heartbeat_ns)  # (the simulator shares one)
        st.hs.interval_s = max(1, heartbeat_ns // NS)

    def on_connect(self, conn_id: int, tport_id: int, now_ns: int) -> list[Action]:
        self.links.on_connect(Conn(conn_id, self.state.tports[tport_id], now_ns, last_recv_ns=now_ns), now_ns)
        return self._flush(now_ns)

    def on_disconnect(self, conn_id: int, now_ns: int) -> list[Action]:
        self.links.on_disconnect(conn_id, now_ns)
        return self._flush(now_ns)

    def hold_liveness(self, conn_id: int, held: bool, now_ns: int) -> None:
        """The daemon paused (`held`) or resumed reading connection `conn_id`: while its
        bytes wait unread it is not timed out, and it gets a full heartbeat timeout after."""
        conn = self.state.conns.get(conn_id)
        if conn is not None:
            conn.held = held
            conn.last_recv_ns = max(conn.last_recv_ns, now_ns)

    def on_frame(self, conn_id: int, data: bytes, now_ns: int) -> list[Action]:
        return self.on_frames(conn_id, [data], now_ns)

    def on_frames(self, conn_id: int, frames: list[bytes], now_ns: int) -> list[Action]:
        """The frames received together on one connection, in order."""
        conns = self.state.conns
        counters = self.state.counters
        fast = self.forward.forward_fast
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

    def tick(self, now_ns: int) -> list[Action]:
        self.interest_part.new_turn(now_ns)
        self.links.tick(now_ns)
        self.remote_ops.tick(now_ns)
        self.rpc.tick(now_ns)
        self.forward.release_due(now_ns)
        return self._flush(now_ns)

    def shutdown(self, now_ns: int) -> list[Action]:
        self.links.shutdown(now_ns)
        return self._flush(now_ns)

    # ------------------------------------------------------------------ local pub/sub

    def subscribe(self, owner: object, sid: str, subject: str, now_ns: int, queue: str | None = None) -> list[Action]:
        self.interest_part.subscribe(owner, sid, subject, now_ns, queue)
        return self._flush(now_ns)

    def psubscribe(
        self, owner: object, sid: str, pattern: str, syntax: str, now_ns: int, queue: str | None = None,
        shard: Shard | None = None,
    ) -> list[Action]:
        """A pattern subscription; with `shard` (k of n) a shardcast: only the subjects
        whose hash falls in shard k reach it, the other shards go to other nodes."""
        self.interest_part.psubscribe(owner, sid, pattern, syntax, now_ns, queue, shard)
        return self._flush(now_ns)

    def unsubscribe(self, owner: object, sid: str, now_ns: int) -> list[Action]:
        self.interest_part.remove(owner, sid, now_ns)
        return self._flush(now_ns)

    def drop_owner(self, owner: object, now_ns: int) -> list[Action]:
        """Remove every subscription of `owner`; announcements past one slice per loop turn
        wait for the next `tick`, which `next_wake_ns` asks for at once (router/interest.py)."""
        self.interest_part.drop_owner(owner, now_ns)
        return self._flush(now_ns)

    def publish(
        self, subject: str, payload: bytes, now_ns: int, reply: str | None = None, headers: bytes | None = None,
        no_echo: object | None = None, opt: int = 0,
    ) -> list[Action]:
        """Publish from a local client; `no_echo` names an owner that must not receive it.
        `opt` may ask for acks from the receivers (OPT_ACK) or from every router on the
        way (OPT_TRACE); the replies collect in `self.acks`. A reply subject of a NATS
        style request (`_INBOX.`, after an optional namespace) goes point to point to every
        node whose filter matches, each in the manual's `any` envelope (router/point.py)."""
        self.forward.publish(subject, payload, now_ns, reply, headers, no_echo, opt)
        return self._flush(now_ns)

    def publish_run(self, subject: str, payloads: Run, now_ns: int, no_echo: object = None) -> list[Action]:
        """A run of one subject, no reply, headers or options: batch frames (wire/batch.py)."""
        self.forward.publish_run(subject, payloads, now_ns, no_echo)
        return self._flush(now_ns)

    def remote(self, dest: bytes, command: str, owner: object, now_ns: int) -> list[Action]:
        """Run a console command on another node (`rem`); its text comes back to `owner`
        as a Deliver whose sid is the request's token."""
        self.remote_ops.remote(dest, command, owner, now_ns)
        return self._flush(now_ns)

    def ping(self, dest: bytes, owner: object, now_ns: int, trace: bool = False) -> tuple[int, list[Action]]:
        """A console ping (tping: `trace`) of `dest`; the pong reaches `owner` as a
        Deliver whose sid is the returned token (remote.py)."""
        token = self.remote_ops.ping(dest, owner, now_ns, trace)
        return token, self._flush(now_ns)

    def mping(self, path: int, owner: object, now_ns: int) -> tuple[int, list[Action]]:
        """`_M.ping` on multicast path `path`: every node's pong reaches `owner`."""
        token = self.remote_ops.expect(owner)
        self.forward.mping(path, token, now_ns)
        return token, self._flush(now_ns)

    def cancel(self, token: int) -> None:
        """Stop delivering the replies of a ping, mping or rem."""
        self.remote_ops.cancel(token)

    def send_names(self, dest: bytes | None, data: bytes, now_ns: int) -> list[Action]:
        """A names frame (issue 21, raims_node/names) flooded to every node (`dest` None)
        or to `dest`; receivers' drivers get `NodeEvent("names", ...)` ("peer_up", "peer_down" too)."""
        self.flood.send_names(dest, data, now_ns)
        return self._flush(now_ns)

    def interest(self, subject: str) -> tuple[int, int]:
        """(local subscriptions, remote nodes) a message on `subject` would reach."""
        return self.interest_part.interest(subject)

    def actions_log(self, text: str) -> None:
        self.state.log(text)

    # ------------------------------------------------------------------ receive

    def _receive(self, conn: Conn, data: bytes, head: Header, now_ns: int) -> None:
        st = self.state
        conn.last_recv_ns = now_ns
        if head.msg_type == MsgType.HEARTBEAT:
            self.links.on_heartbeat(conn, data, now_ns)
            return
        if head.msg_type == MsgType.INBOX and head.subject.endswith(b".auth"):
            frame = decode_frame(data)
            self.links.handshake(conn, st.hs.receive(now_ns, data, frame), now_ns)
            peer = st.peers.get(frame.bridge)
            seqno = frame.get(Fid.SEQNO)
            if peer is not None and isinstance(seqno, int) and peer.session_key == self.links.session_key_of(
                    frame.bridge):
                st.inbox_accept(peer, seqno, now_ns, "u_inbox_auth")  # auth shares the inbox stream
            return
        if (conn.peer is None or not conn.active) and not (head.msg_type in (MsgType.MCAST, MsgType.INBOX)
                                                          and conn.conn_id in self.links.leaving):
            st.counters.unauthenticated += 1
            st.count_reject("not_authenticated")
            return
        source = head.bridge
        if source == st.bridge:  # an echo of our floods, or a member's forgery (reclaim.py)
            own_flood(st, self.interest_part, data, head, now_ns)
            return
        peer = st.peers.get(source)
        if peer is None or peer.session_key is None:
            # park it: the sync reply may predate this update, which must not be lost
            st.counters.unknown_source += 1
            st.sync.park(source, conn.conn_id, data)
            st.request("sync", source, conn.peer, now_ns)
            return
        key = st.mac_key(source)
        if key is None or not key.verify(data):
            st.counters.bad_mac += 1
            return
        if head.msg_type == MsgType.MCAST:
            st.counters.mcast_recv += 1
            self.forward.on_mcast(conn, data, head, now_ns)
            return
        kind = S.publish_type_name(head.subject.decode(errors="replace"))
        count(st.counters.pub_recv, kind)
        if head.msg_type == MsgType.INBOX:
            self._on_inbox(conn, data, head, peer, now_ns, kind)
        else:
            self.flood.on_bcast(conn, data, head, peer, now_ns)

    def _on_inbox(self, conn: Conn, data: bytes, head: Header, peer: Peer, now_ns: int, kind: str) -> None:
        st = self.state
        dest, suffix = S.parse_inbox(head.subject.decode("utf-8", "replace"))  # bad bytes: BadSubject
        if dest != st.bridge:
            st.counters.forwarded += 1
            if suffix == "any":  # data: behind the floods held (router/batch.py)
                st.floods_first(now_ns)
            st.route_inbox(dest, data)
            if head.opt & OPT_TRACE:  # tping: every router on the way answers
                st.send_inbox(head.bridge, "trace", [(Fid.SUBJECT, head.subject.decode(errors="replace")),
                                                     (Fid.TPORT, conn.tport.name)], now_ns)
            return
        d = dict(peeked_fields(data, head, lazy=True))  # nested records decoded when wanted
        if not st.inbox_accept(peer, get_int(d, Fid.SEQNO), now_ns, kind):
            st.counters.ibx_repeat += 1
            return
        via = conn.peer or peer.bridge
        handler = self._inbox.get(suffix)
        if handler is not None:
            handler(peer, d, via, now_ns)
        elif suffix.isdigit():
            self.remote_ops.in_reply(peer, suffix, d, now_ns)
        self.forward.shares.release(peer, now_ns)  # shares held for a gap this may fill (share_hold.py)

    # ------------------------------------------------------------------ convergence

    def next_wake_ns(self) -> int | None:
        """When held floods or frames are due (router/batch.py, reorder.py), or now while
        announcements of our changes are pending (interest.py, paced by the links' unsent
        bytes): call `tick` then."""
        dues = (self.interest_part.due_ns(), self.state.next_wake_ns(), self.forward.next_due_ns())
        return min((t for t in dues if t is not None), default=None)

    def _flush(self, now_ns: int) -> list[Action]:
        st = self.state
        st.flush_floods(now_ns)
        self.forward.watch_links(now_ns)
        if not st.converged:
            if st.unconverged_since_ns < 0:
                st.unconverged_since_ns = now_ns
            if not st.sync.pending and st.db.is_consistent():
                st.converged = True
                st.converge_ns = now_ns
                secs = (now_ns - st.unconverged_since_ns) / NS
                n = sum(1 for p in st.peers.values() if p.session_key)
                st.events.add(now_ns, Ev.CONVERGE, user=st.user, data=st.change_reason)
                st.out.append(Log(f"network converges {secs:.3f} secs, {n} uids authenticated, "
                                  f"{st.change_reason}"))
        out, st.out = st.out, []
        return out
