"""Show commands over the link-state database and the route table: adjacency, routes,
path, tree, forward, blooms, match and graph (manual, "The Show Commands").

Everything is read from `Node.db` and `Node.routes`, the state the router forwards by.

Decisions where the manual is vague:
- routes [P]: for each peer, one row per link of this node that leads to it without
  coming back: the route the node uses first, then each loop-free alternative (the
  neighbour's own shortest path to the peer does not pass through this node), cheapest
  first. `cost` is the whole route's cost on path P; `path` lists the paths (0..3)
  whose route to the peer starts on that link; `state` lists `inbox` for the link
  inbox messages take (a direct link when there is one, as the router sends them, else
  the path 0 route), `hb` for a direct link to the peer and `mesh` for a mesh link.
  `fd` is the socket of the link to the neighbour this way (the manual's example
  prints each mesh connection's own fd: 19, 21, ...); a link with no socket of its
  own (PGM) shows its transport's endpoint fd, as `show ports`. `route` comes from
  the daemon's port row of the same transport.
- tree [U] [P]: the tree T(U, P) (default this node, path 0), grouped by the cost at
  which each peer is reached; `set` numbers a group's links by forwarder, then tport
  id; `alt` is 0 since only the path's own tree is computed. `dest` is the plain user
  name, as the manual prints it.
- blooms [P]: the bloom filters that decide which of this node's links carry what it
  publishes on path P: the local filter (dest `ipc`), then per link the peers reached
  through it in T(self, P), with the union of their prefix and detail masks and the
  sum of their subject and total counts. A peer whose filter is not yet known counts 0.
- blooms copies: this node's copy of each peer's filter, one row per peer (see
  `show_bloom_copies`).
- forward [P]: every source, this node first, with the links this node forwards its
  messages on (empty when this node is a leaf of the source's tree).
- routes and forward name each link's neighbour (`adj`, as `show adjacency` does; in the
  JSON rows only, the printed tables stay the manual's): on a
  mesh every link shares the transport's label, so without it a tree cannot be checked
  edge by edge (the Spark routing audit compares (tport, adj) pairs).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable

from raims_node.bloom import BloomFilter
from raims_node.console.context import ConsoleContext
from raims_node.console.names import Names, path_arg, tport_label
from raims_node.console.result import CommandResult, Kind, Row, as_cell
from raims_node.linkstate.records import NUM_PATHS, LinkRecord
from raims_node.linkstate.topology import graph_from_db

_MESH = "mesh"


def _label(link: LinkRecord) -> str:
    return tport_label(link.tport_name, link.tport_id)


def _port_rows(ctx: ConsoleContext) -> dict[str, dict[str, object]]:
    return {str(r.get("tport")): r for r in ctx.ports()}


def _link_fds(ctx: ConsoleContext) -> dict[tuple[str, bytes], object]:
    """(tport label, neighbour) -> the fd of the link's socket (transports/fds.py rows)."""
    return {(tport_label(str(r.get("tport")), int(str(r.get("rid")))), peer): r.get("fd") for r in ctx.fds()
            if isinstance(peer := r.get("peer"), bytes)}


def _fd(fds: dict[tuple[str, bytes], object], ports: dict[str, dict[str, object]], link: LinkRecord) -> object:
    return fds.get((_label(link), link.peer_bridge), ports.get(_label(link), {}).get("fd"))


