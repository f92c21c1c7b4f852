"""Synthetic snapshots: a network of N nodes as the collector would store it, for audits
at scales beyond what runs as processes here, and the faults the audit tests inject.

Issue "Routing, bloom and link-state audits", item 4. The network is built and routed with
the router's own code: `raims_node.linkstate` (LinkStateDB, RouteTable: next hops, route
costs, forwarding tables) and `raims_node.bloom` (each node's filter of its
subscriptions). The rows follow the console's `show peers`, `show adjacency`, `show
routes`, `show forward P`, `show subs` and `show blooms` (raims_node/console), in the lake
schemas: peers labelled `<name>.<uid>` with a uid numbering of each observer's own,
`<name>.*` for the observer itself, transports `<name>.<tport_id>`.

Decisions:
- Topology ("graph"): a ring (so the network stays connected when any one link goes)
  plus random chords up to N * degree / 2 links, one mesh link per pair, tport ids
  counted per node from 1. With `mesh` ("mesh", the rollout's default): every pair
  linked, every link of a node on its one mesh transport (`mesh.1`), so only the `adj`
  column of `show routes` / `show forward` tells a node's links apart. A link costs the same both ways: 1000 on most, 1500 on some, and on a few a
  different cost per path, so the four paths differ.
- Nodes start 1 ms apart in a random order (distinct at the lake's microsecond
  precision, so the age ranking survives the timestamp type), with random bridges.
- Subscriptions: `subscriptions` per node, a share of them patterns (rv, glob and sbus,
  some with a suffix so they are detail entries), the rest subjects, partly shared
  between nodes. One node in ten reseeded its filter.
- `observers` nodes (all by default) report the views of the whole network (peers,
  links, routes, forward); every node reports its own subscriptions and its own filter
  (`show subs` rows of itself; the `show blooms` ipc row with the filter's bytes). At
  10,000 nodes a full view per node would be 10**8 rows a table: a collection samples.
- `show routes` is taken with P = 0 (its costs are path 0's); `show forward` for every P.
- Faults (`Fault`) are injected into the rows, except a dropped reverse link, which is a
  change of the network itself (`Network.drop_link`) that the router then routes around.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final

import numpy as np
import pandas as pd
import pyarrow as pa

from raims_node.bloom import BloomFilter, FilterImage, decode_image, encode_image, subject_hash
from raims_node.bloom.entry import FULL
from raims_node.bloom.positions import bit_positions_of
from raims_node.linkstate import (
    NUM_PATHS,
    LinkRecord,
    LinkStateDB,
    PeerRecord,
    RouteTable,
    expand_cost,
)
from raims_node.subject import compile_pattern, subject_bytes
from raims_node.wire.subjects import bridge_b64
from spark_app.errors import SparkAppError
from spark_app.schemas import load_schemas
from spark_app.udfs.labels import UID_SUFFIX

EPOCH_NS: Final = 1_760_000_000 * 1_000_000_000
START_STEP_NS: Final = 1_000_000
BASE_COSTS: Final = (1000, 1000, 1000, 1500)
PATH_COSTS: Final = (500, 1000, 1500, 2000)
PER_PATH_SHARE: Final = 0.15
TPORT_NAME: Final = "mesh"
TPORT_TYPE: Final = "mesh"
IPC_DEST: Final = "ipc"
SHARED_SYMBOLS: Final = 5000
VIEW_TABLES: Final = ("peers", "links", "routes", "forward")
OWN_TABLES: Final = ("subs", "blooms")
TABLES: Final = (*VIEW_TABLES, *OWN_TABLES)
LINK_COST_RAISE: Final = 500
OVERFULL_EXTRA: Final = 1000  # subjects an overfull filter takes past level 0's capacity
# Patterns a node may subscribe: (syntax, template); {n} is the node, {k} a number.
PATTERNS: Final = (
    ("rv", "svc.{n}.{k}.>"),
    ("rv", "md.x{k}.*.px"),
    ("glob", "cache.{n}.{k}.*"),
    ("sbus", "bus/{n}/{k}/*"),
    ("rv", "ord.{k}.*"),
)


class SyntheticError(SparkAppError):
    """A synthetic snapshot or fault cannot be made as asked."""


@dataclass(frozen=True, slots=True)
class SyntheticSpec:
    nodes: int = 50
    degree: int = 4
    subscriptions: int = 100
    observers: int | None = None
    seed: int = 1
    pattern_share: float = 0.1
    reseeded_share: float = 0.1
    mesh: bool = False  # a full mesh whose links share each node's one mesh transport
    copies: bool = True  # observers report their copies of their peers' filters


@dataclass(slots=True)
class Network:
    """The nodes of a synthetic network, its link-state database and its filters."""

    spec: SyntheticSpec
    names: list[str]
    bridges: list[bytes]
    db: LinkStateDB
    subs: list[list[tuple[str, str | None]]]  # per node: (text, syntax or None)
    filters: list[BloomFilter]
    index: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.index = {n: i for i, n in enumerate(self.names)}

    def drop_link(self, user: str, adj: str) -> int:
        """`user` stops advertising its links to `adj` (a half-open link: `adj` still lists
        its link back); returns how many links were dropped."""
        b, a = self.bridges[self.index[user]], self.bridges[self.index[adj]]
        peer = self.db.peer(b)
        if peer is None:
            raise SyntheticError(f"{user} is not in the network's database")
        keep = [lk for lk in self.db.links(b) if lk.peer_bridge != a]
        dropped = len(self.db.links(b)) - len(keep)
        self.db.apply_full(b, peer.link_seqno + 1, keep)
        return dropped

    def raise_cost(self, user: str, adj: str, by: int) -> None:
        """`user`'s links to `adj` cost `by` more on every path (`adj`'s links back keep
        their cost: the two ends disagree)."""
        b, a = self.bridges[self.index[user]], self.bridges[self.index[adj]]
        peer = self.db.peer(b)
        if peer is None:
            raise SyntheticError(f"{user} is not in the network's database")
        links = [
            replace(lk, cost=expand_cost([c + by for c in lk.cost])) if lk.peer_bridge == a else lk
            for lk in self.db.links(b)
        ]
        self.db.apply_full(b, peer.link_seqno + 1, links)


def _topology(n: int, degree: int, rng: random.Random) -> list[tuple[int, int]]:
    pairs = {(min(i, (i + 1) % n), max(i, (i + 1) % n)) for i in range(n) if n > 1}
    target = max(len(pairs), n * degree // 2)
    while len(pairs) < min(target, n * (n - 1) // 2):
        a, b = rng.sample(range(n), 2)
        pairs.add((min(a, b), max(a, b)))
    return sorted(pairs)


def _subscriptions(
    name: str, count: int, spec: SyntheticSpec, rng: random.Random
) -> list[tuple[str, str | None]]:
    chosen: dict[tuple[str, str | None], None] = {}
    n_patterns = round(count * spec.pattern_share)
    while len(chosen) < count:
        if len(chosen) < n_patterns:
            syntax, template = rng.choice(PATTERNS)
            chosen[(template.format(n=name, k=rng.randrange(1000)), syntax)] = None
        elif rng.random() < 0.5:
            chosen[(f"md.x{rng.randrange(8)}.s{rng.randrange(SHARED_SYMBOLS)}.px", None)] = None
        else:
            chosen[(f"app.{name}.t{rng.randrange(1 << 20)}", None)] = None
    return list(chosen)


def build_network(spec: SyntheticSpec) -> Network:
    """The converged network `spec` describes (every node holds this one database)."""
    rng = random.Random(spec.seed)
    n = spec.nodes
    names = [f"n{i:05d}" for i in range(n)]
    bridges = [rng.randbytes(16) for _ in range(n)]
    age = rng.sample(range(n), n)
    start_ns = [EPOCH_NS + age[i] * START_STEP_NS for i in range(n)]
    links: list[list[LinkRecord]] = [[] for _ in range(n)]
    pairs = _topology(n, n - 1 if spec.mesh else spec.degree, rng)
    for a, b in pairs:
        if rng.random() < PER_PATH_SHARE:
            cost = expand_cost(rng.choices(PATH_COSTS, k=NUM_PATHS))
        else:
            cost = expand_cost([rng.choice(BASE_COSTS)])
        for x, y in ((a, b), (b, a)):
            tport_id = 1 if spec.mesh else len(links[x]) + 1
            links[x].append(LinkRecord(bridges[x], TPORT_NAME, tport_id, bridges[y], cost, TPORT_TYPE))
    subs = [_subscriptions(names[i], spec.subscriptions, spec, rng) for i in range(n)]
    filters = []
    for i in range(n):
        seed = rng.getrandbits(32) if rng.random() < spec.reseeded_share else 0
        f = BloomFilter(seed=seed)
        for text, syntax in subs[i]:
            if syntax is None:
                f.add_subject(text)
            else:
                f.add_pattern(compile_pattern(text, syntax))  # type: ignore[arg-type]
        filters.append(f)
    db = LinkStateDB()
    for i in range(n):
        db.put_peer(PeerRecord(bridges[i], names[i], start_ns[i], sub_seqno=len(subs[i])))
        db.apply_full(bridges[i], len(links[i]), links[i])
    return Network(spec, names, bridges, db, subs, filters)


class _Columns:
    """Rows of one table, column by column."""

    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = {}
        self.n = 0

    def add(self, **row: Any) -> None:
        for k, v in row.items():
            col = self.cols.get(k)
            if col is None:
                col = self.cols[k] = [None] * self.n
            col.append(v)
        self.n += 1
        if len(row) < len(self.cols):
            for col in self.cols.values():
                if len(col) < self.n:
                    col.append(None)


def _label(link: LinkRecord) -> str:
    return f"{link.tport_name}.{link.tport_id}"


class _Observer:
    """What one node's console shows about the whole network."""

    def __init__(self, net: Network, me: int, rng: random.Random, dists: dict[int, dict[bytes, int]]) -> None:
        self.net, self.me = net, me
        others = [i for i in range(len(net.names)) if i != me]
        rng.shuffle(others)
        self.order = [me, *others]  # this node first, then its peers by uid
        self.labels = {me: f"{net.names[me]}.*"}
        self.labels.update({i: f"{net.names[i]}.{uid}" for uid, i in enumerate(others, 1)})
        self.by_bridge = {net.bridges[i]: i for i in range(len(net.names))}
        self.rt = RouteTable(net.db, net.bridges[me])
        self.first = [{r.dest: r for r in self.rt.routes(p)} for p in range(NUM_PATHS)]
        self.dists = dists

    def dist_from(self, i: int) -> dict[bytes, int]:
        """Path 0 costs from node i to every node it reaches (itself at 0)."""
        if i not in self.dists:
            rt = RouteTable(self.net.db, self.net.bridges[i])
            d = {r.dest: r.cost for r in rt.routes(0)}
            d[self.net.bridges[i]] = 0
            self.dists[i] = d
        return self.dists[i]

    def label_of(self, bridge: bytes) -> str:
        return self.labels[self.by_bridge[bridge]]

    def peers(self, out: _Columns, head: Mapping[str, Any]) -> None:
        net, db = self.net, self.net.db
        for i in self.order:
            rec = db.peer(net.bridges[i])
            assert rec is not None
            route = self.first[0].get(net.bridges[i])
            out.add(
                **head, user=self.labels[i], bridge=bridge_b64(net.bridges[i]),
                sub=net.filters[i].count, seq=rec.sub_seqno, link=rec.link_seqno,
                lat=None, max=None, avg=None, time=rec.start_ns,
                tport=_label(route.link) if route else None, cost=route.cost if route else None,
            )

    def links(self, out: _Columns, head: Mapping[str, Any]) -> None:
        for i in self.order:
            for link in self.net.db.links(self.net.bridges[i]):
                out.add(
                    **head, user=self.labels[i], adj=self.label_of(link.peer_bridge),
                    tport=_label(link), type=link.tport_type, cost=link.cost[0],
                    cost2=link.cost[1], cost3=link.cost[2], cost4=link.cost[3],
                )

    def routes(self, out: _Columns, head: Mapping[str, Any]) -> None:
        """`show routes` (P = 0): per peer the route used first, then the loop-free
        alternatives by cost, as raims_node.console.show_routes lists them."""
        net = self.net
        me_b = net.bridges[self.me]
        mine = net.db.links(me_b)
        for i in self.order[1:]:
            dest = net.bridges[i]
            routes = [self.first[p].get(dest) for p in range(NUM_PATHS)]
            first_hops = [r.link if r is not None else None for r in routes]
            if routes[0] is None:
                continue
            to_dest = routes[0].cost
            direct = [lk for lk in mine if lk.peer_bridge == dest]
            inbox = direct[0] if direct else first_hops[0]
            found = []
            for link in mine:
                d = self.dist_from(self.by_bridge[link.peer_bridge])
                via = 0 if link.peer_bridge == dest else d.get(dest)
                back = d.get(me_b)
                if via is None or back is None:
                    continue
                if link.peer_bridge == dest or via < back + to_dest:
                    found.append((link.cost[0] + via, link))
            found.sort(key=lambda cl: (cl[1] != first_hops[0], cl[0], cl[1].tport_id))
            for cost, link in found:
                state = [s for s, on in (("inbox", link == inbox), ("mesh", link.tport_type == "mesh"),
                                         ("hb", link.peer_bridge == dest)) if on]
                out.add(
                    **head, user=self.labels[i], tport=_label(link), adj=self.label_of(link.peer_bridge),
                    state=state, cost=cost,
                    path=[p for p in range(NUM_PATHS) if first_hops[p] == link],
                    lat=None, fd=None, route=None,
                )

    def copies(self, out: _Columns, head: Mapping[str, Any]) -> None:
        """`show blooms copies`: this node's copy of each peer's filter."""
        for i in self.order[1:]:
            f = self.net.filters[i]
            out.add(
                **head, fd=None, dest=self.labels[i], tport=None, bloom=[self.net.names[i]],
                prefix=hex(f.prefix_mask), detail=hex(f.detail_mask), subs=f.subject_count,
                total=f.count, filter=f.to_bytes(), size_bits=f.size_bits,
                num_hashes=f.num_hashes, seed=f.seed,
            )

    def forward(self, out: _Columns, head: Mapping[str, Any]) -> None:
        for p in range(NUM_PATHS):
            table = self.rt.forward_table(p)
            for i in self.order:
                links = table.get(self.net.bridges[i], ())
                if not links:
                    out.add(**head, path=p, source=self.labels[i], tport=None, adj=None, cost=None)
                for link in links:
                    out.add(**head, path=p, source=self.labels[i], tport=_label(link),
                            adj=self.label_of(link.peer_bridge), cost=link.cost[p])


