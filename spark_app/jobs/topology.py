"""The deployment plan: which node runs on which host, its links, and the wave it starts in.

Issue "The main job", items 1 and 3 (`--topology mesh|graph FILE`, listeners before
connectors); manual "Networking" (tcp and mesh transports) and the graph text of
"Single File Configuration" (`raims_node.linkstate.graph`). Pure: no Spark, no processes.

Decisions where the issue and the manual are silent:
- `mesh`: nodes `node0` .. `node<N-1>`, all members of one mesh transport named `mesh`.
  A graph file: its node line and its link lines, one transport per line, named as
  ms_test_adj names them (`tcp_link_ab` -> transport `link_ab`).
- Placement: nodes in node-line order, in blocks of `nodes_per_host`: host slot h runs
  nodes [h*k, (h+1)*k). For a graph k is ceil(nodes / hosts) unless given, so the
  node-to-host map can be read off the node line.
- Waves: a connector needs its listener's address, and a listener on port 0 has one only
  once it runs, so nodes start in waves and each wave's listen addresses are exchanged
  before the next starts. A tcp link's end in the lower wave listens, the other connects;
  a mesh link's first member on the node line (its hub) listens and the others connect
  to it, then meet each other through the mesh's member exchange, so a whole mesh takes
  two waves. Waves are assigned greedily in node-line order: the lowest wave above every
  hub of the node's mesh links and unlike the waves of its tcp neighbours placed so far
  (the manual's A-D graph: A and D, then B, then C).
- Link types are those ms_server runs (tcp and mesh); a pgm line is a PlanError.
- The graph must be connected (a graph file's and a generated one alike): a node no link
  reaches would be deployed and then fail the converge stage only after its timeout, so
  it is a PlanError naming the nodes cut off from the first node's component.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from raims_node.config.errors import ConfigError
from raims_node.config.keyset import check_name
from raims_node.config.records import DEFAULT_COST
from spark_app.jobs.errors import PlanError

if TYPE_CHECKING:  # raims_node.linkstate loads scipy: the driver plans, executors only unpickle plans
    from raims_node.linkstate import Graph

MESH_TOPOLOGY: Final = "mesh"
MESH_TPORT: Final = "mesh"
NODE_PREFIX: Final = "node"
RUNNABLE_LINKS: Final = ("tcp", "mesh")
MAX_NODES: Final = 1024
MAX_NAMED: Final = 10  # nodes listed per side of a disconnection


Cost = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class LinkEnd:
    """One node's end of a link transport."""

    tport: str
    type: str
    cost: Cost
    listen: bool
    partners: tuple[str, ...] = ()  # nodes whose listener of `tport` this end connects to


@dataclass(frozen=True, slots=True)
class NodePlan:
    name: str
    index: int  # position on the node line; a fixed base port becomes base + index
    slot: int  # the host slot (barrier partition) that starts it
    wave: int
    links: tuple[LinkEnd, ...]


@dataclass(frozen=True, slots=True)
class Plan:
    topology: str  # "mesh", or the graph file
    hosts: int
    nodes: tuple[NodePlan, ...]

    @property
    def waves(self) -> int:
        return max((n.wave for n in self.nodes), default=-1) + 1

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def on_slot(self, slot: int) -> list[NodePlan]:
        return [n for n in self.nodes if n.slot == slot]

    def nodes_per_host(self) -> int:
        return max((len(self.on_slot(h)) for h in range(self.hosts)), default=0)


def mesh_graph(count: int, cost: int = DEFAULT_COST) -> Graph:
    """`count` nodes on one mesh transport."""
    from raims_node.linkstate import Graph, GraphLink

    if not 2 <= count <= MAX_NODES:
        raise PlanError(f"a mesh needs 2 to {MAX_NODES} nodes, not {count}")
    names = tuple(f"{NODE_PREFIX}{i}" for i in range(count))
    return Graph(names, (GraphLink("mesh", MESH_TPORT, names, (cost,) * 4),))


