"""Between graph text and the link-state database (manual: "show graph", "Single File
Configuration").

`graph_from_db` is "show graph": it describes the network from the database alone,
matching transports by the names and types the peers advertise. `db_from_graph` builds
the database a network described by graph text would converge to, for tests,
benchmarks and tools that reason about a network before it runs.

Decisions where the manual is vague:
- show graph: a mesh or pgm line is one connected group of links sharing a type and a
  transport name, with the cost the oldest member advertises; any other link is one
  line per connection between two peers, named and costed as the older peer
  advertises it. Lines follow the age of their members. A repeated transport name gets
  a number appended (`mesh_link_abcd2`, as in the manual) and a repeated peer name
  `_2`, `_3`, ..., so that the text parses back (and names valid users).
- db_from_graph: node k of the `node` line starts k nanoseconds after
  `GRAPH_EPOCH_NS` (the node line lists peers oldest first) and has the bridge id
  `graph_bridge(name)`. Every tcp or mesh connection gets its own tport id on each side
  (as `show adjacency` numbers mesh connections), a pgm line one tport id per node;
  ids count from 1 in line order (0 is the local IPC transport).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from itertools import combinations

from raims_node.linkstate.db import LinkStateDB
from raims_node.linkstate.graph import Graph, GraphLink
from raims_node.linkstate.records import BRIDGE_LEN, LinkRecord, PeerRecord

GRAPH_EPOCH_NS = 1_600_000_000 * 1_000_000_000
MULTI_ACCESS_TYPES = ("mesh", "pgm")


def graph_bridge(name: str) -> bytes:
    """The bridge id `db_from_graph` gives node `name`."""
    return hashlib.blake2b(name.encode(), digest_size=BRIDGE_LEN, person=b"raims-graph").digest()


def db_from_graph(graph: Graph) -> LinkStateDB:
    """The converged database of the network `graph` describes."""
    bridge = {name: graph_bridge(name) for name in graph.nodes}
    links: dict[str, list[LinkRecord]] = {name: [] for name in graph.nodes}
    next_id = dict.fromkeys(graph.nodes, 1)

    def new_id(node: str) -> int:
        next_id[node] += 1
        return next_id[node] - 1

    for gl in graph.links:
        if gl.type == "pgm":
            tids = {m: new_id(m) for m in gl.nodes}
            for a in gl.nodes:
                links[a] += [_link(gl, bridge[a], tids[a], bridge[b]) for b in gl.nodes if b != a]
            continue
        for a, b in combinations(gl.nodes, 2):  # tcp: the one pair
            links[a].append(_link(gl, bridge[a], new_id(a), bridge[b]))
            links[b].append(_link(gl, bridge[b], new_id(b), bridge[a]))

    db = LinkStateDB()
    for k, name in enumerate(graph.nodes):
        db.put_peer(PeerRecord(bridge[name], name, GRAPH_EPOCH_NS + k))
        db.apply_full(bridge[name], len(links[name]), links[name])
    return db


def _link(gl: GraphLink, a: bytes, tport_id: int, b: bytes) -> LinkRecord:
    return LinkRecord(a, gl.name, tport_id, b, gl.cost, gl.type)


def graph_from_db(db: LinkStateDB, start: bytes | None = None) -> Graph:
    """`show graph` of the database, printed from the node `start`."""
    peers = db.peers()
    rank = {p.bridge: i for i, p in enumerate(peers)}
    names = _unique([p.name for p in peers], "_")
    multi: dict[tuple[str, str], list[LinkRecord]] = defaultdict(list)
    pairs: dict[tuple[int, int], list[list[LinkRecord]]] = defaultdict(lambda: [[], []])
    for p in peers:
        for link in db.links(p.bridge):
            if link.peer_bridge not in rank:
                continue
            if link.tport_type in MULTI_ACCESS_TYPES:
                multi[(link.tport_type, link.tport_name)].append(link)
            else:
                a, b = rank[link.bridge], rank[link.peer_bridge]
                pairs[(min(a, b), max(a, b))][0 if a < b else 1].append(link)

    lines: list[tuple[tuple[int, ...], LinkRecord]] = []  # (member ranks, representative)
    for group in multi.values():
        lines.extend(_components(group, rank))
    for (a, b), (older, younger) in pairs.items():
        for i in range(max(len(older), len(younger))):
            lines.append(((a, b), older[i] if i < len(older) else younger[i]))
    lines.sort(key=lambda line: (line[0], line[1].tport_name))  # stable: parallel links keep order

    link_names = _unique([rep.tport_name for _, rep in lines], "")
    links = tuple(
        GraphLink(rep.tport_type, name, tuple(names[r] for r in members), rep.cost)
        for (members, rep), name in zip(lines, link_names, strict=True)
    )
    start_name = names[rank[start]] if start is not None and start in rank else None
    return Graph(tuple(names), links, start_name)


def _components(
    group: list[LinkRecord], rank: dict[bytes, int]
) -> list[tuple[tuple[int, ...], LinkRecord]]:
    """Connected groups of multi-access links: member ranks and the oldest member's link."""
    root: dict[int, int] = {}

    def find(x: int) -> int:
        root.setdefault(x, x)
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    for link in group:
        a, b = find(rank[link.bridge]), find(rank[link.peer_bridge])
        root[max(a, b)] = min(a, b)
    members: dict[int, list[int]] = defaultdict(list)
    for x in list(root):
        members[find(x)].append(x)
    out = []
    for r, ms in members.items():
        rep = min(
            (lk for lk in group if find(rank[lk.bridge]) == r),
            key=lambda lk: (rank[lk.bridge], lk.tport_id),
        )
        out.append((tuple(sorted(ms)), rep))
    return out


def _unique(names: list[str], sep: str) -> list[str]:
    """`names` with repeats renamed `<name><sep>2`, `<name><sep>3`, ... avoiding every
    name already present."""
    taken = set(names)
    used: set[str] = set()
    out = []
    for name in names:
        if name in used:
            k = 2
            while f"{name}{sep}{k}" in taken or f"{name}{sep}{k}" in used:
                k += 1
            name = f"{name}{sep}{k}"
        used.add(name)
        out.append(name)
    return out