def snapshot_tables(
    net: Network,
    snapshot_id: str,
    collected_at: datetime,
    observers: Sequence[int] | None = None,
) -> dict[str, pa.Table]:
    """The rows a collection of `net` writes, table by table, conformed to the lake
    schemas. `observers` (node indices) report the network views; default: the spec's
    number of them, chosen at random, or every node."""
    rng = random.Random(net.spec.seed + 1)
    n = len(net.names)
    if observers is None:
        k = n if net.spec.observers is None else min(n, net.spec.observers)
        observers = sorted(rng.sample(range(n), k))
    out = {t: _Columns() for t in TABLES}
    dists: dict[int, dict[bytes, int]] = {}
    for o in observers:
        head = {"snapshot_id": snapshot_id, "collected_at": collected_at, "node": net.names[o]}
        view = _Observer(net, o, rng, dists)
        view.peers(out["peers"], head)
        view.links(out["links"], head)
        view.routes(out["routes"], head)
        view.forward(out["forward"], head)
        if net.spec.copies:
            view.copies(out["blooms"], head)
    for i, name in enumerate(net.names):
        head = {"snapshot_id": snapshot_id, "collected_at": collected_at, "node": name}
        f = net.filters[i]
        for text, syntax in net.subs[i]:
            out["subs"].add(**head, user=f"{name}.*", subject=text, pattern=syntax is not None, syntax=syntax)
        out["blooms"].add(
            **head, fd=None, dest=IPC_DEST, tport=None, bloom=[name],
            prefix=hex(f.prefix_mask), detail=hex(f.detail_mask), subs=f.subject_count,
            total=f.count, filter=f.to_bytes(), size_bits=f.size_bits,
            num_hashes=f.num_hashes, seed=f.seed,
        )
    schemas = load_schemas()
    tables = {}
    for t, cols in out.items():
        schema = schemas[t]
        data = {c.name: pa.array(cols.cols.get(c.name, [None] * cols.n)) for c in schema.input_columns}
        tables[t] = schema.conform(pa.table(data))
    return tables


