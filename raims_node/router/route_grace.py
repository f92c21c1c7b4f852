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
last set that sent it somewhere (a link gone since is skipped). A frame the new routes
do send somewhere adds only the old links they dropped (below): sending it on all the
old links too gave subscribers two copies (30-70 repeats in D's `show loss` per
switch). This holds
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
links at most once per node.

Since 2026-11-27 (a scan of many seeds per scenario, tests/sim/test_sim_route_change_kinds.py),
while the links change or the node is not converged, also when the new routes do send
the frame somewhere: a relayed frame goes on the links of its old set that the new one
lacks (a relay whose tree shrank dropped what a source not yet switched sent for the
part cut off: a seven-node ring lost 8 when a link came up), and every frame, our own
too, goes on our *half links* whose neighbour's filter passes its subject: links whose
far side has not reached our database, so that none of our trees crosses them while
the source's, or the other relays', may (B, just joined, had no link record of D and
sent C's frames for D only to A; D, the source, did not know C's side of a new C-D link
while B routed C through it: 4-93 lost). Copies come both ways while the views differ;
the subscribers count them as repeats and drop them. A half link to a neighbour whose
filter is not known yet is not taken: B, joining, got every frame twice (80 repeats).
"""

from __future__ import annotations

from collections.abc import Callable

from raims_node.bloom import SubjectHashes
from raims_node.router.state import NodeState
from raims_node.wire import subjects as S
from raims_node.wire.frame import DIGEST_OFFSET

ROUTE_GRACE_NS = 250_000_000  # a few link-state floods on a slow network; a LAN needs ms
DIGEST_LEN = 16
TAKEN_LIMIT = 65536  # digests remembered in one grace period (cleared past it)
M_PREFIX = S.MCAST.encode()  # `_M.` subjects (pings) reach every node of the tree, unpruned, and keep to it

Key = tuple[bytes, int, bytes]  # (source, path, subject)


class RouteGrace:
    """The forwarding sets of the routes being replaced and until when they still count."""

    def __init__(self) -> None:
        self.old: dict[Key, tuple[int, ...]] = {}
        self._until_ns = 0  # the end of the grace: the last change of the links + ROUTE_GRACE_NS
        self._taken: set[bytes] = set()  # digests of frames sent on old links
        self._half: tuple[tuple[int, int], tuple[int, ...]] = ((-1, -1), ())  # (links version, conns): half links

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
        self._expire(now_ns)
        extra = self._live_old(st, self.old.get(key), came, ())
        if not extra:
            if st.subs and st.subs.match(key[2].decode("utf-8", "surrogateescape")):
                return ()  # no old route: it came for the subscriber here
            extra = tuple(c for c in own_tree() if c != came)
        if not extra:
            extra = interested_neighbours(st, key[2], came)
        extra += self.beyond_trees(st, extra, came, key[2])
        return extra if extra and self._first_time(data) else ()

    def own_set(self, st: NodeState, conns: tuple[int, ...], subject: bytes, data: bytes | bytearray,
                now_ns: int) -> tuple[int, ...]:
        """Where a frame of ours goes: on our tree (`conns`), and while the links change or
        this node is not converged, on the `beyond_trees` links too (once per frame): the
        others may route it by links we do not know of yet (module docstring)."""
        if st.converged and now_ns > self._until_ns or subject.startswith(M_PREFIX):
            return conns
        return self.with_half_links(st, conns, -1, subject, data, now_ns)

    def with_half_links(self, st: NodeState, conns: tuple[int, ...], came: int, subject: bytes,
                        data: bytes | bytearray, now_ns: int, key: Key | None = None) -> tuple[int, ...]:
        """`conns` and the `beyond_trees` links, and with `key` (a relayed frame) the live
        links of its old set that `conns` lacks (asked while the links change or this
        node is not converged; each frame once)."""
        self._expire(now_ns)
        extra = self.beyond_trees(st, conns, came, subject)
        if key is not None and self.old:
            extra += self._live_old(st, self.old.get(key), came, conns + extra)
        return conns + extra if extra and self._first_time(data) else conns

    @staticmethod
    def _live_old(st: NodeState, before: tuple[int, ...] | None, came: int,
                  taken: tuple[int, ...]) -> tuple[int, ...]:
        """The links of an old set `before` that are still up, but `came` and those `taken`."""
        live = st.conns
        return tuple(c for c in before if c != came and c not in taken and c in live and live[c].active) \
            if before else ()

    def beyond_trees(self, st: NodeState, conns: tuple[int, ...], came: int, subject: bytes) -> tuple[int, ...]:
        """Live links not in `conns` nor `came` that a frame may need beyond our trees: our
        half links (the neighbour's side of the link has not reached our database, so none
        of our trees crosses it, but the source's tree may pass it through us) to a
        neighbour whose filter, known, passes `subject` (module docstring)."""
        version = (st.db.links_version, len(st.conns))
        if self._half[0] != version:
            self._half = (version, half_links(st))
        half = self._half[1]
        if half:
            wanted = interested_neighbours(st, subject, came, known=True)
            half = tuple(c for c in half if c in wanted and c not in conns)
        return half

    def _expire(self, now_ns: int) -> None:
        if now_ns > self._until_ns and self.old:
            self.old = {}
            self._taken.clear()

    def _first_time(self, data: bytes | bytearray) -> bool:
        """Whether the frame (by its MAC digest) takes extra links here for the first time."""
        digest = bytes(data[DIGEST_OFFSET:DIGEST_OFFSET + DIGEST_LEN])
        if digest in self._taken:  # it came around once already: no cycle through other trees
            return False
        if len(self._taken) >= TAKEN_LIMIT:
            self._taken.clear()
        self._taken.add(digest)
        return True


def half_links(st: NodeState) -> tuple[int, ...]:
    """The live connections whose peer's link records do not name us yet."""
    me, db = st.bridge, st.db
    return tuple(c.conn_id for c in st.conns.values() if c.active and c.peer is not None
                 and not any(link.peer_bridge == me for link in db.links(c.peer)))


def interested_neighbours(st: NodeState, subject: bytes, came: int, known: bool = False) -> tuple[int, ...]:
    """The live connections but `came` whose peer's filter passes `subject` or, unless
    `known`, has not arrived yet (the far side filters by its own subscriptions)."""
    hashes = SubjectHashes(subject)
    out = []
    for conn in st.conns.values():
        if conn.conn_id == came or not conn.active or conn.peer is None:
            continue
        peer = st.peers.get(conn.peer)
        passes = None if peer is None else peer.filter_passes(hashes)
        if passes or passes is None and not known:
            out.append(conn.conn_id)
    return tuple(out)