def read_graph(path: str | Path) -> Graph:
    from raims_node.linkstate import GraphError, parse_graph

    try:
        graph = parse_graph(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlanError(f"graph file {str(path)!r}: {exc.strerror}") from None
    except GraphError as exc:
        raise PlanError(f"graph file {str(path)!r}: {exc}") from None
    if len(graph.nodes) < 2:
        raise PlanError(f"graph file {str(path)!r} declares {len(graph.nodes)} node(s); a network needs 2")
    return graph


def unreachable(graph: Graph) -> list[str]:
    """The nodes no chain of links joins to the first node, in node-line order ([] when
    the graph is connected; a single node is)."""
    if not graph.nodes:
        return []
    neighbours: dict[str, set[str]] = {n: set() for n in graph.nodes}
    for link in graph.links:
        for u in link.nodes:
            neighbours.setdefault(u, set()).update(link.nodes)
    seen, todo = {graph.nodes[0]}, [graph.nodes[0]]
    while todo:
        for v in neighbours[todo.pop()] - seen:
            seen.add(v)
            todo.append(v)
    return [n for n in graph.nodes if n not in seen]


def _named(names: list[str]) -> str:
    more = len(names) - MAX_NAMED
    return ", ".join(names[:MAX_NAMED]) + (f" and {more} more" if more > 0 else "")


def check_connected(graph: Graph, topology: str) -> None:
    """PlanError when some nodes of `graph` cannot reach the others (see Decisions)."""
    cut = unreachable(graph)
    if not cut:
        return
    rest = [n for n in graph.nodes if n not in set(cut)]
    where = f"topology {topology}" if topology == MESH_TOPOLOGY else f"graph file {topology!r}"
    nodes = f"nodes {_named(cut)} are" if len(cut) > 1 else f"node {cut[0]} is"
    raise PlanError(f"{where}: {nodes} not connected to {_named(rest)}")


def _waves(graph: Graph) -> dict[str, int]:
    order = {name: i for i, name in enumerate(graph.nodes)}
    wave: dict[str, int] = {}
    for node in graph.nodes:
        low, taken = 0, set[int]()
        for link in graph.links:
            if node not in link.nodes:
                continue
            if link.type == "mesh":
                hub = min(link.nodes, key=order.__getitem__)
                if hub != node:
                    low = max(low, wave[hub] + 1)
            else:
                taken.update(wave[u] for u in link.nodes if u != node and u in wave)
        w = low
        while w in taken:
            w += 1
        wave[node] = w
    return wave


def _ends(graph: Graph, node: str, wave: dict[str, int]) -> tuple[LinkEnd, ...]:
    order = {name: i for i, name in enumerate(graph.nodes)}
    ends = []
    for link in graph.links:
        if node not in link.nodes:
            continue
        if link.type == "mesh":
            listener = min(link.nodes, key=order.__getitem__)
        else:
            listener = min(link.nodes, key=lambda u: (wave[u], order[u]))
        listen = listener == node
        ends.append(LinkEnd(link.name, link.type, link.cost, listen, () if listen else (listener,)))
    return tuple(ends)


def make_plan(graph: Graph, hosts: int, nodes_per_host: int | None = None,
              topology: str = MESH_TOPOLOGY) -> Plan:
    """Place the nodes of `graph` on `hosts` host slots and order their start."""
    if hosts < 1:
        raise PlanError(f"a rollout needs at least one executor host, not {hosts}")
    for link in graph.links:
        if link.type not in RUNNABLE_LINKS:
            raise PlanError(f"link {link.type}_{link.name}: ms_server runs {', '.join(RUNNABLE_LINKS)} "
                            f"links, not {link.type}")
    for name in graph.nodes:
        try:
            check_name(name, "node")
        except ConfigError as exc:
            raise PlanError(str(exc)) from None
    per_host = nodes_per_host or math.ceil(len(graph.nodes) / hosts)
    if per_host * hosts < len(graph.nodes):
        raise PlanError(f"{len(graph.nodes)} nodes do not fit on {hosts} host(s) with "
                        f"{per_host} node(s) per host")
    check_connected(graph, topology)
    wave = _waves(graph)
    nodes = tuple(NodePlan(name, i, i // per_host, wave[name], _ends(graph, name, wave))
                  for i, name in enumerate(graph.nodes))
    return Plan(topology, hosts, nodes)


def mesh_plan(hosts: int, nodes_per_host: int, cost: int = DEFAULT_COST) -> Plan:
    return make_plan(mesh_graph(hosts * nodes_per_host, cost), hosts, nodes_per_host)


def graph_plan(path: str | Path, hosts: int, nodes_per_host: int | None = None) -> Plan:
    return make_plan(read_graph(path), hosts, nodes_per_host, str(path))