# -- faults ------------------------------------------------------------------------------


class Fault(StrEnum):
    """The issue's five faults, then one for each other check of the audits."""

    WRONG_NEXT_HOP = "wrong_next_hop"
    WRONG_TREE_EDGE = "wrong_tree_edge"
    CLEARED_BLOOM_BIT = "cleared_bloom_bit"
    DROPPED_REVERSE_LINK = "dropped_reverse_link"
    STALE_SEQNO = "stale_seqno"
    WRONG_ROUTE_COST = "wrong_route_cost"
    STALE_SUB_SEQNO = "stale_sub_seqno"
    LINK_MISSING_IN_VIEW = "link_missing_in_view"
    ZOMBIE = "zombie"
    UNSEEN_PEER = "unseen_peer"
    CORRUPT_FILTER = "corrupt_filter"
    OVERFULL_FILTER = "overfull_filter"
    DROPPED_TREE_EDGE = "dropped_tree_edge"
    EXTRA_FORWARDER = "extra_forwarder"
    PATTERN_MISSING = "pattern_missing"
    FILTER_EMPTIED = "filter_emptied"
    OVER_INCLUSIVE_FILTER = "over_inclusive_filter"
    FUTURE_SEQNO = "future_seqno"
    DIFFERING_LINK_COST = "differing_link_cost"
    IMPOSTOR_BRIDGE = "impostor_bridge"
    STALE_PEER_COPY = "stale_peer_copy"


