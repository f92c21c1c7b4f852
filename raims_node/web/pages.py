"""The web transport's HTML pages, compiled in (manual, "Web": "a set of html pages
compiled into the binary that it uses for viewing the server state"; no file or
network access unless `http_dir` is set).

- `/index.html` (and `/` without a query): the node, and a link to every show command.
- `/show/<words>` (e.g. `/show/peers`, `/show/running/transport`): the command's rows as
  an HTML table, the same rows `GET /?show peers` answers as JSON.
- `/graph`: the network drawn from the link-state database as inline SVG: users on a
  circle (this node filled), one line per link with its path-0 cost.
- `/graph_nodes.html`: the manual's page to paste a graph's text (`show graph`, or
  ms_test_adj's input) into and draw it the same way; it opens with the network's own.
- `http_dir`: a file there overrides the page of the same name; in an `.html` file
  `@(show ports)` is replaced by that command's table (the manual's templating).
"""

from __future__ import annotations

import html
import math
import re
from pathlib import Path

from raims_node.console.commands import COMMANDS
from raims_node.console.render import format_cell
from raims_node.console.result import CommandResult
from raims_node.linkstate import parse_graph
from raims_node.linkstate.errors import GraphError
from raims_node.router.node import Node

TEMPLATE = re.compile(r"@\(([^)]*)\)")
STYLE = """body{font-family:sans-serif;margin:1.5em;background:#fafafa;color:#222}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#e8eef6}tr:nth-child(even) td{background:#f3f3f3}a{color:#1a5fb4}
.err{color:#a00}nav a{margin-right:1em}"""


def page(title: str, body: str) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><nav><a href='/index.html'>index</a>"
            f"<a href='/graph'>graph</a></nav><h2>{html.escape(title)}</h2>{body}</body></html>")


def table_html(result: CommandResult) -> str:
    if result.error:
        return f"<p class='err'>{html.escape(result.error)}</p>"
    cols = [c for c in result.columns if c not in result.hidden]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(format_cell(r.get(c), result.kinds.get(c)))}</td>"
                                    for c in cols) + "</tr>" for r in result.rows)
    return f"<table><tr>{head}</tr>{rows}</table><p>{len(result.rows)} rows</p>"


def index_html(node: Node) -> str:
    # the show commands that need no argument: a link to one that does would be an error page
    links = "".join(f"<li><a href='/show/{'/'.join(c.words[1:])}'>{html.escape(c.name)}</a> "
                    f"&mdash; {html.escape(c.description)}</li>"
                    for c in COMMANDS if c.words[0] == "show" and c.handler is not None and not c.required)
    return page(f"{node.user}.{node.service}", f"<ul>{links}</ul>")


def graph_svg(node: Node, size: int = 640) -> str:
    """The link-state database as SVG: every known user on a circle, links with costs."""
    names = {node.bridge: node.user, **{b: p.user for b, p in node.peers.items()}}
    edges = [(names[b], names[link.peer_bridge], link.cost[0])
             for b in names for link in node.db.links(b) if link.peer_bridge in names]
    return draw_graph(sorted(names.values(), key=lambda u: (u != node.user, u)), edges, node.user, size)


def draw_graph(users: list[str], edges: list[tuple[str, str, int]], me: str | None, size: int = 640) -> str:
    """`users` on a circle (`me` filled, first at the top), one line per pair of `edges`
    (user, user, path-0 cost) with its cost, as SVG."""
    n = max(1, len(users))
    c, r = size / 2, size / 2 - 70
    pos = {u: (c + r * math.cos(2 * math.pi * i / n - math.pi / 2),
               c + r * math.sin(2 * math.pi * i / n - math.pi / 2)) for i, u in enumerate(users)}
    seen: set[tuple[str, str]] = set()
    lines = []
    for a, b, cost in edges:
        key = (min(a, b), max(a, b))
        if a not in pos or b not in pos or key in seen:
            continue
        seen.add(key)
        (x1, y1), (x2, y2) = pos[a], pos[b]
        lines.append(f"<line x1='{x1:.1f}' y1='{y1:.1f}' x2='{x2:.1f}' y2='{y2:.1f}' stroke='#5b7fa6' "
                     f"stroke-width='2'/><text x='{(x1 + x2) / 2:.1f}' y='{(y1 + y2) / 2 - 4:.1f}' "
                     f"font-size='12' fill='#444'>{cost}</text>")
    circles = []
    for u in users:
        x, y = pos[u]
        fill, text = ("#1a5fb4", "#ffffff") if u == me else ("#ffffff", "#222222")
        circles.append(f"<circle cx='{x:.1f}' cy='{y:.1f}' r='26' fill='{fill}' stroke='#1a5fb4' stroke-width='2'/>"
                       f"<text x='{x:.1f}' y='{y + 5:.1f}' text-anchor='middle' font-size='14' "
                       f"fill='{text}'>{html.escape(u)}</text>")
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{size}' height='{size}' "
            f"viewBox='0 0 {size} {size}'>{''.join(lines)}{''.join(circles)}</svg>")


def graph_nodes_html(text: str) -> str:
    """The manual's /graph_nodes.html: a text box holding a graph in `show graph`'s text
    (the network's own unless one was submitted) and the drawing of it, or why not."""
    form = (f"<form method='get' action='/graph_nodes.html'><textarea name='graph' rows='12' cols='60'>"
            f"{html.escape(text)}</textarea><br><button type='submit'>show graph</button></form>")
    try:
        graph = parse_graph(text)
    except GraphError as exc:
        return page("graph nodes", form + f"<p class='err'>{html.escape(str(exc))}</p>")
    edges = [(a, b, link.cost[0]) for link in graph.links for a in link.nodes for b in link.nodes if a < b]
    users = sorted(graph.nodes, key=lambda u: (u != graph.start, graph.nodes.index(u)))
    return page("graph nodes", form + draw_graph(users, edges, graph.start) +
                f"<p>{len(graph.nodes)} users, {len(graph.links)} links</p>")


def graph_html(node: Node) -> str:
    peers = len(node.peers)
    return page(f"network graph from {node.user}", graph_svg(node) + f"<p>{peers + 1} users, "
                f"{'converged' if node.converged else 'not converged'}</p>")


def from_dir(http_dir: Path, name: str, run: object) -> str | None:
    """An `http_dir` file's text with `@(command)` expanded by `run(command) -> html`,
    or None when there is no such file (or it would leave the directory)."""
    base = http_dir.resolve()
    path = (base / name).resolve()
    if base not in path.parents or not path.is_file():
        return None
    text = path.read_text(errors="replace")
    if path.suffix == ".html" and callable(run):
        text = TEMPLATE.sub(lambda m: str(run(m.group(1))), text)
    return text
