"""The network graph text of "show graph" and ms_test_adj (manual: "Single File
Configuration", console "show graph").

    start A
    node A B C D
    tcp_link_ab A B : 200
    mesh_link_abcd A B C D : 100 1000 100 1000

`start` names the node the text was printed from, `node` lists the users oldest first,
and each other line is `<type>_<tport name>` followed by the nodes the transport
connects and, after `:`, its cost (omitted when it is the default 1000).

Decisions where the manual is vague:
- Types are `tcp`, `mesh` and `pgm`. A tcp line connects exactly two nodes (the
  manual's lines all do, and a single listener is then unambiguous); mesh and pgm lines
  connect all of theirs, two or more.
- One cost applies to all four paths; 2 to 4 values fill the paths cyclically.
- Every node on a link line must be declared on a `node` line, and link names are
  unique, since ms_test_adj turns each line into one transport named after it.
- `#` starts a comment; blank lines are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

from raims_node.linkstate.errors import GraphError, InvalidRecord
from raims_node.linkstate.records import DEFAULT_COST, NUM_PATHS, Cost, expand_cost

LINK_TYPES = ("tcp", "mesh", "pgm")
DEFAULT_COSTS: Cost = (DEFAULT_COST, DEFAULT_COST, DEFAULT_COST, DEFAULT_COST)


@dataclass(frozen=True, slots=True)
class GraphLink:
    type: str
    name: str
    nodes: tuple[str, ...]
    cost: Cost = DEFAULT_COSTS

    def text(self) -> str:
        line = f"{self.type}_{self.name} {' '.join(self.nodes)}"
        if len(set(self.cost)) > 1:
            return f"{line} : {' '.join(map(str, self.cost))}"
        if self.cost[0] != DEFAULT_COST:
            return f"{line} : {self.cost[0]}"
        return line


@dataclass(frozen=True, slots=True)
class Graph:
    nodes: tuple[str, ...]
    links: tuple[GraphLink, ...]
    start: str | None = None

    def text(self) -> str:
        lines = [] if self.start is None else [f"start {self.start}"]
        lines.append(" ".join(("node", *self.nodes)))
        lines.extend(link.text() for link in self.links)
        return "\n".join(lines) + "\n"


def parse_graph(text: str) -> Graph:
    nodes: list[str] = []
    links: list[GraphLink] = []
    start: tuple[str, int] | None = None
    names: set[str] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        keyword, args = words[0], words[1:]
        if keyword == "start":
            if len(args) != 1 or start is not None:
                raise GraphError("expected one 'start <node>' line", number)
            start = (args[0], number)
        elif keyword == "node":
            for name in args:
                if name in nodes:
                    raise GraphError(f"node {name!r} declared twice", number)
                nodes.append(name)
        else:
            link = _parse_link(keyword, args, number, nodes)
            if link.name in names:
                raise GraphError(f"link name {link.name!r} used twice", number)
            names.add(link.name)
            links.append(link)
    if not nodes:  # nothing to run: an empty file, or only comments
        raise GraphError("no 'node' line: a graph declares its nodes first (node A B C ...)")
    if start is not None and start[0] not in nodes:
        raise GraphError(f"start node {start[0]!r} is not declared", start[1])
    return Graph(tuple(nodes), tuple(links), None if start is None else start[0])


def _parse_link(keyword: str, args: list[str], number: int, declared: list[str]) -> GraphLink:
    type_, sep, name = keyword.partition("_")
    if type_ not in LINK_TYPES or not sep or not name:
        raise GraphError(
            f"{keyword!r} is not 'node', 'start' or <type>_<name> with type in {LINK_TYPES}",
            number,
        )
    members, cost_words = args, []
    for i, word in enumerate(args):
        if word.startswith(":"):
            members, cost_words = args[:i], ([word[1:]] if word[1:] else []) + args[i + 1 :]
            break
    if len(members) < 2 or len(set(members)) != len(members):
        raise GraphError(f"{keyword} needs at least 2 distinct nodes, got {members}", number)
    if type_ == "tcp" and len(members) != 2:
        raise GraphError(f"{keyword} connects {len(members)} nodes, a tcp link connects 2", number)
    for m in members:
        if m not in declared:
            raise GraphError(f"node {m!r} of {keyword} is not declared on a node line", number)
    cost = DEFAULT_COSTS
    if cost_words:
        if len(cost_words) > NUM_PATHS or not all(w.isdigit() for w in cost_words):
            raise GraphError(f"cost {' '.join(cost_words)!r} is not 1 to 4 integers", number)
        try:
            cost = expand_cost([int(w) for w in cost_words])
        except InvalidRecord as exc:
            raise GraphError(str(exc), number) from exc
    return GraphLink(type_, name, tuple(members), cost)
