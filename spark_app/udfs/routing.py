"""Routing audit: recompute every node's routes and forwarding trees from the reference
link-state database, independently of the router's code, and compare with what the
nodes reported.

Manual "Link State" / "The Forwarding Set" ("a forwarding set instructs the node where
to send a message so that all subscribers of it will see the message exactly one time";
equal-cost routes "ranked in order of peer age ... the top 4 ranked routes are saved as
the forwarding sets"), "Cost" (a cost per path), and the rules the router documents in
raims_node/linkstate/spf.py, reimplemented here with NumPy and SciPy's csgraph only:
- a link u->v is used only when v also lists a link to u; parallel links weigh their
  lowest cost; path p weighs every link with its p-th cost (cost, cost2, cost3, cost4);
- the tree T(s, p) gives every node v reachable from s one parent link: among the links
  u->v on a shortest path (dist(s, u) + cost_p(u->v) == dist(s, v)), ranked by the age of
  the forwarder u (older start first, then bridge bytes) and then its tport id, path p
  takes candidate number p mod k of the k candidates;
- a node's next hop to d on path p is its link that starts the way to d down T(self, p);
  its forwarding set for source s on path p is its links in T(s, p).

Compared with the reported rows (`show routes` P = 0, `show forward P`):
- next_hop: per (node, peer, path) the link whose `path` list holds the path index. The
  console lists only routes that are loop-free under path 0's costs (`show routes` P = 0),
  so another path's first hop may be listed by no row: such a path is not reported, and
  not compared;
- route_cost: per (node, peer) the cost of the row holding path 0 (its shortest cost);
- tree_edge: per (node, source, path) the set of links the node forwards on;
- tree_coverage: when every node reported its forwarding sets, the union of the reported
  pieces of T(s, p) must reach every node exactly once from s (a node missed, or reached
  twice, names the tree; a wrong tree edge shows as its tree_edge row and this one). A
  node that lists no set for s forwards nothing for it. Trees whose every piece is as
  expected are the expected trees, which cover by construction, so only the others are
  flooded;
- partition: the reference database does not connect every node (path 0, once).

Decisions where the manual is vague:
- Work is split by (snapshot, path, chunk of sources): a group recomputes T(s, p) for the
  sources `labels.chunk_of` gives its chunk and receives the rows about them (a node's
  routes are about the tree rooted at the node; its forwarding rows about the tree of
  their source). Dijkstra runs on batches of sources sized to bound memory.
- Ages come from the lake's microsecond timestamps: two peers started within the same
  microsecond rank by bridge here, possibly unlike the router (nanoseconds).
- A link is named by its tport label, or by (tport, adj) when the reported rows of a
  group name neighbours (`show routes` / `show forward` have an `adj` column): on a mesh
  every link of a node shares one tport label, and only the neighbour tells its tree
  edges apart.
- A node's forwarding rows are compared only for the sources it lists (an unknown source
  is an LSDB finding); dests unknown to the reference have no expected route.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.sparse import coo_array, csr_array
from scipy.sparse.csgraph import breadth_first_order, connected_components, dijkstra

from spark_app.udfs.frames import (
    SNAPSHOT_NODE,
    ddl,
    empty_frame,
    finding_rows,
    kernel_schema_ddl,
    typed,
    with_summary,
)
from spark_app.udfs.labels import chunk_of, peer_names, tport_ids
from spark_app.udfs.lsdb import COST_COLUMNS, LINK_KIND, NODE_KIND, NUM_PATHS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TABLE: Final = "audit_routes"
HOP: Final = "hop"
FWD: Final = "fwd"
NO_EDGE: Final = -1
BATCH_CELLS: Final = 1 << 22  # sources x edges per Dijkstra batch (~32 MB an array)
MAX_LISTED: Final = 20  # node names a tree_coverage row lists
REPORTED_COLUMNS: Final = (
    ("snapshot_id", "string"),
    ("kind", "string"),
    ("observer", "string"),
    ("target", "string"),
    ("path", "int"),
    ("tport", "string"),
    ("adj", "string"),
    ("cost", "long"),
    ("chunk", "int"),
)

Ints = npt.NDArray[np.int64]


def hop_rows(routes: pd.DataFrame, chunks: int = 1) -> pd.DataFrame:
    """`show routes` rows as one reported next hop per (row, path): the row's tport and
    cost for the paths its `path` list holds, null for the others (a row still says that
    its node knows the peer). A node's routes go to its own chunk (its tree's)."""
    listed = np.zeros(len(routes), dtype=np.int64)  # bit q: the row lists path q
    exploded = routes["path"].reset_index(drop=True).explode().dropna()
    if len(exploded):
        np.bitwise_or.at(listed, exploded.index.to_numpy(), 1 << exploded.to_numpy(dtype=np.int64))
    observer = routes["node"].to_numpy(dtype=object)
    common = {
        "snapshot_id": routes["snapshot_id"].to_numpy(dtype=object),
        "kind": HOP,
        "observer": observer,
        "target": peer_names(routes["user"]),
        "chunk": chunk_of(observer, chunks),
    }
    tport = routes["tport"].to_numpy(dtype=object)
    adj = _adj(routes)
    cost = pd.Series(pd.array(routes["cost"], dtype="Int64"))
    frames = []
    for p in range(NUM_PATHS):
        on = (listed >> p) & 1 == 1
        frames.append(
            pd.DataFrame(
                {**common, "path": p, "tport": np.where(on, tport, None), "adj": np.where(on, adj, np.full(len(adj), None, dtype=object)),
                 "cost": cost.where(on, pd.NA)}
            )
        )
    return typed(pd.concat(frames, ignore_index=True), REPORTED_COLUMNS)


def forward_rows(forward: pd.DataFrame, chunks: int = 1) -> pd.DataFrame:
    """`show forward P` rows as reported forwarding links, in their source's chunk."""
    source = peer_names(forward["source"])
    return typed(
        pd.DataFrame(
            {
                "snapshot_id": forward["snapshot_id"].to_numpy(dtype=object),
                "kind": FWD,
                "observer": forward["node"].to_numpy(dtype=object),
                "target": source,
                "path": forward["path"].to_numpy(),
                "tport": forward["tport"].to_numpy(dtype=object),
                "adj": _adj(forward),
                "cost": pd.array(forward["cost"], dtype="Int64"),
                "chunk": chunk_of(source, chunks),
            }
        ),
        REPORTED_COLUMNS,
    )


