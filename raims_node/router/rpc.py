"""Link-state RPCs on inboxes: `add_rte`, `sync_req/rpy`, `adj_req/rpy`, and retries.

Manual "Inbox Subjects" and "Example Message Flow": a node that hears of a peer it does
not know asks a neighbour for it (`sync_req`; the reply carries the peer's session key
wrapped for us, its links, filter and subject lists); one that misses a link or
subscription update asks for the peer's current state (`adj_req`). A peer summary
(`add_rte`, `_Z.ADD`) leads to whichever request the summary shows is needed.

Decisions: missed updates are held (`SyncBook.early`) and replayed when the gap fills;
a request for missing state goes to the origin when a path to it is known (a neighbour
may be as far behind), and is repeated after a timeout, round the neighbours, never in
a tight loop. Frames from a source whose key is not known yet are parked and replayed
after its sync reply.
"""

from __future__ import annotations

from collections.abc import Callable

from raims_node.router.actions import NodeEvent
from raims_node.router.events import Ev
from raims_node.router.interest import Interest
from raims_node.router.links import Links
from raims_node.router.messages import (
    PeerSummary,
    get_bytes,
    links_value,
    nested_fields,
    parse_links,
    parse_sub_list,
    parse_summary,
    summary_fields,
    summary_of,
    unwrap_session_key,
    wrap_session_key,
)
from raims_node.router.peer import Peer
from raims_node.router.state import Conn, NodeState, Pending
from raims_node.wire import Fid, Fields, Header, Nested, encode_fields, peek

RPC_RETRIES = 3
SYNC_RETRY_NS = 20_000_000  # after a failed sync reply, 20-40 ms before asking again
SYNC_FAIL_LIMIT = 8  # failed sync replies in a row about one peer before the request is given up
WAITING_LIMIT = 64  # requesters answered when our own sync reply about a peer arrives
STATE_CACHE_LIMIT = 4096  # encoded peer states kept for sync replies (cleared when full)

Receive = Callable[[Conn, bytes, Header, int], None]  # the facade's full receive path, for parked frames