# The thirteen fault classes (tests/spark/test_audit_injection.py).
THIRTEEN: Final = (
    Fault.WRONG_NEXT_HOP, Fault.WRONG_ROUTE_COST, Fault.DROPPED_TREE_EDGE, Fault.EXTRA_FORWARDER,
    Fault.CLEARED_BLOOM_BIT, Fault.PATTERN_MISSING, Fault.FILTER_EMPTIED, Fault.OVER_INCLUSIVE_FILTER,
    Fault.DROPPED_REVERSE_LINK, Fault.STALE_SEQNO, Fault.FUTURE_SEQNO, Fault.DIFFERING_LINK_COST,
    Fault.IMPOSTOR_BRIDGE,
)


# The columns that identify a finding of each audit table.
FINDING_KEYS: Final[Mapping[str, tuple[str, ...]]] = {
    "audit_routes": ("check", "node", "path", "source", "dest"),
    "audit_lsdb": ("check", "node", "peer", "adj"),
    "audit_blooms": ("check", "node", "subject"),
}

FindingKey = tuple[str, tuple[Any, ...]]  # (table, values of FINDING_KEYS[table])


@dataclass(frozen=True, slots=True)
class Injected:
    """A fault put into a snapshot and the findings the audits must report for it."""

    fault: Fault
    findings: frozenset[FindingKey]
    description: str


def _name(label: str) -> str:
    return UID_SUFFIX.sub("", label)


def _frame(table: pa.Table) -> pd.DataFrame:
    return table.drop_columns(["date"]).to_pandas()


def _table(name: str, frame: pd.DataFrame) -> pa.Table:
    schema = load_schemas()[name]
    arrays = {}
    for col in schema.input_columns:
        values = frame[col.name].astype(object).where(frame[col.name].notna(), None).tolist()
        values = [v.tolist() if isinstance(v, np.ndarray) else v for v in values]
        arrays[col.name] = pa.array(values, type=col.arrow_type)
    return schema.conform(pa.table(arrays))


def _wrong_next_hop(tables: dict[str, pa.Table], rng: random.Random) -> Injected:
    """Move one path index q (1..3: path 0's row also carries the reported cost) of one
    route to another of the node's links that leads to the same peer."""
    routes = _frame(tables["routes"])
    counts = routes.groupby(["node", "user"]).size()
    candidates = []
    for (node, user), k in counts.items():
        if k < 2:
            continue
        rows = routes[(routes["node"] == node) & (routes["user"] == user)]
        for idx, path in zip(rows.index, rows["path"], strict=True):
            candidates += [(idx, int(q), rows.index) for q in path if q != 0]
    idx, q, group = rng.choice(sorted(candidates, key=lambda c: (c[0], c[1])))
    other = rng.choice([j for j in group if j != idx])
    routes.at[idx, "path"] = [p for p in routes.at[idx, "path"] if p != q]
    routes.at[other, "path"] = sorted([*routes.at[other, "path"], q])
    node, user = routes.at[idx, "node"], _name(routes.at[idx, "user"])
    tables["routes"] = _table("routes", routes)
    return Injected(
        Fault.WRONG_NEXT_HOP,
        frozenset({("audit_routes", ("next_hop", node, q, node, user))}),
        f"{node} reports {routes.at[other, 'tport']} instead of {routes.at[idx, 'tport']} "
        f"as its next hop to {user} on path {q}",
    )


def _own_links(tables: dict[str, pa.Table]) -> dict[str, list[tuple[str, str]]]:
    """Per node, its own links as (tport label, neighbour label), sorted."""
    links = _frame(tables["links"])
    own = links[[u.endswith(".*") for u in links["user"]]]
    return {
        str(node): sorted(zip(g["tport"], g["adj"], strict=True))
        for node, g in own.groupby("node", sort=True)
    }


def _forward_sets(fwd: pd.DataFrame) -> dict[tuple[str, int, str], set[tuple[str, str]]]:
    used: dict[tuple[str, int, str], set[tuple[str, str]]] = {}
    for node, path, source, tport, adj in zip(
        fwd["node"], fwd["path"], fwd["source"], fwd["tport"], fwd["adj"], strict=True
    ):
        group = used.setdefault((node, int(path), source), set())
        if tport is not None and not pd.isna(tport):
            group.add((tport, adj))
    return used


def _tree_faults(node: str, path: int, source: str) -> frozenset[FindingKey]:
    return frozenset(
        {
            ("audit_routes", ("tree_edge", node, path, _name(source), None)),
            ("audit_routes", ("tree_coverage", "*", path, _name(source), None)),
        }
    )


def _wrong_tree_edge(tables: dict[str, pa.Table], rng: random.Random) -> Injected:
    """Point one forwarding row at another link of the same node."""
    fwd = _frame(tables["forward"])
    own = _own_links(tables)
    used = _forward_sets(fwd)
    candidates = [
        (idx, alt)
        for idx, node, path, source, tport in zip(
            fwd.index, fwd["node"], fwd["path"], fwd["source"], fwd["tport"], strict=True
        )
        if tport is not None
        for alt in own.get(node, [])
        if alt not in used[(node, int(path), source)]
    ]
    idx, alt = rng.choice(candidates)
    node, path, source = fwd.at[idx, "node"], int(fwd.at[idx, "path"]), fwd.at[idx, "source"]
    was = (fwd.at[idx, "tport"], fwd.at[idx, "adj"])
    fwd.at[idx, "tport"], fwd.at[idx, "adj"] = alt
    tables["forward"] = _table("forward", fwd)
    return Injected(
        Fault.WRONG_TREE_EDGE, _tree_faults(node, path, source),
        f"{node} forwards {source}'s path {path} messages on {alt} instead of {was}",
    )