def _adj(rows: pd.DataFrame) -> npt.NDArray[np.object_]:
    """The neighbour (user name) of each row's link; None where the rows do not say
    (snapshots collected before the console named it)."""
    if "adj" not in rows.columns:
        return np.full(len(rows), None, dtype=object)
    return peer_names(rows["adj"])


def _with_adj(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows whose link label is `tport>adj` where the neighbour is known."""
    has = (rows["tport"].notna() & rows["adj"].notna()).to_numpy(dtype=bool)
    if not has.any():
        return rows
    tport = rows["tport"].to_numpy(dtype=object).copy()
    tport[has] = rows["tport"].to_numpy(dtype=object)[has] + ">" + rows["adj"].to_numpy(dtype=object)[has]
    return rows.assign(tport=tport)


def _bridge_bytes(text: object) -> bytes:
    if not isinstance(text, str):
        return b""
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        return text.encode()


class Graph:
    """The reference database as edge arrays for path p, nodes indexed by age."""

    def __init__(self, reference: pd.DataFrame, path: int) -> None:
        is_node = (reference["kind"] == NODE_KIND).to_numpy()
        nodes = reference[is_node]
        start = pd.array(nodes["start"], dtype="Int64").fillna(np.iinfo(np.int64).max)
        bridges = [_bridge_bytes(b) for b in nodes["bridge"]]
        rank = sorted(range(len(nodes)), key=lambda i: (int(start[i]), bridges[i]))
        self.names: npt.NDArray[np.object_] = nodes["peer"].to_numpy(dtype=object)[rank]
        self.n = n = len(self.names)
        self.lookup = pd.Index(self.names)
        links = reference[(reference["kind"] == LINK_KIND).to_numpy()]
        u = self.lookup.get_indexer(links["peer"])
        v = self.lookup.get_indexer(links["adj"])
        known = (u >= 0) & (v >= 0)
        base = pd.array(links["cost"], dtype="Int64")
        column = COST_COLUMNS[path]
        cost = (pd.array(links[column], dtype="Int64").fillna(base) if path else base)
        cost_f = cost.to_numpy(dtype=np.float64, na_value=np.inf)
        labels = links["tport"].to_numpy(dtype=object)
        u, v, cost_f, labels = u[known], v[known], cost_f[known], labels[known]
        # every advertised link, used or not, takes a reported forwarding row somewhere
        self._every_head = pd.DataFrame({"u": u, "label": labels, "v": v})
        self._advertised = self._every_head.drop_duplicates(["u", "label"])
        back = np.isin(u * n + v, v * n + u)
        u, v, cost_f, labels = u[back], v[back], cost_f[back], labels[back]
        tid = tport_ids(labels)
        order = np.lexsort((tid, u, v))  # in-edges of each head, best ranked first
        self.eu: Ints = u[order].astype(np.int64)
        self.ev: Ints = v[order].astype(np.int64)
        self.cost = cost_f[order]
        self.labels = labels[order]
        self._adj_labels = self.labels + ">" + self.names[self.ev]
        self.group_lo: Ints = np.searchsorted(self.ev, self.ev, side="left").astype(np.int64)
        self.group_hi: Ints = np.searchsorted(self.ev, self.ev, side="right").astype(np.int64)
        lowest = pd.DataFrame({"u": self.eu, "v": self.ev, "c": self.cost}).groupby(["u", "v"])["c"].min()
        uu = lowest.index.get_level_values(0).to_numpy()
        vv = lowest.index.get_level_values(1).to_numpy()
        self.matrix = csr_array(coo_array((lowest.to_numpy(), (uu, vv)), shape=(n, n)))

    def name_neighbours(self) -> None:
        """Label every link `tport>adj` (the reported rows name neighbours: mesh links
        share one tport label)."""
        every = self._every_head
        named = every.assign(label=every["label"] + ">" + self.names[every["v"].to_numpy()])
        self._advertised = named.drop_duplicates(["u", "label"])
        self.labels = self._adj_labels

    def heads(self) -> pd.DataFrame:
        """(u, label, v): node u's link named label leads to node v."""
        return self._advertised

    def trees(self, sources: Ints, path: int) -> Iterator[tuple[Ints, npt.NDArray[np.float64], Ints]]:
        """(sources, dist, parent_edge) for batches of `sources`: dist[i, v] the cost of
        the shortest path from sources[i] to v (inf: unreachable), parent_edge[i, v] the
        edge of T(sources[i], path) into v (NO_EDGE for the source and unreachable)."""
        per = max(1, BATCH_CELLS // max(1, len(self.eu)))
        for lo in range(0, len(sources), per):
            batch = sources[lo : lo + per]
            dist = np.atleast_2d(dijkstra(self.matrix, directed=True, indices=batch))
            parent = np.full((len(batch), self.n), NO_EDGE, dtype=np.int64)
            if len(self.eu):
                head = dist[:, self.ev]
                tight = (dist[:, self.eu] + self.cost == head) & np.isfinite(head)
                seen = np.cumsum(tight, axis=1, dtype=np.int32)  # tight edges up to e
                before = np.where(self.group_lo > 0, seen[:, self.group_lo - 1], 0)
                k = seen[:, self.group_hi - 1] - before  # tight candidates into e's head
                # candidate p mod k, from a table: k > p (most often) takes candidate p
                pick = np.array([0, *(path % j for j in range(1, NUM_PATHS)), path], dtype=np.int32)
                chosen = tight & (seen - before - 1 == pick[np.minimum(k, NUM_PATHS)])
                rows, edges = np.nonzero(chosen)
                parent[rows, self.ev[edges]] = edges
            yield batch, dist, parent

    def first_edges(self, sources: Ints, parent: Ints) -> Ints:
        """For each source (row) and node, the source's own edge its route to the node
        starts with (NO_EDGE for the source itself and unreachable nodes)."""
        has = parent >= 0
        up = np.where(has, self.eu[np.maximum(parent, 0)], NO_EDGE)
        first = np.where(up == sources[:, None], parent, NO_EDGE)
        while True:
            rows, cols = np.nonzero((first < 0) & (up >= 0))
            if rows.size == 0:
                return first
            above = up[rows, cols]
            first[rows, cols] = first[rows, above]
            up[rows, cols] = up[rows, above]


class _Group:
    """One (snapshot, path, chunk) group: its graph, sources and reported rows."""

    def __init__(
        self, reference: pd.DataFrame, reported: pd.DataFrame, path: int, chunk: int, chunks: int
    ) -> None:
        self.snapshot_id = str(reference["snapshot_id"].iat[0])
        self.path = path
        self.g = Graph(reference, path)
        mine = chunk_of(self.g.names, chunks) == chunk
        self.sources: Ints = np.flatnonzero(mine).astype(np.int64)
        rep = reported[(reported["path"] == path).to_numpy(dtype=bool)]
        if rep["adj"].notna().any():  # neighbours named: compare (tport, adj) pairs
            self.g.name_neighbours()
            rep = _with_adj(rep)
        self.hops = rep[(rep["kind"] == HOP).to_numpy()]
        self.fwd = rep[(rep["kind"] == FWD).to_numpy()]
        known = self.g.lookup.get_indexer(self.fwd["observer"]) >= 0
        self.reporters = set(self.fwd["observer"][known])

    def rows(self, check: str, **columns: object) -> pd.DataFrame:
        return finding_rows(TABLE, self.snapshot_id, check, path=self.path, **columns)


def _label(labels: npt.NDArray[np.object_], edges: Ints) -> npt.NDArray[np.object_]:
    out = np.full(len(edges), None, dtype=object)
    has = edges >= 0
    out[has] = labels[edges[has]]
    return out


def _check_hops(grp: _Group, batch: Ints, dist: npt.NDArray[np.float64], parent: Ints) -> tuple[list[pd.DataFrame], dict[str, int]]:
    g, hops = grp.g, grp.hops
    o = g.lookup.get_indexer(hops["observer"])
    mine = np.isin(o, batch)
    hops, o = hops[mine], o[mine]
    if hops.empty:
        return [], {}
    # a node's routes follow its own tree: only the batch's observers need their first hops
    rows = np.flatnonzero(np.isin(batch, o))
    row_of = {int(batch[r]): i for i, r in enumerate(rows)}
    first = g.first_edges(batch[rows], parent[rows])
    dist = dist[rows]
    d = g.lookup.get_indexer(hops["target"])
    pairs = pd.DataFrame({"o": o, "d": d, "tport": hops["tport"].to_numpy(dtype=object),
                          "cost": hops["cost"].to_numpy(dtype=object),
                          "observer": hops["observer"].to_numpy(dtype=object),
                          "dest": hops["target"].to_numpy(dtype=object)})
    listed = pairs[pairs["tport"].notna()].drop_duplicates(["o", "dest", "tport"])
    per_pair = pairs.drop_duplicates(["o", "dest"])[["o", "d", "observer", "dest"]]
    # a path is listed by one row of a peer; several rows listing it is itself a finding
    many = listed.duplicated(["o", "dest"], keep=False).to_numpy()
    got = pd.concat(
        [
            listed[~many].set_index(["o", "dest"])["tport"],
            listed[many].groupby(["o", "dest"])["tport"].agg(lambda t: ",".join(sorted(t))),
        ]
    )
    per_pair = per_pair.merge(got.rename("reported").reset_index(), on=["o", "dest"], how="left")
    r = np.array([row_of[int(x)] for x in per_pair["o"]], dtype=np.int64)
    dd = per_pair["d"].to_numpy()
    exp_edge = np.where(dd >= 0, first[r, np.maximum(dd, 0)], NO_EDGE)
    expected = _label(g.labels, exp_edge)
    reported = per_pair["reported"].to_numpy(dtype=object)
    listed_any = pd.notna(reported)
    reported = np.where(listed_any, reported, None)
    bad = listed_any & (expected != reported)
    out = []
    if bad.any():
        b = per_pair[bad]
        out.append(grp.rows("next_hop", node=b["observer"], source=b["observer"], dest=b["dest"],
                            expected=expected[bad], reported=reported[bad]))
    counts = {"next_hops": int(listed_any.sum())}
    if grp.path == 0 and len(listed):
        lo = listed[listed["d"] >= 0]
        r0 = np.array([row_of[int(x)] for x in lo["o"]], dtype=np.int64)
        want = dist[r0, lo["d"].to_numpy()]
        have = pd.to_numeric(lo["cost"], errors="coerce").to_numpy(dtype=np.float64)
        wrong = ~(want == have)
        if wrong.any():
            w = lo[wrong]
            out.append(grp.rows("route_cost", node=w["observer"], source=w["observer"], dest=w["dest"],
                                expected=[_cost_text(x) for x in want[wrong]],
                                reported=[_cost_text(x) for x in have[wrong]]))
        counts["route_costs"] = len(lo)
    return out, counts


def _cost_text(x: float) -> str | None:
    return str(int(x)) if np.isfinite(x) else None


def _check_forward(grp: _Group, batch: Ints, parent: Ints, check_coverage: bool) -> tuple[list[pd.DataFrame], dict[str, int]]:
    g = grp.g
    fwd = grp.fwd
    s_all = g.lookup.get_indexer(fwd["target"])
    fwd = fwd[np.isin(s_all, batch)]
    if fwd.empty:
        return [], {}
    n = g.n
    s = g.lookup.get_indexer(fwd["target"]).astype(np.int64)
    o = g.lookup.get_indexer(fwd["observer"]).astype(np.int64)
    known = o >= 0
    fwd, s, o = fwd[known], s[known], o[known]
    pair = s * n + o
    reported_pairs = np.unique(pair)
    # codes for transport labels of both sides
    rep_labels = fwd["tport"].to_numpy(dtype=object)
    has_label = pd.notna(rep_labels)
    all_labels = pd.Index(pd.unique(np.concatenate([g.labels, rep_labels[has_label]])))
    n_labels = max(1, len(all_labels))
    rep_keys = np.unique(pair[has_label] * n_labels + all_labels.get_indexer(rep_labels[has_label]))
    # expected: edges of T(s, p) whose forwarder reported on s
    rows, heads = np.nonzero(parent >= 0)
    edges = parent[rows, heads]
    e_pair = batch[rows] * n + g.eu[edges]
    keep = np.isin(e_pair, reported_pairs)
    exp_keys = np.unique(e_pair[keep] * n_labels + all_labels.get_indexer(g.labels[edges[keep]]))
    differ = np.unique(np.setxor1d(exp_keys, rep_keys) // n_labels)
    out = []
    if len(differ):
        def listing(keys: Ints, p: int) -> str | None:
            sel = keys[keys // n_labels == p] % n_labels
            return ",".join(sorted(all_labels[sel])) or None

        out.append(grp.rows(
            "tree_edge",
            node=[g.names[p % n] for p in differ],
            source=[g.names[p // n] for p in differ],
            expected=[listing(exp_keys, int(p)) for p in differ],
            reported=[listing(rep_keys, int(p)) for p in differ],
        ))
    counts = {"forward_sets": len(reported_pairs)}
    if check_coverage:
        # a tree can only break where a forwarding set differs or a node lists no set
        # for its source (it forwards nothing then); other trees are the expected ones
        sources, listers = np.unique(reported_pairs // n, return_counts=True)
        broken = np.union1d(differ // n, sources[listers < len(grp.reporters)])
        counts["trees_covered"] = len(sources)
        out += [_coverage(grp, int(src), fwd[s == src], o[s == src]) for src in broken.tolist()]
    return out, counts


def _coverage(grp: _Group, source: int, fwd: pd.DataFrame, forwarder: Ints) -> pd.DataFrame:
    """Flood source's message along the reported links: who is missed, who gets it twice."""
    g = grp.g
    edges = pd.DataFrame({"u": forwarder, "label": fwd["tport"].to_numpy(dtype=object)}).dropna()
    edges = edges.merge(g.heads(), on=["u", "label"])
    u, v = edges["u"].to_numpy(dtype=np.int64), edges["v"].to_numpy(dtype=np.int64)
    m = csr_array(coo_array((np.ones(len(u)), (u, v)), shape=(g.n, g.n)))
    reached = np.zeros(g.n, dtype=bool)
    reached[breadth_first_order(m, source, directed=True, return_predecessors=False)] = True
    arrivals = np.bincount(v[reached[u]], minlength=g.n)
    arrivals[source] += 1  # the source has its message: another arrival is a duplicate
    missed = g.names[~reached]
    twice = g.names[arrivals > 1]
    if not len(missed) and not len(twice):
        return empty_frame(TABLE)
    text = "; ".join(
        f"{what} {' '.join(map(str, names[:MAX_LISTED]))}{' ...' if len(names) > MAX_LISTED else ''}"
        for what, names in (("missed", missed), ("twice", twice)) if len(names)
    )
    return grp.rows(
        "tree_coverage", node=SNAPSHOT_NODE, source=g.names[source],
        expected=f"each of {g.n - 1} nodes once", reported=text or None,
        detail=json.dumps({"missed": len(missed), "twice": len(twice)}),
    )


def _partition(grp: _Group) -> list[pd.DataFrame]:
    g = grp.g
    if g.n == 0:
        return []
    m = csr_array(coo_array((np.ones(len(g.eu)), (g.eu, g.ev)), shape=(g.n, g.n)))
    k, label = connected_components(m, directed=False)
    if k <= 1:
        return []
    sizes = np.bincount(label)
    return [grp.rows("partition", node=SNAPSHOT_NODE, expected="1 component",
                     reported=f"{k} components", detail=json.dumps({"sizes": sorted(sizes.tolist(), reverse=True)}))]


def audit_routes(
    reference: pd.DataFrame, reported: pd.DataFrame, path: int, chunk: int = 0, chunks: int = 1
) -> pd.DataFrame:
    """Findings of one (snapshot, path, chunk) group, then its summary row."""
    if reference.empty:
        return empty_frame(TABLE)
    grp = _Group(reference, reported, path, chunk, chunks)
    coverage = len(grp.fwd) > 0 and set(grp.g.names) <= grp.reporters
    counts: dict[str, int] = {"trees": len(grp.sources)}
    parts: list[pd.DataFrame] = _partition(grp) if path == 0 and chunk == 0 else []
    for batch, dist, parent in grp.g.trees(grp.sources, path):
        for found, n in (_check_hops(grp, batch, dist, parent), _check_forward(grp, batch, parent, coverage)):
            parts += found
            for key, value in n.items():
                counts[key] = counts.get(key, 0) + value
    return with_summary(TABLE, grp.snapshot_id, counts, parts)


def audit_routes_local(
    reference: pd.DataFrame, routes: pd.DataFrame | None, forward: pd.DataFrame | None
) -> pd.DataFrame:
    """The whole audit in one process, for every snapshot of `reference` and path."""
    parts = [typed({}, REPORTED_COLUMNS)]
    if routes is not None:
        parts.append(hop_rows(routes))
    if forward is not None:
        parts.append(forward_rows(forward))
    reported = pd.concat(parts, ignore_index=True)
    out = []
    for snapshot_id, ref in reference.groupby("snapshot_id", sort=True):
        rep = reported[(reported["snapshot_id"] == snapshot_id).to_numpy()]
        out += [audit_routes(ref, rep, p) for p in range(NUM_PATHS)]
    return pd.concat(out, ignore_index=True) if out else empty_frame(TABLE)


# -- Spark ------------------------------------------------------------------------------


def _map(
    fn: Callable[[pd.DataFrame, int], pd.DataFrame], chunks: int
) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """A mapInPandas function applying `fn` to every batch."""

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            yield fn(batch, chunks)

    return run


def _per_group(chunks: int) -> Callable[[tuple[Any, ...], pd.DataFrame, pd.DataFrame], pd.DataFrame]:
    """A cogroup function given its key (snapshot_id, path, chunk)."""

    def run(key: tuple[Any, ...], reference: pd.DataFrame, reported: pd.DataFrame) -> pd.DataFrame:
        _, path, chunk = key
        return audit_routes(reference, reported, int(path), int(chunk), chunks)

    return run


def routing_spark(
    reference: DataFrame,
    routes: DataFrame | None,
    forward: DataFrame | None,
    *,
    chunks: int,
) -> DataFrame:
    """Findings of every snapshot in `reference` (the LSDB audit's reference database),
    grouped by (snapshot, path, chunk of sources)."""
    from pyspark.sql import functions as F

    spark = reference.sparkSession
    keys = spark.range(NUM_PATHS).select(F.col("id").cast("int").alias("path")).crossJoin(
        spark.range(chunks).select(F.col("id").cast("int").alias("chunk"))
    )
    graph = reference.crossJoin(keys)
    schema = ddl(REPORTED_COLUMNS)
    reported = spark.createDataFrame([], schema)
    if routes is not None:
        rows = routes.select("snapshot_id", "node", "user", "tport", "cost", "path",
                             *(["adj"] if "adj" in routes.columns else []))
        reported = reported.unionByName(rows.mapInPandas(_map(hop_rows, chunks), schema))
    if forward is not None:
        rows = forward.select("snapshot_id", "node", "path", "source", "tport", "cost",
                              *(["adj"] if "adj" in forward.columns else []))
        reported = reported.unionByName(rows.mapInPandas(_map(forward_rows, chunks), schema))
    return (
        graph.groupBy("snapshot_id", "path", "chunk")
        .cogroup(reported.groupBy("snapshot_id", "path", "chunk"))
        .applyInPandas(_per_group(chunks), kernel_schema_ddl(TABLE))
    )

