"""Received `_Z/_S/_P` broadcasts: flooded on, then applied.

Manual "System Subjects": `_Z.ADJ` (a link added or removed), `_Z.ADD` (a peer
authenticated somewhere), `_Z.DEL` (a peer said BYE), `_Z.BLM` (a whole filter), and
the subscription deltas `_S.*` / `_P.*`. Every one is flooded to every authenticated
neighbour but the one it came from, before it is acted on (neighbours converge sooner),
and suppressed as a duplicate by (origin, seqno). Our own floods are sent by
`NodeState.bcast`.

Between neighbours, floods travel in batches (`router/batch.py`, issue 24): a `_Z.BAT`
without `seqno` is a neighbour's hop batch, whose inner floods are each received as if
they came alone; a `_Z.BAT` with a `seqno` is an origin batch, one flood of its origin
whose inner updates are applied in order and not flooded on separately.
"""

from __future__ import annotations

from raims_node.linkstate.db import Applied, NeedsSync
from raims_node.router.actions import NodeEvent
from raims_node.router.batch import Z_BAT, flood_key
from raims_node.router.events import Ev
from raims_node.router.interest import Interest
from raims_node.router.links import Links
from raims_node.router.messages import (
    get_bytes,
    get_int,
    link_of,
    parse_summary,
)
from raims_node.router.peer import Peer
from raims_node.router.rpc import SYNC_RETRY_NS, Rpc
from raims_node.router.state import Conn, NodeState
from raims_node.wire import Fid, Fields, Header, MsgType, peek, peeked_fields
from raims_node.wire import subjects as S

Z_BAT_B = Z_BAT.encode()
_SEQNO, _DATA = int(Fid.SEQNO), int(Fid.DATA)
EARLY_LIMIT = 64  # link updates held per peer while waiting for the ones before them