def _dropped_tree_edge(tables: dict[str, pa.Table], rng: random.Random) -> Injected:
    """One node stops forwarding a source's messages on one link of its tree."""
    fwd = _frame(tables["forward"])
    rows = [i for i, t in zip(fwd.index, fwd["tport"], strict=True) if t is not None and not pd.isna(t)]
    idx = rng.choice(rows)
    node, path, source = fwd.at[idx, "node"], int(fwd.at[idx, "path"]), fwd.at[idx, "source"]
    was = (fwd.at[idx, "tport"], fwd.at[idx, "adj"])
    same = (fwd["node"] == node) & (fwd["path"] == path) & (fwd["source"] == source)
    if int(same.sum()) == 1:  # its last link: the node lists the source with no link
        fwd.loc[idx, ["tport", "adj", "cost"]] = None
    else:
        fwd = fwd.drop(index=idx)
    tables["forward"] = _table("forward", fwd)
    return Injected(
        Fault.DROPPED_TREE_EDGE, _tree_faults(node, path, source),
        f"{node} no longer forwards {source}'s path {path} messages on {was}",
    )


def _extra_forwarder(tables: dict[str, pa.Table], rng: random.Random) -> Injected:
    """One node forwards a source's messages on one more of its links."""
    fwd = _frame(tables["forward"])
    own = _own_links(tables)
    used = _forward_sets(fwd)
    candidates = sorted(
        (key, alt) for key, have in used.items() for alt in own.get(key[0], []) if alt not in have
    )
    (node, path, source), (tport, adj) = rng.choice(candidates)
    row = {
        "snapshot_id": fwd["snapshot_id"].iat[0], "collected_at": fwd["collected_at"].iat[0],
        "node": node, "path": path, "source": source, "tport": tport, "adj": adj, "cost": 1000,
    }
    empty = (fwd["node"] == node) & (fwd["path"] == path) & (fwd["source"] == source) & fwd["tport"].isna()
    fwd = pd.concat([fwd[~empty], pd.DataFrame([row])], ignore_index=True)
    tables["forward"] = _table("forward", fwd)
    return Injected(
        Fault.EXTRA_FORWARDER, _tree_faults(node, path, source),
        f"{node} also forwards {source}'s path {path} messages on {tport} to {adj}",
    )


def _rebuilt(seed: int, subs: Sequence[tuple[str, str | None]]) -> BloomFilter:
    f = BloomFilter(seed=seed)
    for text, syntax in subs:
        if syntax is None:
            f.add_subject(text)
        else:
            f.add_pattern(compile_pattern(text, syntax))  # type: ignore[arg-type]
    return f


def _put_filter(blooms: pd.DataFrame, idx: Any, f: BloomFilter) -> None:
    blooms.at[idx, "filter"] = f.to_bytes()
    blooms.at[idx, "size_bits"] = f.size_bits
    blooms.at[idx, "num_hashes"] = f.num_hashes
    blooms.at[idx, "subs"], blooms.at[idx, "total"] = f.subject_count, f.count


def _own_rows(subs: pd.DataFrame, node: str) -> pd.DataFrame:
    """The `show subs` rows of `node` about itself (a node lists its peers' too)."""
    return subs[(subs["node"] == node) & ((subs["user"] == f"{node}.*") | (subs["user"] == node))]


def _own_subs(subs: pd.DataFrame, node: str) -> list[tuple[str, str | None]]:
    mine = _own_rows(subs, node)
    return [(str(t), None if y is None or pd.isna(y) else str(y)) for t, y in zip(mine["subject"], mine["syntax"], strict=True)]


def _ipc_rows(blooms: pd.DataFrame) -> list[Any]:
    return [i for i, d in zip(blooms.index, blooms["dest"], strict=True) if d == IPC_DEST]


def _pattern_missing(tables: dict[str, pa.Table], rng: random.Random) -> Injected:
    """One node's filter lacks one of its patterns (rebuilt without it); the pattern is
    one whose key no other entry of the filter covers."""
    from spark_app.udfs.bloom import ProbeSet, audit_blooms_local

    blooms, subs = _frame(tables["blooms"]), _frame(tables["subs"])
    order = _ipc_rows(blooms)
    rng.shuffle(order)
    for idx in order:
        node = blooms.at[idx, "node"]
        mine = _own_subs(subs, node)
        for text, syntax in [s for s in mine if s[1] is not None]:
            trial = blooms.loc[[idx]].copy()
            _put_filter(trial, idx, _rebuilt(int(blooms.at[idx, "seed"]), [s for s in mine if s != (text, syntax)]))
            found = audit_blooms_local(_own_rows(subs, node), trial, ProbeSet(16))
            if ((found["check"] == "missing") & (found["subject"] == text)).any():
                blooms.loc[[idx]] = trial
                tables["blooms"] = _table("blooms", blooms)
                return Injected(
                    Fault.PATTERN_MISSING,
                    frozenset({("audit_blooms", ("missing", node, text))}),
                    f"{node}'s filter lacks its {syntax} pattern {text!r}",
                )
    raise SyntheticError("no pattern whose key no other entry covers")


def _filter_emptied(tables: dict[str, pa.Table], rng: random.Random) -> Injected:
    """One node's filter holds nothing (every subscription missing)."""
    blooms, subs = _frame(tables["blooms"]), _frame(tables["subs"])
    idx = rng.choice(_ipc_rows(blooms))
    node = blooms.at[idx, "node"]
    _put_filter(blooms, idx, BloomFilter(seed=int(blooms.at[idx, "seed"])))
    tables["blooms"] = _table("blooms", blooms)
    return Injected(
        Fault.FILTER_EMPTIED,
        frozenset({("audit_blooms", ("missing", node, text)) for text, _ in _own_subs(subs, node)}),
        f"{node}'s filter emptied",
    )


