"""Links and peers: the handshake, heartbeats, link up and down, and dropping peers.

Manual "Heartbeat Subjects" and "Link State": a connection sends `_X.HELLO` and then
`_X.HB` every heartbeat interval; the HELLO/AUTH exchange (crypto/handshake.py)
authenticates the neighbour, after which the link is ours (`_Z.ADJ` add) and the peer
is known (`_Z.ADD`). A neighbour silent for 1.5 intervals is timed out; a peer that no
path reaches any more is dropped (a zombie, kept for `show` until it returns).
Heartbeats also carry the count and XOR of the bridges known and the link and
subscription seqno sums; two disagreeing heartbeats in a row resend our peer summary
(`add_rte`).
"""

from __future__ import annotations

from collections.abc import Sequence

from raims_node.crypto import mac
from raims_node.crypto.handshake import Authenticated, Confirmed, Fresh, Rejected
from raims_node.crypto.handshake import Send as HsSend
from raims_node.linkstate.records import LinkRecord, PeerRecord
from raims_node.router.actions import NodeEvent
from raims_node.router.events import Ev
from raims_node.router.interest import Interest
from raims_node.router.mesh import Mesh
from raims_node.router.messages import get_int, link_fields, summary_fields
from raims_node.router.peer import Peer
from raims_node.router.state import Conn, NodeState, count
from raims_node.router.uids import ZOMBIES_KEPT
from raims_node.wire import Fid, Frame, MsgType, decode_frame
from raims_node.wire import subjects as S

HB_TIMEOUT_FACTOR = 1.5
HB_DIFF_LIMIT = 2  # heartbeats in disagreement before we resend our peer summary
MAX_HB_INTERVAL_S = 3600  # an announced heartbeat interval beyond this is ignored
NS = 1_000_000_000
AUTH_UNLOGGED = 4  # auth seqnos kept per bridge not yet a peer (show inbox)
AUTH_UNLOGGED_BRIDGES = 64  # bridges kept so (hellos of bridges that never authenticate)


