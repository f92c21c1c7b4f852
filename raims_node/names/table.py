"""The node-local instance of the distributed naming table (seed 002, 2.2.4-2.2.10).

A publication is a name sequence `{type, lower, upper}` bound to a port, with the
publishing scope, the node it lives on and a key unique on that node. The table holds
this node's own publications (every scope) and the cluster/zone publications replicated
from the other nodes (replication.py); node-scope names of other nodes never arrive.

Decisions where the draft is vague:
- Scopes keep the draft's values (zone 1, cluster 2, node 3). A raims node belongs to one
  service's network, so cluster and zone publications are visible on the same nodes and
  the cluster and zone lookup domains select from the same set; the scope is kept on
  every record so that a daemon joining several networks could carry zone names further.
- Partial overlap (2.2.5) is refused at bind time against the publications this node
  sees: a new sequence must equal or be disjoint from every sequence of its type. Two
  nodes binding at the same instant may still race; lookups stay correct with such
  records (every containing publication is a candidate), only the round-robin step is
  then per sequence of the first match.
- Lookup domains (2.2.8): `node` (this node) or a node of the network (its user name),
  `cluster`, `zone`, and the nearest `<0.0.0>` (also written `0` or empty): this node
  first, then the cluster, then the zone. Round-robin (2.2.8's "stepping the root pointer
  to a circular list") keeps one turn counter per (sequence, domain); the candidates are
  the matching publications in the order they entered the table, so k publications and
  k*m lookups choose each of them exactly m times while the set stays the same.
- Instances are 32-bit unsigned integers like the draft's.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum

from raims_node.names.errors import BadRequest, LimitExceeded, PartialOverlap
from raims_node.turns import Turns

MAX_INSTANCE = 0xFFFFFFFF
MAX_PUBLICATIONS = 1_000_000  # in one table, all nodes together
NEAREST = "<0.0.0>"


class Scope(IntEnum):
    """Publishing scope (draft 2.2.7), with its values."""

    ZONE = 1
    CLUSTER = 2
    NODE = 3

    @classmethod
    def parse(cls, value: object) -> Scope:
        """A scope from a request: a name (`node`, `cluster`, `zone`) or the draft's number;
        None means the default, cluster."""
        if value is None:
            return cls.CLUSTER
        if isinstance(value, str) and value.upper() in cls.__members__:
            return cls[value.upper()]
        if isinstance(value, int) and not isinstance(value, bool) and value in (1, 2, 3):
            return cls(value)
        raise BadRequest(f"scope {value!r} is not node, cluster or zone")


@dataclass(frozen=True, slots=True)
class Publication:
    """One bound name sequence. `node` is the bridge id of the node the port is on,
    `user` that node's name, `inbox` the port's subject inside the network (the binding
    client's inbox, service prefix included; empty for the node's own type 0 name)."""

    type: int
    lower: int
    upper: int
    scope: Scope
    node: bytes
    port: int
    key: int
    inbox: str
    user: str = ""

    @property
    def ident(self) -> tuple[bytes, int]:
        return (self.node, self.key)

    def overlaps(self, lower: int, upper: int) -> bool:
        return self.lower <= upper and self.upper >= lower


def check_instance(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_INSTANCE:
        raise BadRequest(f"{name} {value!r} is not an integer in 0..{MAX_INSTANCE}")
    return value


def check_range(lower: object, upper: object) -> tuple[int, int]:
    lo, up = check_instance("lower", lower), check_instance("upper", upper)
    if lo > up:
        raise BadRequest(f"lower {lo} is above upper {up}")
    return lo, up


@dataclass(frozen=True, slots=True)
class Domain:
    """A lookup domain: kind is nearest, node, cluster or zone; `node` names the node
    of a node domain."""

    kind: str
    node: bytes | None = None


class _TypeIndex:
    """The publications of one name type, grouped by sequence; `bounds` is sorted so
    that the sequences overlapping a range are found by bisection (`width` is an upper
    bound of upper - lower over them)."""

    __slots__ = ("bounds", "groups", "width")

    def __init__(self) -> None:
        self.groups: dict[tuple[int, int], list[Publication]] = {}
        self.bounds: list[tuple[int, int]] = []
        self.width = 0

    def add(self, pub: Publication) -> None:
        seq = (pub.lower, pub.upper)
        group = self.groups.get(seq)
        if group is None:
            group = self.groups[seq] = []
            insort(self.bounds, seq)
            self.width = max(self.width, pub.upper - pub.lower)
        group.append(pub)

    def remove(self, pub: Publication) -> None:
        seq = (pub.lower, pub.upper)
        group = self.groups.get(seq)
        if group is None:
            return
        group[:] = [p for p in group if p.ident != pub.ident]
        if not group:
            del self.groups[seq]
            del self.bounds[bisect_left(self.bounds, seq)]

    def sequences(self, lower: int, upper: int) -> Iterator[tuple[int, int]]:
        """The sequences overlapping [lower, upper], in order."""
        bounds = self.bounds
        lo = bisect_left(bounds, (lower - self.width, -1))
        hi = bisect_right(bounds, (upper, MAX_INSTANCE + 1))
        for i in range(lo, hi):
            seq = bounds[i]
            if seq[1] >= lower:
                yield seq


class NameTable:
    def __init__(self, self_node: bytes) -> None:
        self.self_node = self_node
        self._pubs: dict[tuple[bytes, int], Publication] = {}
        self._by_node: dict[bytes, dict[int, Publication]] = {}
        self._types: dict[int, _TypeIndex] = {}
        self._turns: Turns[tuple[int, int, int, str, bytes | None]] = Turns()  # names come and go
        self.lookups = 0
        self.lookup_misses = 0

    def __len__(self) -> int:
        return len(self._pubs)

    def __iter__(self) -> Iterator[Publication]:
        return iter(self._pubs.values())

    def get(self, node: bytes, key: int) -> Publication | None:
        return self._pubs.get((node, key))

    # ------------------------------------------------------------------ changes

    def add(self, pub: Publication) -> bool:
        """Add `pub`; False when a publication with its (node, key) is already held."""
        if pub.ident in self._pubs:
            return False
        if len(self._pubs) >= MAX_PUBLICATIONS:
            raise LimitExceeded(f"naming table holds {len(self._pubs)} publications, the limit")
        self._pubs[pub.ident] = pub
        self._by_node.setdefault(pub.node, {})[pub.key] = pub
        index = self._types.get(pub.type)
        if index is None:
            index = self._types[pub.type] = _TypeIndex()
        index.add(pub)
        return True

    def remove(self, node: bytes, key: int) -> Publication | None:
        pub = self._pubs.pop((node, key), None)
        if pub is not None:
            mine = self._by_node[node]
            del mine[key]
            if not mine:
                del self._by_node[node]
            index = self._types[pub.type]
            index.remove(pub)
            if not index.groups:
                del self._types[pub.type]
        return pub

    def of_node(self, node: bytes) -> list[Publication]:
        return list(self._by_node.get(node, {}).values())

    def remove_node(self, node: bytes) -> list[Publication]:
        """Withdraw everything `node` published (it left or was declared down)."""
        gone = self.of_node(node)
        for pub in gone:
            self.remove(pub.node, pub.key)
        return gone

    # ------------------------------------------------------------------ queries

    def overlapping(self, type_: int, lower: int, upper: int) -> list[Publication]:
        """Every publication of `type_` whose sequence overlaps [lower, upper]."""
        index = self._types.get(type_)
        if index is None:
            return []
        return [p for seq in index.sequences(lower, upper) for p in index.groups[seq]]

    def check_bind(self, type_: int, lower: int, upper: int) -> None:
        """PartialOverlap unless [lower, upper] equals or misses every sequence of `type_`."""
        index = self._types.get(type_)
        if index is None:
            return
        for seq in index.sequences(lower, upper):
            if seq != (lower, upper):
                raise PartialOverlap(f"{{{type_}, {lower}, {upper}}} partially overlaps "
                                     f"{{{type_}, {seq[0]}, {seq[1]}}}")

    def lookup(self, type_: int, instance: int, domain: Domain) -> Publication | None:
        """The publication a message to {type_, instance} goes to (module docstring), or
        None when nothing matches in the domain."""
        self.lookups += 1
        index = self._types.get(type_)
        if index is not None:
            if domain.kind == "nearest":
                for kind, node in (("node", self.self_node), ("cluster", None), ("zone", None)):
                    found = self._choose(index, type_, instance, kind, node)
                    if found is not None:
                        return found
            else:
                found = self._choose(index, type_, instance, domain.kind,
                                     self.self_node if domain.kind == "node" and domain.node is None else domain.node)
                if found is not None:
                    return found
        self.lookup_misses += 1
        return None

    def _choose(self, index: _TypeIndex, type_: int, instance: int, kind: str,
                node: bytes | None) -> Publication | None:
        cands: list[Publication] = []
        first: tuple[int, int] | None = None
        for seq in index.sequences(instance, instance):
            group = index.groups[seq]
            if node is not None:
                group = [p for p in group if p.node == node]
            if group and first is None:
                first = seq
            cands += group
        if first is None:
            return None
        if len(cands) == 1:
            return cands[0]
        return cands[self._turns.next((type_, first[0], first[1], kind, node)) % len(cands)]

    def ports(self, type_: int, lower: int, upper: int) -> list[Publication]:
        """One publication per distinct port bound to a sequence overlapping [lower, upper]
        (draft 2.2.6: one replica per port however many of its sequences overlap)."""
        seen: set[tuple[bytes, int]] = set()
        out: list[Publication] = []
        for pub in self.overlapping(type_, lower, upper):
            port = (pub.node, pub.port)
            if port not in seen:
                seen.add(port)
                out.append(pub)
        return out

    def rows(self, of: Iterable[Publication] | None = None) -> list[dict[str, object]]:
        pubs = sorted(self._pubs.values() if of is None else of,
                      key=lambda p: (p.type, p.lower, p.upper, p.user, p.port, p.key))
        return [{"type": p.type, "lower": p.lower, "upper": p.upper, "scope": p.scope.name.lower(),
                 "node": p.user, "port": p.port} for p in pubs]