def _over_inclusive(tables: dict[str, pa.Table], rng: random.Random) -> Injected:
    """One node's filter still holds a subject the node no longer subscribes."""
    blooms, subs = _frame(tables["blooms"]), _frame(tables["subs"])
    idx = rng.choice(_ipc_rows(blooms))
    node = blooms.at[idx, "node"]
    gone = f"gone.{node}.{rng.randrange(1 << 20)}"
    _put_filter(blooms, idx, _rebuilt(int(blooms.at[idx, "seed"]), [*_own_subs(subs, node), (gone, None)]))
    tables["blooms"] = _table("blooms", blooms)
    return Injected(
        Fault.OVER_INCLUSIVE_FILTER,
        frozenset({("audit_blooms", ("over_inclusive", node, None))}),
        f"{node}'s filter still holds {gone!r}, which it no longer subscribes",
    )


def _future_seqno(tables: dict[str, pa.Table], rng: random.Random) -> Injected:
    """One observer holds a peer's link seqno ahead of the peer's own."""
    peers = _frame(tables["peers"])
    candidates = [i for i, u in zip(peers.index, peers["user"], strict=True) if not u.endswith(".*")]
    idx = rng.choice(candidates)
    peers.at[idx, "link"] = peers.at[idx, "link"] + 5
    node, peer = peers.at[idx, "node"], _name(peers.at[idx, "user"])
    tables["peers"] = _table("peers", peers)
    return Injected(
        Fault.FUTURE_SEQNO,
        frozenset({("audit_lsdb", ("future_link_seqno", node, peer, None))}),
        f"{node} holds {peer}'s link seqno {peers.at[idx, 'link']}, ahead of {peer}'s own",
    )


def _stale_peer_copy(tables: dict[str, pa.Table], rng: random.Random) -> Injected:
    """One observer's copy of a peer's filter missed the peer's last subscription."""
    blooms, subs = _frame(tables["blooms"]), _frame(tables["subs"])
    rows = [i for i, d, t in zip(blooms.index, blooms["dest"], blooms["tport"], strict=True)
            if d != IPC_DEST and (t is None or pd.isna(t))]
    if not rows:
        raise SyntheticError("the snapshot has no peer filter copies (spec.copies is off)")
    idx = rng.choice(rows)
    node, peer = blooms.at[idx, "node"], _name(blooms.at[idx, "dest"])
    _put_filter(blooms, idx, _rebuilt(int(blooms.at[idx, "seed"]), _own_subs(subs, peer)[:-1]))
    tables["blooms"] = _table("blooms", blooms)
    return Injected(
        Fault.STALE_PEER_COPY,
        frozenset({("audit_blooms", ("peer_copy", node, None))}),
        f"{node}'s copy of {peer}'s filter lacks {peer}'s last subscription",
    )


def _impostor_bridge(tables: dict[str, pa.Table], rng: random.Random) -> Injected:
    """One observer lists another bridge under a peer's name (an impostor)."""
    peers = _frame(tables["peers"])
    candidates = [i for i, u in zip(peers.index, peers["user"], strict=True) if not u.endswith(".*")]
    idx = rng.choice(candidates)
    peers.at[idx, "bridge"] = bridge_b64(rng.randbytes(16))
    node, peer = peers.at[idx, "node"], _name(peers.at[idx, "user"])
    tables["peers"] = _table("peers", peers)
    return Injected(
        Fault.IMPOSTOR_BRIDGE,
        frozenset({("audit_lsdb", ("peer_identity", node, peer, None))}),
        f"{node} lists bridge {peers.at[idx, 'bridge']} as {peer}",
    )


def _cleared_bloom_bit(tables: dict[str, pa.Table], rng: random.Random) -> Injected:
    """Clear the one bit of a subscribed subject that no other entry sets (the filter's
    counts lose that subject, so the bytes stay a valid filter)."""
    blooms = _frame(tables["blooms"])
    subs = _frame(tables["subs"])
    order = _ipc_rows(blooms)
    rng.shuffle(order)
    for idx in order:
        node = blooms.at[idx, "node"]
        image = decode_image(blooms.at[idx, "filter"])
        if image.num_hashes != 1:
            continue
        values, counts = np.unique(image.positions, return_counts=True)
        single = set(values[counts == 1].tolist())
        own = _own_rows(subs, node)
        mine = own[~own["pattern"].astype(bool)]["subject"].tolist()
        rng.shuffle(mine)
        for subject in mine:
            (pos,) = bit_positions_of(image.size_bits, image.seed, 1, subject_hash(subject_bytes(subject)))
            if pos in single:
                break
        else:
            continue
        positions = image.positions[image.positions != np.uint64(pos)]
        keys = tuple((k, p - 1 if k == FULL else p, d) for k, p, d in image.key_counts)
        cleared = FilterImage(
            image.size_bits, image.seed, image.num_hashes, image.subject_count - 1,
            image.pattern_count, tuple(kc for kc in keys if kc[1] + kc[2]), positions,
            image.details,
        )
        blooms.at[idx, "filter"] = encode_image(cleared)
        blooms.at[idx, "subs"] = blooms.at[idx, "subs"] - 1
        blooms.at[idx, "total"] = blooms.at[idx, "total"] - 1
        tables["blooms"] = _table("blooms", blooms)
        return Injected(
            Fault.CLEARED_BLOOM_BIT,
            frozenset({("audit_blooms", ("missing", node, subject))}),
            f"bit {pos} of {node}'s filter, set only by {subject!r}, cleared",
        )
    raise SyntheticError("no filter has a subject whose bit no other entry sets")


def _stale(column: str, check: str, fault: Fault) -> Callable[[dict[str, pa.Table], random.Random], Injected]:
    def inject(tables: dict[str, pa.Table], rng: random.Random) -> Injected:
        """One observer holds a peer's seqno one behind."""
        peers = _frame(tables["peers"])
        candidates = [
            i for i, (u, v) in enumerate(zip(peers["user"], peers[column], strict=True))
            if not u.endswith(".*") and v and v > 0
        ]
        idx = peers.index[rng.choice(candidates)]
        peers.at[idx, column] = peers.at[idx, column] - 1
        node, peer = peers.at[idx, "node"], _name(peers.at[idx, "user"])
        tables["peers"] = _table("peers", peers)
        return Injected(
            fault,
            frozenset({("audit_lsdb", (check, node, peer, None))}),
            f"{node} holds {peer}'s {column} seqno {peers.at[idx, column]}, one behind",
        )

    return inject


