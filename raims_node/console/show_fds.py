"""The show commands over the daemon's file descriptors: show fds, show buffers and show
urls (manual, "The Show Commands"). The rows come from the daemon's fd table
(`ConsoleContext.fds`, transports/fds.py: one row per network socket, with its real OS
fd), its port rows (`ports`) and the router (`Node.conns`, `show routes`).

Decisions where the manual is vague, or raims has no such state:
- `show fds`: the manual's columns, one row per socket the node uses for the network:
  transport listeners, links (tcp_accept / tcp_connect), bridge clients (nats_accept,
  redis_accept, rv_accept, ipc_accept), PGM group and inbox sockets, name service
  sockets, telnet and web listeners and their sessions (telnet_accept, web_accept);
  sorted by fd. No rows for the C++ server's internal
  fds (logger, timer queue, routes): a Python process has none of them. `name` is
  `<tport>.<kind>.<rid>` as the manual's (`mesh.tcp_acc.1`) without the service
  prefix; `address` is a listener's local address, a connection's remote one, led by
  the neighbour's `user.N@` on a link once it is authenticated (the manual's
  `lex_a2.1@172.18.0.3:41708`). `ms`/`mr` count frames on a link, messages on a bridge
  client; `fl` is R (read), W (output waits), + (input waits), L (a listener). The
  meaning of each column, and what is empty, is in transports/fds.py.
- `show buffers`: one row per connection fd (no listeners). `wr` is the bytes waiting to
  be written (raims' queues and the asyncio transport's buffer), `wmax` its peak (the
  manual's "the largest write buffer used"; it showed asyncio's limit before), `rd` the
  bytes held unparsed, `rmax` the largest read (or rd when more; an ipc client's packet
  buffer); `send`/`recv` bytes.
  `zref`, `mall` and `pall` count the C++ server's zero-copy sends and buffer pool
  allocations: Python has no such pools, so they are 0.
- `show urls`: two sections, as the manual's example (a hidden `section` column groups
  them, so the text has a rule between): `ports`, each transport (its `show ports` row:
  state is its flags, url its listener's `type://address`, fd its endpoint's: the
  listener, or the connection of a transport that only dials) followed
  by each of its connections (user the neighbour, state C for a link this node dialed,
  A for one it accepted, url the address dialed or a PGM peer's inbox, local and remote
  the connection's addresses); then `routes`, the rows of `show routes` with the fd of
  the link each route starts on and, on the direct link to the user, its url, local and
  remote. A mesh peer's listening url is not kept per peer, so an accepted link's url is
  empty (its remote address is the peer's ephemeral port, as the manual notes).
"""

from __future__ import annotations

from raims_node.console.context import ConsoleContext
from raims_node.console.names import Names
from raims_node.console.result import CommandResult, Kind, Row, as_cell
from raims_node.console.show_routes import show_routes

FD_COLUMNS = ["fd", "rid", "bs", "br", "ms", "mr", "ac", "rq", "wq", "fl", "type", "kind", "name", "address"]
BUFFER_COLUMNS = ["fd", "wr", "wmax", "rd", "rmax", "zref", "send", "recv", "mall", "pall", "name"]
URL_COLUMNS = ["user", "tport", "state", "cost", "mesh", "fd", "url", "local", "remote"]
_SECTION = ("section",)


def show_fds(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    names = Names(ctx.node)
    rows: list[Row] = []
    for r in ctx.fds():
        row: Row = {c: as_cell(r.get(c)) for c in FD_COLUMNS}
        peer = r.get("peer")
        if isinstance(peer, bytes) and row["address"]:
            row["address"] = f"{names.user(peer)}@{row['address']}"
        rows.append(row)
    return CommandResult(FD_COLUMNS, rows)


def show_buffers(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    rows: list[Row] = [{c: as_cell(r.get(c)) for c in BUFFER_COLUMNS} for r in ctx.fds() if "wr" in r]
    return CommandResult(BUFFER_COLUMNS, rows)


def _words(cell: object) -> list[str]:
    return [str(w) for w in cell] if isinstance(cell, list) else []


def show_urls(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    node = ctx.node
    names = Names(node)
    fds = ctx.fds()
    conns = {r["conn_id"]: r for r in fds if isinstance(r.get("conn_id"), int)}
    listeners: dict[str, object] = {}
    for r in fds:
        if str(r.get("kind", "")).endswith("_listen"):
            listeners.setdefault(str(r.get("tport")), r.get("fd"))
    tports = {t.tport_id: t for t in node.tports}
    rows: list[Row] = []
    by_link: dict[tuple[str, bytes], Row] = {}  # (tport label, neighbour) -> its connection's row
    for port in ctx.ports():
        label, typ = str(port.get("tport", "")), str(port.get("type", ""))
        name, _, tid = label.rpartition(".")
        name = name or label
        mesh = name if typ == "mesh" else None
        address = str(port.get("address") or "")
        rows.append({"section": "ports", "user": None, "tport": label, "state": as_cell(port.get("fl")), "cost": None,
                     "mesh": mesh, "fd": as_cell(port.get("fd")),
                     "url": f"{typ}://{address}" if address and listeners.get(name) is not None else None,
                     "local": None, "remote": None})
        pgm_urls = port.get("urls")
        for c in node.conns.values():
            t = tports.get(c.tport.tport_id)
            if c.peer is None or not c.active or t is None or str(t.tport_id) != tid or t.name != name:
                continue
            fd: dict[str, object] = conns.get(c.conn_id, {})
            url = fd.get("url") or (pgm_urls.get(c.conn_id) if isinstance(pgm_urls, dict) else None)
            row: Row = {"section": "ports", "user": names.user(c.peer), "tport": label,
                        "state": None if not fd else "C" if fd.get("kind") == "tcp_connect" else "A", "cost": None,
                        "mesh": mesh, "fd": as_cell(fd.get("fd")), "url": as_cell(url),
                        "local": as_cell(fd.get("local")), "remote": as_cell(fd.get("remote"))}
            rows.append(row)
            by_link[(label, c.peer)] = row
    bridges = {names.user(b): b for b in [*node.peers, node.bridge]}
    for route in show_routes(ctx, []).rows:
        adj = bridges.get(str(route.get("adj")))
        link: Row | None = by_link.get((str(route.get("tport")), adj)) if adj is not None else None
        direct = link is not None and route.get("adj") == route.get("user")
        rows.append({"section": "routes", "user": route.get("user"), "tport": route.get("tport"), "state": route.get("state"),
                     "cost": route.get("cost"), "mesh": str(route.get("tport")).rpartition(".")[0]
                     if "mesh" in _words(route.get("state")) else None,
                     "fd": link.get("fd") if link is not None else None,
                     **{k: link.get(k) if direct and link is not None else None for k in ("url", "local", "remote")}})
    cols = [*URL_COLUMNS, *_SECTION]
    return CommandResult(cols, [{c: r.get(c) for c in cols} for r in rows], kinds={"state": Kind.FLAGS}, group="section",
                         hidden=_SECTION)