class Links:
    def __init__(self, st: NodeState, interest: Interest, mesh: Mesh) -> None:
        self.st = st
        self.interest = interest
        self.mesh = mesh
        self.hello: bytes | None = None  # the last HELLO/HB sent, repeated on a new connection
        self.next_hb_ns = st.start_ns
        # the seqnos of auth frames sent to a bridge not yet a peer (the answer to its first
        # hello), logged when it becomes one (show inbox); bounded, the oldest bridge dropped
        self.auth_unlogged: dict[bytes, list[int]] = {}
        # connections whose peer said BYE: until they close, the multicast and inbox frames it still
        # relays (sent to it before its sources heard the BYE) are taken (Node._receive)
        self.leaving: set[int] = set()

    # ------------------------------------------------------------------ connections

    def on_connect(self, conn: Conn, now_ns: int) -> None:
        st = self.st
        st.conns[conn.conn_id] = conn
        st.events.add(now_ns, Ev.ON_CONNECT, tport=conn.tport.name, user=st.user)
        if self.hello is None:
            self.heartbeat(now_ns)
        else:
            st.emit(conn.conn_id, self.hello)
        st.events.add(now_ns, Ev.SEND_HELLO, tport=conn.tport.name, user=st.user)

    def on_disconnect(self, conn_id: int, now_ns: int) -> None:
        st = self.st
        conn = st.conns.pop(conn_id, None)
        self.leaving.discard(conn_id)
        st.batch.drop_conn(conn_id)  # its held floods and last flush time
        if conn is not None:
            st.events.add(now_ns, Ev.ON_SHUTDOWN, tport=conn.tport.name, user=st.name(conn.peer))
            if conn.peer is not None and conn.active:
                self.link_down(conn, now_ns, "disconnect")

    def tick(self, now_ns: int) -> None:
        st = self.st
        hb = st.params.heartbeat_ns
        for conn in list(st.conns.values()):
            # supervised with the interval the peer announces (manual: 1.5 intervals)
            if conn.active and not conn.held and \
                    now_ns - conn.last_recv_ns > (conn.peer_hb_ns or hb) * HB_TIMEOUT_FACTOR:
                st.events.add(now_ns, Ev.HB_TIMEOUT, tport=conn.tport.name, user=st.name(conn.peer))
                self.link_down(conn, now_ns, "hb_timeout")
        if now_ns >= self.next_hb_ns:
            self.heartbeat(now_ns)

    def shutdown(self, now_ns: int) -> None:
        self.st.said_bye = True
        for conn in self.st.conns.values():
            if conn.active:
                self.st.send_signed(conn, S.X_BYE, [(Fid.TIME, now_ns)], MsgType.HEARTBEAT)

    # ------------------------------------------------------------------ heartbeats

    def heartbeat(self, now_ns: int) -> None:
        """One `_X.HB` per interval, the same frame on every link (an AUTH answers one of
        the last two), carrying the state a neighbour compares with its own."""
        st = self.st
        self.next_hb_ns = now_ns + st.params.heartbeat_ns
        sums = st.db.seqno_sums()
        frame = bytes(st.hs.hello(now_ns, heartbeat=self.hello is not None, extra=[
            (Fid.SUB_SEQNO, st.sub_seqno), (Fid.LINK_STATE, st.link_seqno),
            (Fid.CONVERGE, st.converge_ns), (Fid.UID_CNT, len(st.peers)),
            (Fid.UID_CSUM, st.uid_csum()), (Fid.LINK_SUM, sums.link_sum), (Fid.SUB_SUM, sums.sub_sum),
        ]))
        self.hello = frame
        for conn in st.conns.values():
            st.emit(conn.conn_id, frame)

    def on_heartbeat(self, conn: Conn, data: bytes, now_ns: int) -> None:
        st = self.st
        frame = decode_frame(data)
        b = frame.bridge
        if frame.subject == S.X_BYE:
            peer = st.peers.get(b)
            if conn.active and conn.peer == b and peer is not None and peer.session_key is not None \
                    and mac.verify(data, peer.session_key):
                st.events.add(now_ns, Ev.RECV_BYE, tport=conn.tport.name, user=peer.user)
                self.link_down(conn, now_ns, "bye")
                self.remove_peer(b, now_ns, "bye")
                self.leaving.add(conn.conn_id)
            elif not conn.active:
                st.count_reject("not_authenticated")
            return
        state = st.hs.peer(b)
        floor = state.hb_seqno if state is not None else 0
        events = st.hs.receive(now_ns, data, frame, challenge=not conn.active)
        self.handshake(conn, events, now_ns)
        if any(isinstance(ev, Rejected) for ev in events):
            return
        state = st.hs.peer(b)
        if state is None or state.session_key is None or not mac.verify(data, state.session_key):
            return
        interval = frame.get(Fid.INTERVAL)
        if isinstance(interval, int) and not isinstance(interval, bool) and 0 < interval <= MAX_HB_INTERVAL_S:
            conn.peer_hb_ns = interval * NS
        if not conn.active:
            # a link to a peer we already hold a session with (a second link, or a link
            # back after a heartbeat timeout or a partition): no new key exchange, but
            # only on a heartbeat newer than any seen (a recorded one proves nothing;
            # the current one was answered with a challenge, see handshake.py)
            seqno = frame.get(Fid.SEQNO)
            if not state.trusts_us or state.user is None or not isinstance(seqno, int) or seqno <= floor:
                return
            self._authenticated(conn, b, state.user, state.start_ns, state.session_key, now_ns)
        if conn.peer == b:
            peer = st.peers.get(b)
            if peer is not None:
                self._on_hb_state(conn, peer, frame, now_ns)

    def _on_hb_state(self, conn: Conn, peer: Peer, frame: Frame, now_ns: int) -> None:
        st = self.st
        d = frame.as_dict()
        peer.hb_seqno = get_int(d, Fid.SEQNO)
        peer.hb_time_ns = now_ns
        sent = get_int(d, Fid.TIME)
        if sent > 0:
            peer.skew_ns, peer.skew_time_ns = sent + peer.latency_ns // 2 - now_ns, now_ns
        peer.hb_link_sum = get_int(d, Fid.LINK_SUM)
        peer.hb_sub_sum = get_int(d, Fid.SUB_SUM)
        agree = get_int(d, Fid.UID_CNT) == len(st.peers) and d.get(Fid.UID_CSUM) == st.uid_csum()
        sums = st.db.seqno_sums()
        agree = agree and peer.hb_link_sum == sums.link_sum and peer.hb_sub_sum == sums.sub_sum
        if agree:
            conn.hb_disagree = 0
            return
        conn.hb_disagree += 1
        peer.hb_diff += 1
        if conn.hb_disagree >= HB_DIFF_LIMIT and not st.sync.pending:
            conn.hb_disagree = 0
            st.send_inbox(peer.bridge, "add_rte", st.peer_db_fields(peer.bridge), now_ns)

    # ------------------------------------------------------------------ authentication

    def session_key_of(self, b: bytes) -> bytes | None:
        state = self.st.hs.peer(b)
        return state.session_key if state is not None else None

    def handshake(self, conn: Conn, events: Sequence[object], now_ns: int) -> None:
        st = self.st
        for ev in events:  # replies first: the peer must see our auth before what follows it
            if isinstance(ev, HsSend):
                st.emit(conn.conn_id, ev.frame)
                count(st.counters.pub_send, "u_inbox_auth")
        for ev in events:
            if isinstance(ev, Rejected):
                st.counters.auth_rejected += 1
                st.count_reject(ev.kind)
                st.events.add(now_ns, Ev.AUTH_REMOVE, tport=conn.tport.name, user=ev.user or "",
                              data=ev.reason)
                st.log(f"remove auth {ev.user or '?'} {ev.reason}", key=f"reject.{ev.kind}")
            elif isinstance(ev, Authenticated):
                st.events.add(now_ns, Ev.RECV_CHALLENGE, tport=conn.tport.name, user=ev.user)
                conn.peer_hb_ns = min(ev.interval_s, MAX_HB_INTERVAL_S) * NS
                self._authenticated(conn, ev.bridge, ev.user, ev.start_ns, ev.session_key, now_ns)
            elif isinstance(ev, Confirmed | Fresh):
                if isinstance(ev, Confirmed):
                    st.events.add(now_ns, Ev.RECV_TRUST, tport=conn.tport.name, user=ev.user)
                state = st.hs.peer(ev.bridge)
                if not conn.active and state is not None and state.session_key is not None:
                    # a known session proved live on this new link (its challenge answered)
                    self._authenticated(conn, ev.bridge, ev.user, state.start_ns, state.session_key, now_ns)
        for ev in events:  # the auth frames sent, once the peer is known (show inbox)
            if isinstance(ev, HsSend) and ev.seqno and ev.dest is not None:
                self._log_auth(ev.dest, ev.seqno)

    def _log_auth(self, dest: bytes, seqno: int) -> None:
        """Log an auth frame's seqno on the peer's inbox log, with those sent before it
        was a peer; keep it for later while it is not one."""
        peer, unlogged = self.st.peers.get(dest), self.auth_unlogged
        if peer is None:
            seqnos = unlogged.setdefault(dest, [])
            seqnos[:] = [*seqnos[-(AUTH_UNLOGGED - 1):], seqno]
            if len(unlogged) > AUTH_UNLOGGED_BRIDGES:
                del unlogged[next(iter(unlogged))]
            return
        for s in unlogged.pop(dest, ()):
            peer.inbox_sent_types.append((s, "u_inbox_auth"))
        peer.inbox_sent_types.append((seqno, "u_inbox_auth"))

    def _authenticated(self, conn: Conn, b: bytes, user: str, start_ns: int, key: bytes, now_ns: int) -> None:
        st = self.st
        if b == st.bridge:
            st.emit_close(conn, "connected to itself")
            return
        st.events.add(now_ns, Ev.AUTH_ADD, tport=conn.tport.name, user=user, data="handshake")
        old = st.peers.get(b)
        is_new = old is None or old.start_ns != start_ns
        if old is None or is_new:
            if old is not None:
                self.remove_peer(b, now_ns, "restarted", forget=False)  # keep the session just made
            peer = self.add_peer(b, user, start_ns)
        else:
            peer = old
        peer.session_key = key
        st.sync.pending.pop(("sync", b), None)
        self._link_up(conn, peer, now_ns)
        if is_new:
            st.bcast(S.Z_ADD, [(Fid.PEER_DB, summary_fields(st.summary(b)))], now_ns)
            st.events.add(now_ns, Ev.SEND_ADD_ROUTE, tport=conn.tport.name, user=user)
            # our filter, flooded: nodes learning of us through this neighbour may get
            # its sync reply before it holds our filter
            self.interest.bcast_bloom_soon(now_ns)
        st.send_inbox(b, "add_rte", st.peer_db_fields(b), now_ns)
        st.request("adj", b, b, now_ns)
        st.changed("add_user")
        if is_new:
            st.out.append(NodeEvent("peer_up", b, user))

    def add_peer(self, b: bytes, user: str, start_ns: int) -> Peer:
        """A new peer (or a new incarnation of one), back from the zombies if it was one."""
        st = self.st
        peer = Peer(b, user, start_ns)
        st.peers[b] = peer
        st.zombies.pop(b, None)
        st.uids.assign(b)
        st.db.put_peer(PeerRecord(b, user, start_ns))
        return peer

    def _link_up(self, conn: Conn, peer: Peer, now_ns: int) -> None:
        st = self.st
        conn.peer = peer.bridge
        conn.active = True
        conn.last_recv_ns = now_ns
        for key, data in st.batch.since(conn.opened_ns):  # what crossed while it shook hands
            st.batch.hold(conn.conn_id, key, data, now_ns)
        peer.neighbor = True
        st.events.add(now_ns, Ev.ADD_USER_ROUTE, tport=conn.tport.name, user=peer.user, data="neighbor")
        if st.conn_for(conn.tport.tport_id, peer.bridge) is conn:
            self._add_my_link(conn, now_ns)
        self.mesh.on_link_up(conn, peer, now_ns)

    # ------------------------------------------------------------------ our links

    def _add_my_link(self, conn: Conn, now_ns: int) -> None:
        st = self.st
        assert conn.peer is not None
        link = LinkRecord(st.bridge, conn.tport.name, conn.tport.tport_id, conn.peer, conn.tport.cost, conn.tport.type)
        st.link_seqno += 1
        st.db.apply_delta(st.bridge, st.link_seqno, True, link)
        st.events.add(now_ns, Ev.SEND_ADJ_CHANGE, tport=conn.tport.name, peer=st.name(conn.peer), data="add")
        st.bcast(S.Z_ADJ, [(Fid.LINK_STATE, st.link_seqno), (Fid.LINK_ADD, True),
                           (Fid.ADJACENCY, link_fields(link))], now_ns)

    def link_down(self, conn: Conn, now_ns: int, reason: str) -> None:
        st = self.st
        conn.active = False
        b = conn.peer
        if b is None:
            return
        conn.peer = None
        self.mesh.on_link_down(conn, b)
        link = next((x for x in st.db.links(st.bridge)
                     if x.tport_id == conn.tport.tport_id and x.peer_bridge == b), None)
        if link is not None and not any(c.active and c.peer == b and c.tport.tport_id == conn.tport.tport_id
                                        for c in st.conns.values()):
            st.link_seqno += 1
            st.db.apply_delta(st.bridge, st.link_seqno, False, link)
            st.events.add(now_ns, Ev.SEND_ADJ_CHANGE, tport=conn.tport.name, peer=st.name(b), data="remove")
            st.bcast(S.Z_ADJ, [(Fid.LINK_STATE, st.link_seqno), (Fid.LINK_ADD, False),
                               (Fid.ADJACENCY, link_fields(link))], now_ns)
        peer = st.peers.get(b)
        if peer is not None and not any(c.active and c.peer == b for c in st.conns.values()):
            peer.neighbor = False
            st.log(f"remove auth {peer.user} {reason}")
        self.prune_unreachable(now_ns)
        st.changed("remove_link")

    def prune_unreachable(self, now_ns: int) -> None:
        st = self.st
        reach = {st.bridge}
        todo = [st.bridge]
        while todo:
            b = todo.pop()
            for link in st.db.links(b):
                if link.peer_bridge not in reach:
                    reach.add(link.peer_bridge)
                    todo.append(link.peer_bridge)
        for b in [b for b in st.peers if b not in reach and ("sync", b) not in st.sync.pending]:
            peer = st.peers[b]
            if not peer.neighbor:
                self.remove_peer(b, now_ns, "unreachable")

    def remove_peer(self, b: bytes, now_ns: int, reason: str, forget: bool = True) -> None:
        st = self.st
        peer = st.peers.pop(b, None)
        if peer is None:
            return
        peer.bury(now_ns)
        st.zombies[b] = peer
        if len(st.zombies) > ZOMBIES_KEPT:  # the oldest is forgotten, its uid free again
            st.uids.release(st.zombies.pop(next(iter(st.zombies))).bridge)
        st.db.remove_peer(b)
        st.sync.forget(b)
        st.forget_mac(b)
        self.mesh.forget(b)
        if forget:
            st.hs.forget(b)  # its session, not its seqno floors: a replay cannot bring it back
        st.events.add(now_ns, Ev.SEND_PEER_DEL, user=peer.user, data=reason)
        if reason == "bye":
            st.bcast(S.Z_DEL, [(Fid.SYNC_BRIDGE, b)], now_ns)
        st.changed("remove_user")
        st.out.append(NodeEvent("peer_down", b, peer.user))