def show_adjacency(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    names = Names(ctx.node)
    rows: list[Row] = []
    for b in names.users():
        user = names.user(b)
        links = ctx.node.db.links(b)
        if not links:
            rows.append({"user": user, "adj": None, "tport": None, "type": None, "cost": None,
                         **dict.fromkeys(_PATH_COSTS)})
        rows += [{"user": user, "adj": names.user(link.peer_bridge), "tport": _label(link),
                  "type": link.tport_type, "cost": link.cost[0],
                  **{c: link.cost[q] for q, c in enumerate(_PATH_COSTS, 1)}} for link in links]
    # the other paths' costs: JSON only (the manual prints path 0's), for the link-state audit
    return CommandResult(["user", "adj", "tport", "type", "cost", *_PATH_COSTS], rows, group="user",
                         blank_repeats=True, hidden=_PATH_COSTS)


_PATH_COSTS = ("cost2", "cost3", "cost4")
_NEIGHBOUR = ("adj",)  # JSON only: the printed tables stay the manual's


def show_routes(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    node = ctx.node
    rt = node.routes
    p = path_arg(args)
    names = Names(node)
    ports, fds = _port_rows(ctx), _link_fds(ctx)
    mine = node.db.links(node.bridge)
    cols = ["user", "tport", "adj", "state", "cost", "path", "lat", "fd", "route"]
    rows: list[Row] = []
    for dest in node.peers:
        user = names.user(dest)
        to_dest = rt.path_cost(dest, p)
        firsts = [hops[0] if (hops := rt.next_hops(dest, q)) else None for q in range(NUM_PATHS)]
        direct = [link for link in mine if link.peer_bridge == dest]
        inbox = direct[0] if direct else firsts[0]
        found: list[tuple[int, LinkRecord]] = []
        for link in mine:
            via = 0 if link.peer_bridge == dest else rt.path_cost(dest, p, source=link.peer_bridge)
            back = rt.path_cost(node.bridge, p, source=link.peer_bridge)
            if via is None or back is None or to_dest is None:
                continue
            if link.peer_bridge == dest or via < back + to_dest:  # loop-free
                found.append((link.cost[p] + via, link))
        found.sort(key=lambda cl: (cl[1] != firsts[p], cl[0], cl[1].tport_id))
        if not found:
            rows.append(dict.fromkeys(cols) | {"user": user})
        for i, (cost, link) in enumerate(found):
            state = [s for s, on in (("inbox", link == inbox), (_MESH, link.tport_type == _MESH),
                                     ("hb", link.peer_bridge == dest)) if on]
            port = ports.get(_label(link), {})
            peer_addrs = port.get("peer_addrs")
            addr = peer_addrs.get(link.peer_bridge) if isinstance(peer_addrs, dict) else None
            rows.append({
                "user": user, "tport": _label(link), "adj": names.user(link.peer_bridge), "state": state,
                "cost": cost,
                "path": [q for q in range(NUM_PATHS) if firsts[q] == link],
                "lat": (node.peers[dest].latency_ns or None) if i == 0 else None,
                "fd": as_cell(_fd(fds, ports, link)),
                # the manual's `user@type://address` of the neighbour this way, else the port's address
                "route": f"{names.user(link.peer_bridge)}@{link.tport_type}://{addr}" if addr
                else as_cell(port.get("address")),
            })
    return CommandResult(cols, rows, kinds={"lat": Kind.DURATION, "state": Kind.FLAGS}, group="user",
                         blank_repeats=True, hidden=_NEIGHBOUR)


def show_path(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    p = path_arg(args)
    names = Names(ctx.node)
    rows: list[Row] = [
        {"tport": _label(r.link), "cost": r.link.cost[p], "path_cost": r.cost, "dest": names.user(r.dest)}
        for r in ctx.node.routes.routes(p)
    ]
    return CommandResult(["tport", "cost", "path_cost", "dest"], rows)


def show_tree(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    node = ctx.node
    names = Names(node)
    source = names.find_one(args[0]) if args else node.bridge
    p = path_arg(args, 1)
    edges = node.routes.tree(source, p)
    forwarders = {e.src: i for i, e in reversed(list(enumerate(edges)))}  # first appearance
    rows: list[Row] = []
    i = 0
    while i < len(edges):
        j = i
        while j < len(edges) and edges[j].cost == edges[i].cost:
            j += 1
        group = edges[i:j]
        order = sorted(range(len(group)), key=lambda k: (forwarders[group[k].src], group[k].link.tport_id))
        sets = {k: n for n, k in enumerate(order)}
        rows += [{"cost": e.cost, "set": sets[k], "alt": 0, "source": names.user(e.src),
                  "tport": _label(e.link), "dest": names.name(e.dest)} for k, e in enumerate(group)]
        i = j
    return CommandResult(["cost", "set", "alt", "source", "tport", "dest"], rows, group="cost")


def show_forward(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    p = path_arg(args)
    names = Names(ctx.node)
    table = ctx.node.routes.forward_table(p)
    rows: list[Row] = []
    for b in names.users():
        user = names.user(b)
        links = table.get(b, ())
        if not links:
            rows.append({"source": user, "tport": None, "adj": None, "cost": None})
        rows += [{"source": user, "tport": _label(link), "adj": names.user(link.peer_bridge), "cost": link.cost[p]}
                 for link in links]
    return CommandResult(["source", "tport", "adj", "cost"], rows, group="source", blank_repeats=True,
                         hidden=_NEIGHBOUR)


def show_blooms(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    if args and args[0] == COPIES:
        return show_bloom_copies(ctx)
    node = ctx.node
    p = path_arg(args)
    names = Names(node)
    ports, fds = _port_rows(ctx), _link_fds(ctx)
    cols = ["fd", "dest", "tport", "bloom", "prefix", "detail", "subs", "total", *_FILTER_COLUMNS]
    own = node.bloom
    # the own row also carries the advertised filter (hidden columns: JSON only), which
    # the Spark bloom audit re-hashes subscriptions against
    rows: list[Row] = [{"fd": None, "dest": "ipc", "tport": None, "bloom": [names.name(node.bridge)],
                        "prefix": own.prefix_mask, "detail": own.detail_mask, "subs": own.subject_count,
                        "total": own.count, "filter": base64.b64encode(own.to_bytes()).decode(),
                        "size_bits": own.size_bits, "num_hashes": own.num_hashes, "seed": own.seed}]
    behind: dict[bytes, LinkRecord] = {}  # peer -> link of this node it is reached through
    for e in node.routes.tree(node.bridge, p):  # parents come before their children
        behind[e.dest] = e.link if e.src == node.bridge else behind[e.src]
    for link in node.db.links(node.bridge):
        peers = [b for b, first in behind.items() if first == link]
        blooms = [f for b in peers if isinstance(f := node.peers[b].bloom, BloomFilter)]
        rows.append({
            "fd": as_cell(_fd(fds, ports, link)), "dest": names.user(link.peer_bridge),
            "tport": _label(link), "bloom": [names.name(b) for b in peers],
            "prefix": _union(f.prefix_mask for f in blooms), "detail": _union(f.detail_mask for f in blooms),
            "subs": sum(f.subject_count for f in blooms), "total": sum(f.count for f in blooms),
            **dict.fromkeys(_FILTER_COLUMNS),
        })
    return CommandResult(cols, rows, kinds={"prefix": Kind.HEX, "detail": Kind.HEX}, hidden=_FILTER_COLUMNS)


_FILTER_COLUMNS = ("filter", "size_bits", "num_hashes", "seed")
COPIES = "copies"


def show_bloom_copies(ctx: ConsoleContext) -> CommandResult:
    """`show blooms copies`: this node's copy of each peer's filter (dest the peer, no
    transport), the filter bytes in the JSON-only columns, so an audit can compare every
    copy with the filter its owner advertises."""
    node = ctx.node
    names = Names(node)
    cols = ["fd", "dest", "tport", "bloom", "prefix", "detail", "subs", "total", *_FILTER_COLUMNS]
    rows: list[Row] = []
    for b in names.users():
        f = node.peers[b].bloom if b in node.peers else None
        if b == node.bridge or not isinstance(f, BloomFilter):
            continue
        rows.append({"fd": None, "dest": names.user(b), "tport": None, "bloom": [names.name(b)],
                     "prefix": f.prefix_mask, "detail": f.detail_mask, "subs": f.subject_count,
                     "total": f.count, "filter": base64.b64encode(f.to_bytes()).decode(),
                     "size_bits": f.size_bits, "num_hashes": f.num_hashes, "seed": f.seed})
    return CommandResult(cols, rows, kinds={"prefix": Kind.HEX, "detail": Kind.HEX}, hidden=_FILTER_COLUMNS)


def _union(masks: Iterable[int]) -> int:
    out = 0
    for m in masks:
        out |= m
    return out


def show_match(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    names = Names(ctx.node)
    rows: list[Row] = [
        {"user": names.user(b)} for b, peer in ctx.node.peers.items()
        if isinstance(peer.bloom, BloomFilter) and peer.bloom.matches(args[0])
    ]
    return CommandResult(["user"], rows)


def show_graph(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    return CommandResult.lines("graph", graph_from_db(ctx.node.db, ctx.node.bridge).text())

