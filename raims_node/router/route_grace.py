"""Make before break: a relay keeps forwarding on the links its routes had before a change.

When the link state changes, every node recomputes its trees on its own, and a relay
may switch before the source does. Measured on the manual's A-D graph (the simulator,
and the daemons on 127.0.0.1): A streams to D through C while B joins; C learns of B's
links first, leaves A's tree for D and drops what A still sends it, until A learns of
them too and sends through B (100 messages lost in the simulator's 4 ms between the two;
docs/DESIGN-NOTES.md "Route changes under a stream"). The manual only says routing "is
not stable until all peers have finished adjusting"; we decide that a relay must not
drop what is already on its way: for `ROUTE_GRACE_NS` after a change of the links
(`Forward.watch_links`: from `Node._flush`, or from the cache rebuild that sees it
first), a relayed frame that the new routes send nowhere goes out on the links of the
last set that sent it somewhere (a link gone since is skipped). Every other frame keeps
to the new routes: sending it on the old links too would give subscribers two copies
(measured: 30-70 repeats in D's `show loss` per switch when both were used). This holds
for a relay that subscribes too: a frame the source sent before it switched is on its
way through here to the old subtree, and one it sent after looks the same, so those
come twice for the grace (counted as repeats; the manual allows copies while the link
state differs: "messages may be duplicated to alternative routes"). Until 2026-11-27 a
subscribing relay kept such frames: with C subscribing as well, every simulated A-B
link-up under a stream lost 5-137 of 2,000 at D.

Only the routes of a converged node are kept: a joining node's first trees are partial.
Without a live old set, such a frame goes on this node's own tree toward the
subscribers, unless a local subscription wants it (then it came for us): a node whose
view of the source's links lags the source's (B, just joined, placed D under C while A
already sent through B) would drop it otherwise. When that tree
reaches no one either, it goes to the neighbours whose filter passes its subject (or is
not known yet): B, just joined, has its own link to D but not yet D's side of it, so its
database cannot reach D at all (the simulator with jittered links and stalled nodes,
tests/sim/test_sim_route_change.py: 7 of 60 rejoins lost 18-668 messages at B). This is asked
only while the links change or the node is not converged: in a steady network a frame
sent nowhere is a filter's false positive, and its subscribers have it already.
Trees together can close a cycle, so a frame (by its MAC digest) takes these extra
links at most once per node. A source's own frames follow its current routes only: it
switches once, with no frame in flight behind it.
"""

from __future__ import annotations

from collections.abc import Callable

from raims_node.bloom import BloomFilter, SubjectHashes
from raims_node.router.state import NodeState
from raims_node.wire.frame import DIGEST_OFFSET

ROUTE_GRACE_NS = 250_000_000  # a few link-state floods on a slow network; a LAN needs ms
DIGEST_LEN = 16
TAKEN_LIMIT = 65536  # digests remembered in one grace period (cleared past it)

Key = tuple[bytes, int, bytes]  # (source, path, subject)


class RouteGrace:
    """The forwarding sets of the routes being replaced and until when they still count."""

    def __init__(self) -> None:
        self.old: dict[Key, tuple[int, ...]] = {}
        self._until_ns = 0  # the end of the grace: the last change of the links + ROUTE_GRACE_NS
        self._taken: set[bytes] = set()  # digests of frames sent on old links

    def started(self, now_ns: int) -> None:
        """The links changed at `now_ns`: the grace runs from then."""
        self._until_ns = now_ns + ROUTE_GRACE_NS

    def keep(self, sets: dict[Key, tuple[int, ...]], now_ns: int) -> None:
        """The forwarding cache of the routes before the change that `started` told of
        is replaced at `now_ns`: each non-empty set of `sets` becomes its key's old set,
        while the grace lasts (a cache rebuilt after it has nothing worth keeping)."""
        if now_ns > self._until_ns:
            return
        old = self.old
        for key, conns in sets.items():
            if conns:
                old[key] = conns

    def in_flux(self, now_ns: int) -> bool:
        """Whether the links changed within the grace."""
        return now_ns <= self._until_ns

    def extra(self, st: NodeState, key: Key, came: int, data: bytes, now_ns: int,
              own_tree: Callable[[], tuple[int, ...]]) -> tuple[int, ...]:
        """Where a relayed frame that the new routes send nowhere goes (asked while the
        links change or this node is not converged): on the live links of its old set,
        else, unless a local subscription wants it, on our own tree toward the
        subscribers (our view of the source's links may lag the source's), else to the
        neighbours that want it. Each frame once per node."""
        if now_ns > self._until_ns and self.old:
            self.old = {}
            self._taken.clear()
        before = self.old.get(key)
        live = st.conns
        extra = tuple(c for c in before if c != came and c in live and live[c].active) if before else ()
        if not extra:
            if st.subs and st.subs.match(key[2].decode("utf-8", "surrogateescape")):
                return ()  # no old route: it came for the subscriber here
            extra = tuple(c for c in own_tree() if c != came)
        if not extra:
            extra = interested_neighbours(st, key[2], came)
        if not extra:
            return ()
        digest = bytes(data[DIGEST_OFFSET:DIGEST_OFFSET + DIGEST_LEN])
        if digest in self._taken:  # it came around once already: no cycle through other trees
            return ()
        if len(self._taken) >= TAKEN_LIMIT:
            self._taken.clear()
        self._taken.add(digest)
        return extra


def interested_neighbours(st: NodeState, subject: bytes, came: int) -> tuple[int, ...]:
    """The live connections but `came` whose peer's filter passes `subject` or has not
    arrived yet (the far side filters by its own subscriptions)."""
    hashes = SubjectHashes(subject)
    out = []
    for conn in st.conns.values():
        if conn.conn_id == came or not conn.active or conn.peer is None:
            continue
        peer = st.peers.get(conn.peer)
        if peer is None or peer.bloom is None or isinstance(peer.bloom, BloomFilter) and peer.bloom.might_match(hashes):
            out.append(conn.conn_id)
    return tuple(out)