class Rpc:
    def __init__(self, st: NodeState, links: Links, interest: Interest, receive: Receive) -> None:
        self.st = st
        self.links = links
        self.interest = interest
        self.receive = receive
        # about -> ((what the state is made of), encoded state): see _state_body
        self._bodies: dict[bytes, tuple[tuple[object, object, int, object, object], bytes]] = {}
        self.state_hits = 0

    def tick(self, now_ns: int) -> None:
        """Retry the requests whose answers are overdue, or give them up."""
        st = self.st
        if st.sync.sub_claims:
            self._check_claims(now_ns)
        pending = st.sync.pending
        if st.sync.parked:
            st.sync.drop_unasked()
        for key, p in list(pending.items()):
            if now_ns >= p.deadline_ns:
                if p.tries >= RPC_RETRIES or p.about not in st.peers and p.kind == "adj" or \
                        p.kind == "sync" and not st.db.referenced(p.about):
                    del pending[key]
                    st.changed("sync_timeout")
                    if p.kind == "sync":
                        self.answer_waiting(p.about, now_ns)
                    continue
                p.tries += 1
                p.deadline_ns = now_ns + st.params.rpc_timeout_ns
                if p.kind == "sync":
                    self.answer_waiting(p.about, now_ns)  # no wait in a cycle of askers
                # a retry asks the origin when a path to it is known, else the next
                # neighbour: the one asked may lag as far behind
                routable = p.kind == "adj" and st.routable(p.about)
                via = p.about if routable else st.next_neighbor(p.via)
                if via is not None:
                    p.via = via
                    st.request(p.kind, p.about, via, now_ns, retry=True)

    def _check_claims(self, now_ns: int) -> None:
        """`adj` of the peers still short of a claimed subscription seqno (NodeState.sub_claim)."""
        st = self.st
        claims = st.sync.sub_claims
        for b, (seqno, due_ns, via) in list(claims.items()):
            if now_ns >= due_ns:
                del claims[b]
                peer = st.peers.get(b)
                if peer is not None and peer.sub_seqno < seqno:
                    st.request("adj", b, via, now_ns)

    def consider_summary(self, s: PeerSummary, via: bytes, now_ns: int) -> None:
        """Request what a peer summary shows we lack: the peer (sync) or its state (adj)."""
        st = self.st
        if s.bridge == st.bridge:
            return
        peer = st.peers.get(s.bridge)
        if peer is None or peer.start_ns < s.start_ns:
            st.request("sync", s.bridge, via, now_ns)
            return
        rec = st.db.peer(s.bridge)
        if peer.start_ns != s.start_ns or rec is None:
            return
        if rec.link_seqno < s.link_seqno or not st.db.is_synced(s.bridge):
            st.request("adj", s.bridge, via, now_ns)
        elif peer.sub_seqno < s.sub_seqno:
            st.sub_claim(peer, s.sub_seqno, via, now_ns)  # its floods may be on the way

    def in_add_rte(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        self.st.events.add(now_ns, Ev.RECV_PEER_DB, user=peer.user)
        for fid, sub in nested_fields(d.get(Fid.PEER_DB)) or ():
            if fid == Fid.PEER_DB and isinstance(sub, list | Nested):
                self.consider_summary(parse_summary(sub), peer.bridge, now_ns)

    def in_sync_req(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        st = self.st
        about = get_bytes(d, Fid.SYNC_BRIDGE)
        st.events.add(now_ns, Ev.RECV_SYNC_REQ, user=peer.user, peer=st.name(about))
        target = st.peers.get(about)
        if about != st.bridge and (target is None or target.session_key is None) and \
                ("sync", about) in st.sync.pending and st.db.referenced(about):
            # we are learning it ourselves (the request followed a flood we passed on
            # before acting): answer when our own reply comes, not with a failure
            waiting = st.sync.waiting.setdefault(about, [])
            if len(waiting) < WAITING_LIMIT and peer.bridge not in waiting:
                waiting.append(peer.bridge)
                return
        self.answer_sync(peer, about, now_ns)

    def answer_sync(self, peer: Peer, about: bytes, now_ns: int) -> None:
        """A `sync_rpy` about `about` to `peer`: its state and key, or a failure."""
        st = self.st
        target = st.peers.get(about)
        if about == st.bridge:
            key = st.session_key
        elif target is not None and target.session_key is not None:
            key = target.session_key
        else:
            st.send_inbox(peer.bridge, "sync_rpy", [(Fid.SYNC_BRIDGE, about), (Fid.AUTH_STAGE, 0)], now_ns)
            return
        if peer.session_key is None:
            return
        tail = self._state_body(about) + encode_fields([(Fid.SESS_KEY, wrap_session_key(key, peer.session_key, about))])
        st.send_inbox(peer.bridge, "sync_rpy", [], now_ns, tail=bytes(tail))

    def _state_body(self, about: bytes) -> bytes:
        """The encoded `_state_fields` of `about`, cached per peer while it does not
        change: while a network converges a node answers the sync requests of each of
        its neighbours about the same peer. The stamp holds what the state is made of:
        the db record (replaced on every link change), the filter as received (None
        after a delta changed it in place: not cached then), the subscription seqno and
        the subject sets (replaced by a sync; changed in place only with the seqno)."""
        st = self.st
        peer = st.peers.get(about)
        if about == st.bridge or peer is None or peer.bloom_raw is None:
            return bytes(encode_fields(self._state_fields(about)))
        rec = st.db.peer(about)
        cached = self._bodies.get(about)
        if cached is not None:
            (c_rec, c_raw, c_seqno, c_subjects, c_patterns), body = cached
            if c_rec is rec and c_raw is peer.bloom_raw and c_seqno == peer.sub_seqno and \
                    c_subjects is peer.subjects and c_patterns is peer.patterns:
                self.state_hits += 1
                return body
        body = bytes(encode_fields(self._state_fields(about)))
        if len(self._bodies) >= STATE_CACHE_LIMIT:
            self._bodies.clear()
        self._bodies[about] = ((rec, peer.bloom_raw, peer.sub_seqno, peer.subjects, peer.patterns), body)
        return body

    def in_sync_rpy(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        st = self.st
        about = get_bytes(d, Fid.SYNC_BRIDGE)
        asked = st.sync.pending.pop(("sync", about), None)
        wrapped = d.get(Fid.SESS_KEY)
        if not isinstance(wrapped, bytes):
            st.events.add(now_ns, Ev.RECV_SYNC_FAIL, user=peer.user, peer=st.name(about))
            st.changed("sync_fail")
            self.answer_waiting(about, now_ns)
            fails = asked.fails + 1 if asked is not None else 1
            if about not in st.peers and about != st.bridge and fails <= SYNC_FAIL_LIMIT:
                # the replier lacks the key too (it is learning it as we are): ask the
                # next neighbour after a short jittered pause instead of waiting for a
                # heartbeat to show the difference; the pause doubles from the third
                # failure in a row and the request ends after SYNC_FAIL_LIMIT: a peer no
                # node knows (a member's advert listing links to 2,000 made-up bridges)
                # kept every node asking each of them every 20-40 ms, forever
                pause = st.rng.randrange(SYNC_RETRY_NS, 2 * SYNC_RETRY_NS) << max(0, fails - 2)
                st.sync.pending[("sync", about)] = Pending(
                    "sync", about, st.next_neighbor(peer.bridge) or peer.bridge,
                    now_ns + min(pause, st.params.rpc_timeout_ns), fails=fails)
            return
        s = summary_of(d)
        if about == st.bridge:
            return
        existing = st.peers.get(about)
        if existing is not None and existing.start_ns > s.start_ns or existing is None and self._superseded(about, s):
            self.answer_waiting(about, now_ns)
            return  # stale: we know a newer incarnation
        fresh = existing is None or existing.start_ns != s.start_ns
        if existing is None or existing.start_ns != s.start_ns:
            if existing is not None:
                self.links.remove_peer(about, now_ns, "restarted")
            existing = self.links.add_peer(about, s.user, s.start_ns)
        existing.session_key = unwrap_session_key(wrapped, st.session_key, about)
        st.events.add(now_ns, Ev.SYNC_RESULT, user=peer.user, peer=s.user)
        self._apply_state(existing, d, s, peer.bridge, now_ns)
        if fresh:
            st.out.append(NodeEvent("peer_up", about, existing.user))
        self.answer_waiting(about, now_ns)
        for conn_id, data in st.sync.unpark(about):
            conn = st.conns.get(conn_id)
            if conn is not None and conn.active:
                self.receive(conn, data, peek(data), now_ns)

    def _superseded(self, about: bytes, s: PeerSummary) -> bool:
        """Whether `about` is a dead incarnation of a user whose newer one is known: an
        older one of our own user, or one we removed (a zombie) while a peer of its user
        with a later start is live. A user is one node; a restart is a new bridge. Sync
        replies about the old one, still in flight or held by a node that had not removed
        it yet, brought it back after it was removed, with its links to nodes that no
        longer list it: a node restarted every 100 ms for 20 s left such a ghost on
        every node, and the network never converged again."""
        st = self.st
        if s.user == st.user:
            return s.start_ns < st.start_ns
        return about in st.zombies and any(p.user == s.user and p.start_ns > s.start_ns for p in st.peers.values())

    def answer_waiting(self, about: bytes, now_ns: int) -> None:
        """Answer the sync requests about `about` held while we learned it ourselves."""
        for b in self.st.sync.waiting.pop(about, ()):
            peer = self.st.peers.get(b)
            if peer is not None:
                self.answer_sync(peer, about, now_ns)

    def in_adj_req(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        st = self.st
        about = get_bytes(d, Fid.SYNC_BRIDGE)
        st.events.add(now_ns, Ev.RECV_ADJ_REQ, user=peer.user, peer=st.name(about))
        if about != st.bridge and about not in st.peers:
            st.send_inbox(peer.bridge, "adj_rpy", [(Fid.SYNC_BRIDGE, about), (Fid.AUTH_STAGE, 0)], now_ns)
            return
        st.events.add(now_ns, Ev.SEND_ADJ, user=peer.user, peer=st.name(about))
        st.send_inbox(peer.bridge, "adj_rpy", self._state_fields(about), now_ns)

    def in_adj_rpy(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        st = self.st
        about = get_bytes(d, Fid.SYNC_BRIDGE)
        st.sync.pending.pop(("adj", about), None)
        target = st.peers.get(about)
        st.events.add(now_ns, Ev.RECV_ADJ_RESULT, user=peer.user, peer=st.name(about))
        if target is None or Fid.USER not in d:
            st.changed("adj_fail")
            return
        s = summary_of(d)
        if s.start_ns != target.start_ns:
            st.request("sync", about, peer.bridge, now_ns)
            return
        self._apply_state(target, d, s, peer.bridge, now_ns)
        wanted = st.sync.link_wanted.get(about, 0)
        rec = st.db.peer(about)
        if rec is not None and rec.link_seqno < wanted:
            # the reply is older than an update we saw: ask again after a timeout, of the
            # origin when a path to it is known (no tight loop between lagging nodes)
            st.sync.pending.setdefault(("adj", about), Pending(
                "adj", about, about if st.routable(about) else st.next_neighbor(peer.bridge) or peer.bridge,
                now_ns + st.params.rpc_timeout_ns))
        else:
            st.sync.link_wanted.pop(about, None)

    def _state_fields(self, about: bytes) -> Fields:
        st = self.st
        s = st.summary(about)
        fields: Fields = [*summary_fields(s), (Fid.ADJACENCY, links_value(st.db.links(about)))]
        fields.extend(self.interest.state_fields(about))
        return fields

    def _apply_state(self, target: Peer, d: dict[int, object], s: PeerSummary, via: bytes, now_ns: int) -> None:
        st = self.st
        links = parse_links(target.bridge, d.get(Fid.ADJACENCY))
        before = set(st.db.links(target.bridge))
        result = st.db.apply_full(target.bridge, s.link_seqno, links)
        if result.trimmed:
            st.count_reject("link_cap")
        self.replay_early(target.bridge)
        if s.sub_seqno >= target.sub_seqno and Fid.SUB_LIST in d:
            target.subjects, target.patterns = parse_sub_list(d[Fid.SUB_LIST])
        self.interest.set_bloom(target, s.sub_seqno, d.get(Fid.BLOOM))
        if target.bloom is None and ("adj", target.bridge) not in st.sync.pending:
            # the replier had no filter for it yet: ask again after a timeout
            st.sync.pending[("adj", target.bridge)] = Pending("adj", target.bridge, via,
                                                             now_ns + st.params.rpc_timeout_ns)
        for link in links:
            if link.peer_bridge != st.bridge and link.peer_bridge not in st.peers:
                st.request("sync", link.peer_bridge, via, now_ns)
        if result.changed and not before <= set(links):
            self.links.prune_unreachable(now_ns)  # only a removed link can strand a peer
        st.changed("sync_result")

    def replay_early(self, b: bytes) -> None:
        """Apply held link updates of `b` that now follow on from its link seqno."""
        st = self.st
        early = st.sync.early.get(b)
        rec = st.db.peer(b)
        while early and rec is not None:
            nxt = early.pop(rec.link_seqno + 1, None)
            if nxt is None:
                for seqno in [s for s in early if s <= rec.link_seqno]:
                    del early[seqno]
                break
            st.db.apply_delta(b, rec.link_seqno + 1, nxt[0], nxt[1])
            rec = st.db.peer(b)
        if not early:
            st.sync.early.pop(b, None)