class Flood:
    def __init__(self, st: NodeState, links: Links, interest: Interest, rpc: Rpc) -> None:
        self.st = st
        self.links = links
        self.interest = interest
        self.rpc = rpc
        self._in_batch = False

    def on_bcast(self, conn: Conn, data: bytes, head: Header, peer: Peer, now_ns: int, relay: bool = True) -> None:
        """A flood from `peer` (MAC checked, `head` its peeked header), flooded on unless
        `relay` is False (an update inside an origin batch, which travels as a whole)."""
        st = self.st
        batch = st.batch
        if relay:
            key = flood_key(head.bridge, head.digest)
            if batch.seen(key):  # this very frame was handled (a hop batch never is): not decoded again
                batch.has_from(conn.conn_id, key)
                st.counters.dup_bcast += 1
                return
        fields = peeked_fields(data, head, lazy=True)  # nested records: messages.py, when wanted
        d = dict(fields)  # the last of a repeated field wins
        subj = head.subject.decode("utf-8", "surrogateescape")
        if subj == Z_BAT and _SEQNO not in d:
            if relay and not self._in_batch:
                self._in_batch = True
                try:
                    self._on_batch(conn, fields, now_ns)
                finally:
                    self._in_batch = False
            else:
                st.counters.bad_frames += 1  # a hop batch never nests in another
            return
        if relay:
            batch.has_from(conn.conn_id, key)
            batch.remember(key)
        if st.seen((peer.bridge, get_int(d, _SEQNO))):
            st.counters.dup_bcast += 1
            return
        if relay:
            st.log_flood(key, data, now_ns)
            for other in st.conns.values():  # flood on before acting: neighbours converge sooner
                if other.active and other is not conn:
                    batch.hold(other.conn_id, key, data, now_ns)
        if subj == Z_BAT:
            if relay:
                self._on_origin_batch(conn, fields, peer, now_ns)
            return
        via = conn.peer or peer.bridge
        if subj == S.Z_ADJ:
            self._on_adj_change(peer, d, via, now_ns)
        elif subj == S.Z_ADD:
            self._on_peer_add(d, via, now_ns)
        elif subj == S.Z_DEL:
            b = get_bytes(d, Fid.SYNC_BRIDGE)
            if b != st.bridge and not st.neighbor_conn(b):
                self.links.remove_peer(b, now_ns, "peer_del")
        elif subj == S.Z_BLM:
            self.interest.set_bloom(peer, get_int(d, Fid.SUB_SEQNO), d.get(Fid.BLOOM), via, now_ns)
            st.events.add(now_ns, Ev.RECV_BLOOM, user=peer.user)
            if peer.bloom is not None and not peer.bloom_stale and st.db.is_synced(peer.bridge):
                if peer.bridge not in st.sync.early:  # else the request also fills a gap in its links
                    st.sync.pending.pop(("adj", peer.bridge), None)
                st.changed("recv_bloom")
        elif subj.startswith((S.S_JOIN, S.S_LEAV, S.P_PSUB, S.P_STOP)):
            self.interest.on_sub_change(peer, subj, d, via, now_ns)
        elif subj == S.Z_NAMES:
            self.in_names(peer, d, via, now_ns)

    def _on_batch(self, conn: Conn, fields: Fields, now_ns: int) -> None:
        """A `_Z.BAT` of a neighbour (batch.py): each inner flood as if it came alone."""
        st = self.st
        batch = st.batch
        for fid, inner in fields:
            if fid != _DATA or not isinstance(inner, bytes):
                continue
            head = peek(inner)
            key = flood_key(head.bridge, head.digest)
            batch.has_from(conn.conn_id, key)
            if batch.seen(key):
                st.counters.dup_bcast += 1
            elif head.msg_type != MsgType.RTR_ALERT:
                st.counters.bad_frames += 1  # only floods travel in a batch
            elif st.conns.get(conn.conn_id) is conn:
                self.rpc.receive(conn, inner, head, now_ns)

    def _on_origin_batch(self, conn: Conn, fields: Fields, peer: Peer, now_ns: int) -> None:
        """The updates of `peer`, batched at the origin and covered by its MAC."""
        self.interest.origin_batch(peer)
        try:
            for fid, inner in fields:
                if fid != _DATA or not isinstance(inner, bytes):
                    continue
                head = peek(inner)
                if head.bridge != peer.bridge or head.msg_type != MsgType.RTR_ALERT or head.subject == Z_BAT_B:
                    self.st.counters.bad_frames += 1
                    continue
                self.on_bcast(conn, inner, head, peer, now_ns, relay=False)
        finally:
            self.interest.origin_batch(None)

    def send_names(self, dest: bytes | None, data: bytes, now_ns: int) -> None:
        """A names frame (issue 21): flooded to every node when `dest` is None, else to
        node `dest`'s inbox; receivers get a `NodeEvent("names", ...)`."""
        if dest is None:
            self.st.bcast(S.Z_NAMES, [(Fid.DATA, data)], now_ns)
        else:
            self.st.send_inbox(dest, S.NAMES_SUFFIX, [(Fid.DATA, data)], now_ns)

    def in_names(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        data = d.get(Fid.DATA)
        if isinstance(data, bytes):
            self.st.out.append(NodeEvent("names", peer.bridge, peer.user, data))

    def _on_adj_change(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        st = self.st
        link = link_of(peer.bridge, d.get(Fid.ADJACENCY))
        add = bool(d.get(Fid.LINK_ADD))
        link_seqno = get_int(d, Fid.LINK_STATE)
        st.events.add(now_ns, Ev.RECV_ADJ_CHANGE, user=peer.user, peer=st.name(link.peer_bridge),
                      data="add" if add else "remove")
        rec = st.db.peer(peer.bridge)
        if rec is not None and link_seqno <= rec.link_seqno and st.db.is_synced(peer.bridge):
            return  # one the db holds already (most, while converging: a sync reply carried it)
        result = st.db.apply_delta(peer.bridge, link_seqno, add, link)
        if isinstance(result, Applied) and result.trimmed:
            st.count_reject("link_cap")
        if isinstance(result, NeedsSync):
            # hold the update until the gap before it is filled (by a reply or the missing
            # update); ask the origin itself when a path to it is known, since a neighbour
            # may be as far behind as we are
            early = st.sync.early.setdefault(peer.bridge, {})
            if len(early) < EARLY_LIMIT:
                early[result.got] = (add, link)
            wanted = st.sync.link_wanted
            wanted[peer.bridge] = max(wanted.get(peer.bridge, 0), result.got)
            waiting = st.sync.pending.get(("adj", peer.bridge))
            if waiting is None:
                st.request("adj", peer.bridge, peer.bridge if st.routable(peer.bridge) else via, now_ns)
            else:  # asked already, for its filter (timeout rpc_timeout): the gap is asked soon
                waiting.deadline_ns = min(waiting.deadline_ns,
                                          now_ns + st.rng.randrange(SYNC_RETRY_NS, 2 * SYNC_RETRY_NS))
        elif result.changed:
            self.rpc.replay_early(peer.bridge)
            if add and link.peer_bridge not in st.peers and link.peer_bridge != st.bridge:
                st.request("sync", link.peer_bridge, via, now_ns)
            if not add:
                self.links.prune_unreachable(now_ns)
            st.changed("adj_change")

    def _on_peer_add(self, d: dict[int, object], via: bytes, now_ns: int) -> None:
        s = parse_summary(d.get(Fid.PEER_DB))
        self.st.events.add(now_ns, Ev.RECV_ADD_ROUTE, user=s.user)
        self.rpc.consider_summary(s, via, now_ns)
