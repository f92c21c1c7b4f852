"""The replicated link-state database (manual: "Networking" intro, "Link State", `_Z.ADJ`,
`adj_req`/`adj_rpy`, `sync_req`/`sync_rpy`, "show adjacency", "show sync").

Every node holds the same peer records and, for each peer, the set of links that peer
advertised. A peer's link set changes either wholesale (an `adj_rpy` / `sync_rpy`
carrying the full set and its link seqno) or by one delta (`_Z.ADJ`: add or remove one
link, incrementing the link seqno). A delta applies only on top of the seqno just before
it; anything else means this node missed an update and must resynchronize.

Decisions where the manual is vague:
- `link_seqno` of a stored peer is owned by the database: it is the seqno of the link
  set held (0 until the first full set arrives). `put_peer` therefore keeps the stored
  value and ignores the one in the record; a new peer starts "unsynced", and deltas for
  it answer `NeedsSync` until `apply_full`.
- Deltas and full sets older than what is held answer `Applied(changed=False)`: flooded
  `_Z.ADJ` messages arrive more than once through redundant paths, and a duplicate must
  not trigger a resync.
- A delta for a peer the database does not know answers `NeedsSync` (the manual's flow
  shows `_Z.ADJ` from a new peer arriving before its `_Z.ADD`).
- Consistency compares link counts per pair of synced peers: A has as many links to B
  as B has to A. Peers that are referenced but unknown or not yet synced are listed
  apart, since their links cannot be checked yet.
- `is_consistent()` answers `consistency().ok` in O(1): the database keeps the link count
  per ordered pair, the pairs whose two directions differ and the referenced peers whose
  link set is not held, updated with every change (a node asks after every update while
  it converges; recounting every link each time made a 1,000-node start cubic).
- A peer's link set holds at most MAX_PEER_LINKS links (4,096: four times the largest
  mesh the Spark rollout builds, 1,024 nodes, each listing 1,023 links): a member's
  advert of more is trimmed, not refused, so the seqnos stay in step and no resync
  loops: a full set keeps its first MAX_PEER_LINKS by (tport id, peer bridge), the same
  on every node, and an added link past the cap advances the seqno without being held.
  `Applied.trimmed` says so (the router counts it, `rejects.link_cap`).
- The seqno sums (`show sync`) add every stored peer's seqno, this node's own included,
  modulo 2**64 so that they fit the heartbeat's 8-byte field.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from raims_node.linkstate.errors import InvalidRecord, UnknownPeer
from raims_node.linkstate.records import MAX_SEQNO, LinkRecord, PeerRecord

MAX_PEER_LINKS = 4096  # links held per peer (see the module doc)

_LinkKey = tuple[int, bytes]  # (tport_id, peer_bridge) within one peer's link set


@dataclass(frozen=True, slots=True)
class Applied:
    """The update is reflected in the database; `changed` says whether it changed it."""

    changed: bool
    trimmed: bool = False  # links past MAX_PEER_LINKS were not held


@dataclass(frozen=True, slots=True)
class NeedsSync:
    """A delta could not be applied: the database holds `have`, the delta is `got`."""

    bridge: bytes
    have: int
    got: int


@dataclass(frozen=True, slots=True)
class Inconsistency:
    """`bridge` lists `links` links to `peer_bridge`, which lists `reverse_links` back."""

    bridge: bytes
    peer_bridge: bytes
    links: int
    reverse_links: int


@dataclass(frozen=True, slots=True)
class ConsistencyReport:
    missing: tuple[Inconsistency, ...]
    unsynced: tuple[bytes, ...]  # referenced or stored peers whose link set is not held

    @property
    def ok(self) -> bool:
        return not self.missing and not self.unsynced


@dataclass(frozen=True, slots=True)
class SeqnoSums:
    link_sum: int
    sub_sum: int


class LinkStateDB:
    """Peer records and their advertised links, with a `version` bumped on every change."""

    def __init__(self) -> None:
        self._peers: dict[bytes, PeerRecord] = {}
        self._links: dict[bytes, dict[_LinkKey, LinkRecord]] = {}
        self._synced: set[bytes] = set()
        self._version = 0
        self._links_version = 0  # bumped when a link set changes (not a peer record alone)
        self._graph_version = 0  # ... or the peers or their ages (not a sub seqno alone)
        self._pair: Counter[tuple[bytes, bytes]] = Counter()  # links a -> b held
        self._mismatch: set[tuple[bytes, bytes]] = set()  # (lower, higher) pairs whose counts differ
        self._refs: Counter[bytes] = Counter()  # held links leading to each bridge
        self._bad_refs: set[bytes] = set()  # referenced but not synced (or not stored)
        self._sorted: dict[bytes, tuple[LinkRecord, ...]] = {}  # links(), until the set changes

    @property
    def version(self) -> int:
        return self._version

    @property
    def links_version(self) -> int:
        """Moves with every change of the links (what routes are made of)."""
        return self._links_version

    @property
    def graph_version(self) -> int:
        """Moves with what routes are computed from (routes.py): the links, the peers and
        their ages; not with a peer's sub seqno, which moves with every subscription
        announced (rebuilding the graph for each cost a burst of them ~1 ms a message)."""
        return self._graph_version

    def __len__(self) -> int:
        return len(self._peers)

    def __contains__(self, bridge: object) -> bool:
        return bridge in self._peers

    def peer(self, bridge: bytes) -> PeerRecord | None:
        return self._peers.get(bridge)

    def peers(self) -> tuple[PeerRecord, ...]:
        """All peers, oldest first."""
        return tuple(sorted(self._peers.values(), key=lambda p: p.age_key))

    def links(self, bridge: bytes) -> tuple[LinkRecord, ...]:
        """The links `bridge` advertised, by tport id then peer bridge."""
        cached = self._sorted.get(bridge)
        if cached is None:
            held = self._links.get(bridge, {})
            cached = self._sorted[bridge] = tuple(held[k] for k in sorted(held))
        return cached

    def referenced(self, bridge: bytes) -> bool:
        """Whether a held link leads to `bridge`."""
        return self._refs[bridge] > 0

    def is_synced(self, bridge: bytes) -> bool:
        """Whether the database holds the full link set of `bridge`."""
        return bridge in self._synced

    def put_peer(self, peer: PeerRecord) -> PeerRecord:
        """Add or update a peer; returns the stored record (its link seqno is the db's)."""
        old = self._peers.get(peer.bridge)
        stored = _with_link_seqno(peer, old.link_seqno if old is not None else 0)
        if stored != old:
            self._peers[peer.bridge] = stored
            self._version += 1
            if old is None or old.age_key != stored.age_key:
                self._graph_version += 1
        return stored

    def remove_peer(self, bridge: bytes) -> bool:
        """Drop a peer and the links it advertised; False when it was not stored."""
        if bridge not in self._peers:
            return False
        del self._peers[bridge]
        self._sorted.pop(bridge, None)
        for link in self._links.pop(bridge, {}).values():
            self._count(bridge, link.peer_bridge, -1)
        self._synced.discard(bridge)
        if self._refs[bridge] > 0:
            self._bad_refs.add(bridge)
        self._version += 1
        self._links_version += 1
        self._graph_version += 1
        return True

    def apply_full(self, bridge: bytes, link_seqno: int, links: Iterable[LinkRecord]) -> Applied:
        """Replace the link set of `bridge` with `links`, advertised at `link_seqno`."""
        peer = self._known(bridge)
        new = self._index(bridge, links)
        _check_seqno(link_seqno)
        trimmed = len(new) > MAX_PEER_LINKS
        if trimmed:
            new = {k: new[k] for k in sorted(new)[:MAX_PEER_LINKS]}
        synced = bridge in self._synced
        if synced and link_seqno < peer.link_seqno:
            return Applied(changed=False, trimmed=trimmed)
        if synced and link_seqno == peer.link_seqno and new == self._links.get(bridge, {}):
            return Applied(changed=False, trimmed=trimmed)
        for link in self._links.get(bridge, {}).values():
            self._count(bridge, link.peer_bridge, -1)
        for link in new.values():
            self._count(bridge, link.peer_bridge, 1)
        self._links[bridge] = new
        self._sorted.pop(bridge, None)
        self._synced.add(bridge)
        self._bad_refs.discard(bridge)
        self._peers[bridge] = _with_link_seqno(peer, link_seqno)
        self._version += 1
        self._links_version += 1
        self._graph_version += 1
        return Applied(changed=True, trimmed=trimmed)

    def apply_delta(
        self, bridge: bytes, link_seqno: int, add: bool, link: LinkRecord
    ) -> Applied | NeedsSync:
        """Add (or re-cost) or remove one link of `bridge`, the change numbered `link_seqno`."""
        _check_seqno(link_seqno)
        if link.bridge != bridge:
            raise InvalidRecord(f"link of {link.bridge.hex()} applied to {bridge.hex()}")
        peer = self._peers.get(bridge)
        if peer is None or bridge not in self._synced:
            return NeedsSync(bridge, 0 if peer is None else peer.link_seqno, link_seqno)
        if link_seqno <= peer.link_seqno:
            return Applied(changed=False)
        if link_seqno != peer.link_seqno + 1:
            return NeedsSync(bridge, peer.link_seqno, link_seqno)
        held = self._links.setdefault(bridge, {})
        self._sorted.pop(bridge, None)
        key = (link.tport_id, link.peer_bridge)
        old = held.pop(key, None)
        if old is not None:
            self._count(bridge, old.peer_bridge, -1)
        trimmed = add and len(held) >= MAX_PEER_LINKS
        if add and not trimmed:
            held[key] = link
            self._count(bridge, link.peer_bridge, 1)
        self._peers[bridge] = _with_link_seqno(peer, link_seqno)
        self._version += 1
        self._links_version += 1
        self._graph_version += 1
        return Applied(changed=True, trimmed=trimmed)

    def is_consistent(self) -> bool:
        """`consistency().ok`, kept up to date with every change."""
        return not self._mismatch and not self._bad_refs and len(self._synced) == len(self._peers)

    def _count(self, a: bytes, b: bytes, delta: int) -> None:
        """One link a -> b more (delta 1) or fewer (-1)."""
        pair = self._pair
        n = pair[(a, b)] + delta
        if n:
            pair[(a, b)] = n
        else:  # a count at 0 is forgotten: a peer's every incarnation is a new bridge
            del pair[(a, b)]
        key = (a, b) if a < b else (b, a)
        if n != pair[(b, a)]:
            self._mismatch.add(key)
        else:
            self._mismatch.discard(key)
        refs = self._refs
        r = refs[b] + delta
        if r:
            refs[b] = r
        else:
            del refs[b]
        if r > 0 and b not in self._synced:
            self._bad_refs.add(b)
        elif r <= 0:
            self._bad_refs.discard(b)

    def consistency(self) -> ConsistencyReport:
        """Pairs of synced peers whose link counts to each other differ, and unsynced peers."""
        counts: Counter[tuple[bytes, bytes]] = Counter()
        unsynced = {b for b in self._peers if b not in self._synced}
        for bridge in self._synced:
            for link in self._links.get(bridge, {}).values():
                if link.peer_bridge in self._synced:
                    counts[(bridge, link.peer_bridge)] += 1
                else:
                    unsynced.add(link.peer_bridge)
        age = {b: p.age_key for b, p in self._peers.items()}
        missing = []
        for (a, b), n in counts.items():
            back = counts.get((b, a), 0)
            # each pair once: from its older end, or from the only end that lists it
            if n != back and (back == 0 or age[a] < age[b]):
                missing.append(Inconsistency(a, b, n, back))
        missing.sort(key=lambda m: (age[m.bridge], age[m.peer_bridge]))
        ordered = sorted(unsynced, key=lambda b: age.get(b, (-1, b)))
        return ConsistencyReport(tuple(missing), tuple(ordered))

    def seqno_sums(self) -> SeqnoSums:
        link_sum = sum(p.link_seqno for p in self._peers.values()) & MAX_SEQNO
        sub_sum = sum(p.sub_seqno for p in self._peers.values()) & MAX_SEQNO
        return SeqnoSums(link_sum, sub_sum)

    def _known(self, bridge: bytes) -> PeerRecord:
        peer = self._peers.get(bridge)
        if peer is None:
            raise UnknownPeer(f"peer {bridge.hex()} is not in the link-state database")
        return peer

    @staticmethod
    def _index(bridge: bytes, links: Iterable[LinkRecord]) -> dict[_LinkKey, LinkRecord]:
        held: dict[_LinkKey, LinkRecord] = {}
        for link in links:
            if link.bridge != bridge:
                raise InvalidRecord(f"link of {link.bridge.hex()} in the set of {bridge.hex()}")
            held[(link.tport_id, link.peer_bridge)] = link
        return held


def _check_seqno(link_seqno: int) -> None:
    if not 0 <= link_seqno <= MAX_SEQNO:
        raise InvalidRecord(f"link_seqno {link_seqno} outside 0..{MAX_SEQNO}")


def _with_link_seqno(peer: PeerRecord, link_seqno: int) -> PeerRecord:
    """`replace(peer, link_seqno=...)` without its field introspection (a hot path while
    a network converges); the constructor still validates."""
    return PeerRecord(peer.bridge, peer.name, peer.start_ns, peer.sub_seqno, link_seqno, peer.bloom)