def _wrong_route_cost(tables: dict[str, pa.Table], rng: random.Random) -> Injected:
    """One route's path 0 cost off by one."""
    routes = _frame(tables["routes"])
    rows = [i for i, path in zip(routes.index, routes["path"], strict=True) if 0 in list(path)]
    idx = rng.choice(rows)
    routes.at[idx, "cost"] = routes.at[idx, "cost"] + 1
    node, user = routes.at[idx, "node"], _name(routes.at[idx, "user"])
    tables["routes"] = _table("routes", routes)
    return Injected(
        Fault.WRONG_ROUTE_COST,
        frozenset({("audit_routes", ("route_cost", node, 0, node, user))}),
        f"{node} reports cost {routes.at[idx, 'cost']} to {user}, one too many",
    )


def _link_missing_in_view(tables: dict[str, pa.Table], rng: random.Random) -> Injected:
    """One observer's database lacks one link of another peer."""
    links = _frame(tables["links"])
    rows = [i for i, u in zip(links.index, links["user"], strict=True) if not u.endswith(".*")]
    idx = rng.choice(rows)
    node, peer = links.at[idx, "node"], _name(links.at[idx, "user"])
    tables["links"] = _table("links", links.drop(index=idx))
    return Injected(
        Fault.LINK_MISSING_IN_VIEW,
        frozenset({("audit_lsdb", ("link_set", node, peer, None))}),
        f"{node}'s view of {peer} lacks its link {links.at[idx, 'tport']}",
    )


def _zombie(tables: dict[str, pa.Table], rng: random.Random) -> Injected:
    """One observer still lists a peer that left the network."""
    peers = _frame(tables["peers"])
    row = peers.loc[rng.choice(list(peers.index))].copy()
    ghost = "ghost"
    row["user"] = f"{ghost}.{len(peers) + 1}"
    row["bridge"] = bridge_b64(rng.randbytes(16))
    tables["peers"] = _table("peers", pd.concat([peers, row.to_frame().T], ignore_index=True))
    return Injected(
        Fault.ZOMBIE,
        frozenset({("audit_lsdb", ("zombie", row["node"], ghost, None))}),
        f"{row['node']} still lists {ghost}",
    )


def _unseen_peer(tables: dict[str, pa.Table], rng: random.Random) -> Injected:
    """One observer lost a peer: its peer row, that peer's links, its routes to it and its
    forwarding sets for it; the peer's trees that went through the observer break."""
    peers = _frame(tables["peers"])
    others = peers[[not u.endswith(".*") for u in peers["user"]]]
    idx = rng.choice(list(others.index))
    node, label = peers.at[idx, "node"], peers.at[idx, "user"]
    peer = _name(label)
    links = _frame(tables["links"])
    routes = _frame(tables["routes"])
    fwd = _frame(tables["forward"])
    mine = (fwd["node"] == node) & (fwd["source"] == label)
    broken = sorted(set(fwd.loc[mine & fwd["tport"].notna(), "path"].astype(int)))
    tables["peers"] = _table("peers", peers.drop(index=idx))
    tables["links"] = _table("links", links[~((links["node"] == node) & (links["user"] == label))])
    tables["routes"] = _table("routes", routes[~((routes["node"] == node) & (routes["user"] == label))])
    tables["forward"] = _table("forward", fwd[~mine])
    return Injected(
        Fault.UNSEEN_PEER,
        frozenset(
            {("audit_lsdb", ("peer_unseen", node, peer, None))}
            | {("audit_routes", ("tree_coverage", "*", p, peer, None)) for p in broken}
        ),
        f"{node} lost {peer}, breaking {peer}'s trees on paths {broken}",
    )


def _bloom_row(tables: dict[str, pa.Table], rng: random.Random) -> tuple[pd.DataFrame, int, str]:
    blooms = _frame(tables["blooms"])
    idx = rng.choice(_ipc_rows(blooms))
    return blooms, idx, blooms.at[idx, "node"]


def _corrupt_filter(tables: dict[str, pa.Table], rng: random.Random) -> Injected:
    """One filter's bytes cut short."""
    blooms, idx, node = _bloom_row(tables, rng)
    blooms.at[idx, "filter"] = blooms.at[idx, "filter"][:-1]
    tables["blooms"] = _table("blooms", blooms)
    return Injected(
        Fault.CORRUPT_FILTER,
        frozenset({("audit_blooms", ("undecodable", node, None))}),
        f"{node}'s filter lost its last byte",
    )


def _overfull_filter(tables: dict[str, pa.Table], rng: random.Random) -> Injected:
    """One node's filter stayed at level 0 while it took OVERFULL_EXTRA more subjects."""
    blooms, idx, node = _bloom_row(tables, rng)
    subs = _frame(tables["subs"])
    mine = _own_rows(subs, node)
    f = BloomFilter.from_bytes(BloomFilter(seed=int(blooms.at[idx, "seed"])).to_bytes())  # a replica: no resize
    extra = [f"bulk.{node}.{k}" for k in range(OVERFULL_EXTRA)]
    for text, syntax in zip([*mine["subject"], *extra], [*mine["syntax"], *[None] * len(extra)], strict=True):
        if syntax is None:
            f.add_subject(text)
        else:
            f.add_pattern(compile_pattern(text, syntax))
    head = mine.iloc[0]
    rows = pd.DataFrame([{**head.to_dict(), "subject": s, "pattern": False, "syntax": None} for s in extra])
    tables["subs"] = _table("subs", pd.concat([subs, rows], ignore_index=True))
    blooms.at[idx, "filter"] = f.to_bytes()
    blooms.at[idx, "size_bits"] = f.size_bits
    blooms.at[idx, "subs"], blooms.at[idx, "total"] = f.subject_count, f.count
    tables["blooms"] = _table("blooms", blooms)
    return Injected(
        Fault.OVERFULL_FILTER,
        frozenset({("audit_blooms", ("resize", node, None)), ("audit_blooms", ("fp_rate", node, None))}),
        f"{node}'s filter holds {f.count} entries in {f.size_bits} bits",
    )


