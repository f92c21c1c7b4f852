"""Routes and forwarding sets of one node (manual: "Multicast routing", "The Forwarding
Set", "Cost"; console "show path", "show tree", "show forward", "show routes").

`RouteTable(db, self_bridge)` answers from the database as it is now: it recomputes
whenever `db.graph_version` has moved, and otherwise reuses what it computed. The rules are
those of `spf` (shortest paths per path index, equal-cost alternatives ranked by the
forwarder's age, path p taking alternative p mod k).

- Inbox: `next_hops(dest, p)` is where this node sends a point-to-point message.
- Multicast: `forward_links(source, p)` is reverse-path forwarding, the links of this
  node that carry a message from `source` on path p down T(source, p); pruned by bloom
  filters when `peer_matches` is given, a link is kept only when some peer in the
  subtree behind it matches.

Decisions where the manual is vague:
- The path a message takes is chosen by its subject hash: `path_for_hash(h) = h mod 4`.
- `next_hops` lists every equal-cost first hop, the one path p takes first: the router
  sends on the first and may fall back on the others while the database catches up.
- Unknown or unreachable destinations and sources have no route (empty answers), since
  the router asks about peers it has just heard of before their links arrive.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from raims_node.linkstate.db import LinkStateDB
from raims_node.linkstate.errors import InvalidPath, UnknownPeer
from raims_node.linkstate.records import NUM_PATHS, LinkRecord
from raims_node.linkstate.spf import LinkGraph, Tree

if TYPE_CHECKING:  # numpy is imported on the first route computed (spf.py)
    from raims_node.linkstate.spf import IntArray

MAX_CACHED_TREES = 1024


def path_for_hash(subject_hash: int) -> int:
    """The multicast path (0..3) a message with this subject hash takes."""
    return subject_hash % NUM_PATHS


@dataclass(frozen=True, slots=True)
class Route:
    """This node reaches `dest` through `link` at total cost `cost` (`show path`)."""

    dest: bytes
    link: LinkRecord
    cost: int


@dataclass(frozen=True, slots=True)
class TreeEdge:
    """In a multicast tree, `src` forwards on `link` to `dest`, reached at `cost`."""

    src: bytes
    link: LinkRecord
    dest: bytes
    cost: int


class _Entry:
    """One cached tree and what was derived from it for this node."""

    __slots__ = ("tree", "forward", "subtrees")

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self.forward: tuple[int, ...] | None = None
        self.subtrees: dict[int, tuple[bytes, ...]] | None = None


class RouteTable:
    """Routes and forwarding sets of `self_bridge`, recomputed per database version."""

    def __init__(self, db: LinkStateDB, self_bridge: bytes) -> None:
        self._db = db
        self._self_bridge = self_bridge
        self._version = -1
        self._g: LinkGraph | None = None
        self._me = 0
        self._trees: OrderedDict[tuple[int, int], _Entry] = OrderedDict()
        self._hops: dict[int, IntArray] = {}
        self._fwd: dict[int, Mapping[bytes, tuple[LinkRecord, ...]]] = {}

    @property
    def self_bridge(self) -> bytes:
        return self._self_bridge

    def cache_sizes(self) -> dict[str, int]:
        """Entries held (show cache): shortest-path trees, next-hop tables, forwarding sets."""
        return {"trees": len(self._trees), "next_hops": len(self._hops), "forward_sets": len(self._fwd)}

    def next_hops(self, dest: bytes, path: int) -> tuple[LinkRecord, ...]:
        """Links of this node starting a shortest path to `dest` under path's costs: the
        one path `path` takes first, then the other equal-cost first hops by the age of
        the neighbor they lead to, then tport id."""
        _check_path(path)
        g = self._graph()
        d = g.index.get(dest)
        if d is None or d == self._me:
            return ()
        first = int(self._first_hops(path)[d])
        if first < 0:
            return ()
        dist = self._entry(self._me, path).tree.dist
        # walk the shortest-path DAG back from dest to collect the other first hops
        others: set[int] = set()
        seen = {d}
        stack = [d]
        while stack:
            v = stack.pop()
            for e in range(int(g.vstart[v]), int(g.vstart[v + 1])):
                u = int(g.eu[e])
                if dist[u] + g.cost[e, path] != dist[v]:
                    continue
                if u == self._me:
                    others.add(e)
                elif u not in seen:
                    seen.add(u)
                    stack.append(u)
        others.discard(first)
        return (g.links[first], *(g.links[e] for e in sorted(others)))

    def routes(self, path: int) -> tuple[Route, ...]:
        """The route to every reachable peer, nearest first (`show path`)."""
        import numpy as np

        _check_path(path)
        g = self._graph()
        hops = self._first_hops(path)
        dist = self._entry(self._me, path).tree.dist
        reached = np.flatnonzero(hops >= 0)
        reached = reached[np.lexsort((reached, dist[reached]))]
        return tuple(
            Route(g.bridges[v], g.links[hops[v]], int(dist[v])) for v in reached.tolist()
        )

    def path_cost(self, dest: bytes, path: int, source: bytes | None = None) -> int | None:
        """Cost of the shortest path from `source` (default this node) to `dest`."""
        _check_path(path)
        g = self._graph()
        s = self._me if source is None else g.index.get(source)
        d = g.index.get(dest)
        if s is None or d is None:
            return None
        cost = self._entry(s, path).tree.dist[d]
        return int(cost) if math.isfinite(cost) else None

    def tree(self, source: bytes, path: int) -> tuple[TreeEdge, ...]:
        """The edges of T(source, path), by cost reached, then forwarder and receiver age."""
        _check_path(path)
        g = self._graph()
        s = g.index.get(source)
        if s is None:
            return ()
        import numpy as np

        t = self._entry(s, path).tree
        dests = np.flatnonzero(t.parent_edge >= 0)
        edges = t.parent_edge[dests]
        order = np.lexsort((dests, g.eu[edges], t.dist[dests]))
        return tuple(
            TreeEdge(g.bridges[g.eu[e]], g.links[e], g.bridges[v], int(t.dist[v]))
            for v, e in zip(dests[order].tolist(), edges[order].tolist(), strict=True)
        )

    def forward_links(
        self,
        source: bytes,
        path: int,
        peer_matches: Callable[[bytes], bool] | None = None,
    ) -> tuple[LinkRecord, ...]:
        """The links of this node on which a multicast from `source` on `path` goes on.
        With `peer_matches`, only links with a matching peer somewhere behind them."""
        _check_path(path)
        g = self._graph()
        s = g.index.get(source)
        if s is None:
            return ()
        if peer_matches is None and path in self._fwd:
            return self._fwd[path].get(source, ())
        entry = self._entry(s, path)
        if entry.forward is None:
            pe = entry.tree.parent_edge
            mine = pe[pe >= 0]
            entry.forward = tuple(sorted(mine[g.eu[mine] == self._me].tolist()))
        if peer_matches is None:
            return tuple(g.links[e] for e in entry.forward)
        if entry.subtrees is None:
            import numpy as np

            label = g.branches(entry.tree, self._me)
            entry.subtrees = {
                e: tuple(g.bridges[v] for v in np.flatnonzero(label == e).tolist())
                for e in entry.forward
            }
        return tuple(
            g.links[e]
            for e in entry.forward
            if any(peer_matches(b) for b in entry.subtrees[e])
        )

    def forward_table(self, path: int) -> Mapping[bytes, tuple[LinkRecord, ...]]:
        """`forward_links` without pruning for every source at once (`show forward`);
        sources this node does not forward for map to ()."""
        _check_path(path)
        g = self._graph()
        if path not in self._fwd:
            import numpy as np

            srcs, edges = g.forward_all(self._me, path)
            table: dict[bytes, tuple[LinkRecord, ...]] = dict.fromkeys(g.bridges, ())
            s_list, e_list = srcs.tolist(), edges.tolist()
            starts = np.flatnonzero(np.diff(srcs, prepend=-1)).tolist()
            ends = [*starts[1:], len(s_list)] if starts else []  # a node without links forwards nothing
            for lo, hi in zip(starts, ends, strict=True):
                table[g.bridges[s_list[lo]]] = tuple(g.links[e] for e in e_list[lo:hi])
            self._fwd[path] = MappingProxyType(table)
        return self._fwd[path]

    def _graph(self) -> LinkGraph:
        if self._g is None or self._version != self._db.graph_version:
            g = LinkGraph(self._db)
            me = g.index.get(self._self_bridge)
            if me is None:
                raise UnknownPeer(
                    f"this node {self._self_bridge.hex()} is not in the link-state database"
                )
            self._g, self._me, self._version = g, me, self._db.graph_version
            self._trees.clear()
            self._hops.clear()
            self._fwd.clear()
        return self._g

    def _entry(self, source: int, path: int) -> _Entry:
        key = (source, path)
        entry = self._trees.get(key)
        if entry is None:
            assert self._g is not None
            entry = self._trees[key] = _Entry(self._g.tree(source, path))
            if len(self._trees) > MAX_CACHED_TREES:
                self._trees.popitem(last=False)
        else:
            self._trees.move_to_end(key)
        return entry

    def _first_hops(self, path: int) -> IntArray:
        """Per node, the edge of this node its route on `path` starts with (-1: none)."""
        if path not in self._hops:
            assert self._g is not None
            self._hops[path] = self._g.branches(self._entry(self._me, path).tree, self._me)
        return self._hops[path]


def _check_path(path: int) -> None:
    if not isinstance(path, int) or not 0 <= path < NUM_PATHS:
        raise InvalidPath(f"path {path!r} outside 0..{NUM_PATHS - 1}")
