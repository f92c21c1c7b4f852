"""Shortest-path engine over one snapshot of the link-state database (manual: "Multicast
routing", "The Forwarding Set", "Cost").

Works on integer node indices and numpy arrays so that `routes.RouteTable` can answer
for 1,000s of peers quickly; SciPy's csgraph Dijkstra computes the distances and the
choice among equal-cost alternatives is vectorized here.

The rules, identical on every node given the same database:
- Nodes are indexed by age: older start time first, then bridge bytes. The index is
  the peer's rank, so no ordering depends on insertion order.
- A link u->v is used only when v also lists a link to u (the manual's "consistent"
  link); links to peers not in the database are ignored.
- Path p measures every link with its cost[p]. For each source s, the tree T(s, p)
  gives every reachable node v one parent link: among the links u->v that lie on a
  shortest path (dist(s,u) + cost[p](u->v) == dist(s,v)), ranked by the age of the
  forwarder u (older first) and then its tport id, path p takes candidate p mod k of
  the k candidates. So with two equal routes paths 0 and 2 take the older forwarder's
  and paths 1 and 3 the other's (the manual's dyna/ruby/bond/chex square), at most 4
  ranked alternatives are ever used, and every choice is made per node, which keeps
  the union of choices a tree: a message flooded along T(s, p) reaches every node
  exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from raims_node.linkstate.db import LinkStateDB
from raims_node.linkstate.records import NUM_PATHS, LinkRecord

# numpy and scipy are imported when the first route is computed (numpy ~60 ms, scipy about
# half a second of imports a node does not need to start accepting clients, issue 23; the
# daemon warms both up in a thread after its listeners start).
if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from scipy.sparse import csr_array

    IntArray = npt.NDArray[np.int64]
    FloatArray = npt.NDArray[np.float64]
    BoolArray = npt.NDArray[np.bool_]

NO_NODE = -1


@dataclass(frozen=True, slots=True)
class Tree:
    """T(source, p): `dist` per node (inf when unreachable), `parent_edge` per node
    (an edge index of the graph, NO_NODE for the source and unreachable nodes)."""

    dist: FloatArray
    parent_edge: IntArray


class LinkGraph:
    """Edge arrays of one database snapshot, edges sorted by (head, forwarder, tport id)."""

    def __init__(self, db: LinkStateDB) -> None:
        import numpy as np

        peers = db.peers()
        self.bridges: tuple[bytes, ...] = tuple(p.bridge for p in peers)
        self.index: dict[bytes, int] = {b: i for i, b in enumerate(self.bridges)}
        n = self.n = len(self.bridges)
        recs: list[LinkRecord] = []
        tail: list[int] = []
        head: list[int] = []
        for i, bridge in enumerate(self.bridges):
            for link in db.links(bridge):
                j = self.index.get(link.peer_bridge)
                if j is not None:
                    recs.append(link)
                    tail.append(i)
                    head.append(j)
        eu = np.asarray(tail, dtype=np.int64)
        ev = np.asarray(head, dtype=np.int64)
        tid = np.asarray([r.tport_id for r in recs], dtype=np.int64)
        cost = np.asarray([r.cost for r in recs], dtype=np.float64).reshape(-1, NUM_PATHS)
        keep = np.isin(ev * n + eu, eu * n + ev)
        order = np.lexsort((tid[keep], eu[keep], ev[keep]))
        kept = np.flatnonzero(keep)[order]
        self.links: tuple[LinkRecord, ...] = tuple(recs[k] for k in kept)
        self.eu: IntArray = eu[kept]
        self.ev: IntArray = ev[kept]
        self.cost: FloatArray = cost[kept]
        # in-edges of v are edges vstart[v] .. vstart[v+1]-1, best ranked first
        self.vstart: IntArray = np.searchsorted(self.ev, np.arange(n + 1)).astype(np.int64)
        self._group_lo = self.vstart[self.ev]
        self._group_hi = self.vstart[self.ev + 1]
        self._matrices: dict[int, tuple[csr_array, csr_array]] = {}

    def _matrix(self, p: int, reverse: bool = False) -> csr_array:
        """Adjacency matrix of path p; parallel links collapse to their lowest cost."""
        if p not in self._matrices:
            import numpy as np
            from scipy.sparse import csr_array

            n, c = self.n, self.cost[:, p]
            key = self.eu * n + self.ev
            order = np.lexsort((c, key))
            first = np.ones(order.size, dtype=bool)
            first[1:] = key[order][1:] != key[order][:-1]
            sel = order[first]
            m = csr_array((c[sel], (self.eu[sel], self.ev[sel])), shape=(n, n))
            self._matrices[p] = (m, csr_array(m.T))
        return self._matrices[p][1 if reverse else 0]

    def tree(self, source: int, p: int) -> Tree:
        import numpy as np
        from scipy.sparse.csgraph import dijkstra

        dist = np.asarray(dijkstra(self._matrix(p), directed=True, indices=source))
        dist_head = dist[self.ev]
        tight = (dist[self.eu] + self.cost[:, p] == dist_head) & np.isfinite(dist_head)
        chosen = _pick(tight, self._group_lo, self._group_hi, p)
        parent_edge = np.full(self.n, NO_NODE, dtype=np.int64)
        picked = np.flatnonzero(chosen)
        parent_edge[self.ev[picked]] = picked
        return Tree(dist, parent_edge)

    def parents(self, tree: Tree) -> IntArray:
        """Parent node of each node in the tree, NO_NODE for its root and unreached nodes."""
        import numpy as np

        pe = tree.parent_edge
        parent = np.full(self.n, NO_NODE, dtype=np.int64)
        has = pe >= 0
        parent[has] = self.eu[pe[has]]
        return parent

    def branches(self, tree: Tree, root: int) -> IntArray:
        """For every node below `root` in the tree, the edge from `root` it descends
        through; NO_NODE elsewhere. Pointer jumping: log(depth) vectorized rounds."""
        import numpy as np

        anc = self.parents(tree)
        label = np.where(anc == root, tree.parent_edge, NO_NODE)
        while True:
            need = np.flatnonzero((label < 0) & (anc >= 0))
            if need.size == 0:
                return label
            up = anc[need]
            label[need] = label[up]
            anc[need] = anc[up]

    def forward_all(self, me: int, p: int) -> tuple[IntArray, IntArray]:
        """The child edges of `me` in T(s, p) for every source s, as parallel arrays
        (sources, edges) sorted by source then edge. Needs one reverse Dijkstra per node
        around `me` instead of one per source."""
        import numpy as np
        from scipy.sparse.csgraph import dijkstra

        out = np.flatnonzero(self.eu == me)
        heads = np.unique(self.ev[out])
        spans = [(int(self.vstart[v]), int(self.vstart[v + 1])) for v in heads]
        needed = np.unique(np.concatenate([heads] + [self.eu[lo:hi] for lo, hi in spans]))
        if needed.size == 0:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty
        to = np.atleast_2d(dijkstra(self._matrix(p, reverse=True), directed=True, indices=needed))
        row = {int(x): i for i, x in enumerate(needed)}
        srcs: list[IntArray] = []
        edges: list[IntArray] = []
        for v, (lo, hi) in zip(heads, spans, strict=True):
            group = np.arange(lo, hi)
            # rows: sources, columns: the in-edges of v, best ranked first
            via = to[[row[int(u)] for u in self.eu[group]]].T + self.cost[group, p]
            dist_head = to[row[int(v)]][:, None]
            tight = (via == dist_head) & np.isfinite(dist_head)
            edge_lo = np.zeros(group.size, dtype=np.int64)
            chosen = _pick(tight, edge_lo, edge_lo + group.size, p)
            for g in group[self.eu[group] == me]:
                s = np.flatnonzero(chosen[:, g - lo])
                srcs.append(s)
                edges.append(np.full(s.size, g, dtype=np.int64))
        s_all = np.concatenate(srcs) if srcs else np.zeros(0, dtype=np.int64)
        e_all = np.concatenate(edges) if edges else np.zeros(0, dtype=np.int64)
        order = np.lexsort((e_all, s_all))
        return s_all[order], e_all[order]


def _pick(tight: BoolArray, lo: IntArray, hi: IntArray, p: int) -> BoolArray:
    """Which edge (last axis) path p takes as the parent link of its head: candidate
    p mod k of the k tight edges of its group [lo, hi), counted in rank order."""
    import numpy as np

    t = tight.astype(np.int64)
    incl = np.cumsum(t, axis=-1)
    excl = incl - t
    base = excl[..., lo]
    k = incl[..., hi - 1] - base
    return tight & (excl - base == p % np.maximum(k, 1))