_ROW_FAULTS: Final[Mapping[Fault, Callable[[dict[str, pa.Table], random.Random], Injected]]] = {
    Fault.WRONG_NEXT_HOP: _wrong_next_hop,
    Fault.WRONG_TREE_EDGE: _wrong_tree_edge,
    Fault.CLEARED_BLOOM_BIT: _cleared_bloom_bit,
    Fault.STALE_SEQNO: _stale("link", "stale_link_seqno", Fault.STALE_SEQNO),
    Fault.WRONG_ROUTE_COST: _wrong_route_cost,
    Fault.STALE_SUB_SEQNO: _stale("seq", "stale_sub_seqno", Fault.STALE_SUB_SEQNO),
    Fault.LINK_MISSING_IN_VIEW: _link_missing_in_view,
    Fault.ZOMBIE: _zombie,
    Fault.UNSEEN_PEER: _unseen_peer,
    Fault.CORRUPT_FILTER: _corrupt_filter,
    Fault.OVERFULL_FILTER: _overfull_filter,
    Fault.DROPPED_TREE_EDGE: _dropped_tree_edge,
    Fault.EXTRA_FORWARDER: _extra_forwarder,
    Fault.PATTERN_MISSING: _pattern_missing,
    Fault.FILTER_EMPTIED: _filter_emptied,
    Fault.OVER_INCLUSIVE_FILTER: _over_inclusive,
    Fault.FUTURE_SEQNO: _future_seqno,
    Fault.IMPOSTOR_BRIDGE: _impostor_bridge,
    Fault.STALE_PEER_COPY: _stale_peer_copy,
}


ROW_FAULTS: Final = frozenset(_ROW_FAULTS)  # faults made by editing rows: any snapshot takes them


def inject_rows(tables: dict[str, pa.Table], fault: Fault, seed: int | str = 0) -> Injected:
    """Inject a row fault (`ROW_FAULTS`) into `tables` (a snapshot of one id, any
    origin: synthetic, or collected from running nodes), in place."""
    if fault not in _ROW_FAULTS:
        raise SyntheticError(f"{fault} changes the network, not rows: make_snapshot injects it")
    return _ROW_FAULTS[fault](tables, random.Random(f"{seed}/{fault}"))


def finding_keys(audit_tables: Mapping[str, pa.Table], snapshot_id: str | None = None) -> frozenset[FindingKey]:
    """The findings in audit rows (of one snapshot, or all), as `Injected.findings` names
    them."""
    keys: set[FindingKey] = set()
    for table, rows in audit_tables.items():
        frame = rows.to_pandas()
        frame = frame[frame["finding"].astype(bool)]
        if snapshot_id is not None:
            frame = frame[frame["snapshot_id"] == snapshot_id]
        for values in frame[list(FINDING_KEYS[table])].itertuples(index=False):
            keys.add((table, tuple(None if pd.isna(v) else (int(v) if isinstance(v, float | np.integer) else v) for v in values)))
    return frozenset(keys)


def make_snapshot(
    spec: SyntheticSpec,
    snapshot_id: str,
    collected_at: datetime,
    fault: Fault | None = None,
) -> tuple[dict[str, pa.Table], Injected | None]:
    """The snapshot of `spec`'s network, with `fault` injected (chosen with the spec's
    seed), and what was injected."""
    net = build_network(spec)
    rng = random.Random(f"{spec.seed}/{fault}")
    injected = None
    if fault is Fault.DROPPED_REVERSE_LINK:
        a, b = _pick_link(net, rng)
        net.drop_link(b, a)
        injected = Injected(
            fault,
            frozenset({("audit_lsdb", ("asymmetric_link", "*", a, b))}),
            f"{b} dropped its link to {a}, which still lists its link to {b}",
        )
    elif fault is Fault.DIFFERING_LINK_COST:
        a, b = _pick_link(net, rng)
        net.raise_cost(a, b, LINK_COST_RAISE)
        injected = Injected(
            fault,
            frozenset({("audit_lsdb", ("link_cost", "*", min(a, b), max(a, b)))}),
            f"{a}'s link to {b} costs {LINK_COST_RAISE} more than {b}'s link back",
        )
    tables = snapshot_tables(net, snapshot_id, collected_at)
    if fault is not None and fault in _ROW_FAULTS:
        injected = _ROW_FAULTS[fault](tables, rng)
    return tables, injected


def _pick_link(net: Network, rng: random.Random) -> tuple[str, str]:
    a = rng.randrange(len(net.names))
    link = rng.choice(net.db.links(net.bridges[a]))
    b = net.bridges.index(link.peer_bridge)
    return net.names[a], net.names[b]


# -- the job -------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m spark_app.jobs.synthetic --lake PATH --snapshot ID [--nodes N ...]`:
    write one synthetic snapshot into a lake."""
    from spark_app.lake import Lake
    from spark_app.session import TEST_MASTER, build_session

    defaults = SyntheticSpec()
    parser = argparse.ArgumentParser(prog="python -m spark_app.jobs.synthetic", description=main.__doc__)
    parser.add_argument("--lake", required=True)
    parser.add_argument("--snapshot", required=True)
    parser.add_argument("--nodes", type=int, default=defaults.nodes)
    parser.add_argument("--degree", type=int, default=defaults.degree)
    parser.add_argument("--subs", type=int, default=defaults.subscriptions)
    parser.add_argument("--observers", type=int, default=None, help="default: every node")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--fault", choices=[f.value for f in Fault], default=None)
    parser.add_argument("--master", default=TEST_MASTER)
    args = parser.parse_args(argv)
    spec = SyntheticSpec(args.nodes, args.degree, args.subs, args.observers, args.seed)
    tables, injected = make_snapshot(
        spec, args.snapshot, datetime.now(UTC), Fault(args.fault) if args.fault else None
    )
    lake = Lake(args.lake, build_session(args.master))
    for name, table in tables.items():
        print(f"{name}: {lake.write(name, table.drop_columns(['date']))} rows")
    if injected is not None:
        print(f"injected: {injected.description}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
