"""The daemon's network file descriptors, one row each, for the console's `show fds`,
`show buffers` and `show urls` (console/show_fds.py).

A row is a dict with the keys of the manual's `show fds` and `show buffers` columns and a
few the console formats (decisions below):

- fd: the OS file descriptor (`socket.fileno()`, through the asyncio transport's
  `socket` extra info), so it is the one /proc/<pid>/fd lists.
- rid: the node's transport id (Node.tports), -1 for a socket of no transport (telnet,
  web, a name service).
- type: the transport's type (tcp, mesh, nats, redis, rv, ipc, pgm, name, telnet, web);
  kind: what the fd does: tcp_listen, tcp_accept, tcp_connect (links), unix_listen,
  <type>_accept (a bridge's client: nats_accept, redis_accept, rv_accept, ipc_accept),
  pgm_group, pgm_inbox, mcast_recv, mcast_send (udp).
- name: "<tport>.<short kind>.<rid>" as the manual's `rvd.lex_amesh.tcp_acc.1` (without
  the service prefix): tcp_list, tcp_acc, tcp_conn, <type>_acc, pgm_grp, pgm_inbox,
  name_recv, name_send; a socket of no transport drops the id.
- bs/br/ms/mr: bytes and messages (frames for a link) sent and received on the fd; empty
  for a listener and for a UDP socket whose counts are the transport's (show pgm).
- ac: a listener's accepted connections since its transport started (the transport's
  count on each of its listeners when it has several; the telnet and web listeners keep
  none: empty).
- rq: bytes raims holds read but not yet processed (a partial frame, a backlog); wq:
  bytes waiting to be written: queued in raims and in the asyncio transport.
- fl: R the fd is being read (not paused by flow control), W output waits (wq > 0),
  + input waits to be processed (rq > 0); a listener shows L.
- address: a listener's (or UDP socket's) local address; a connection's remote address.
- wr/wmax (show buffers): wq, and its peak, the manual's "largest write buffer used"
  (the output held is checked once a loop pass, when frames are queued behind a full
  socket and at the query, not on each write; an ipc client's outbox when it queues);
  rd/rmax: rq and the largest read (one read's bytes, or rq when more; an ipc socket's
  packet buffer, a web session's are not known: empty).
- telnet and web sessions: a row each (kind telnet_accept, web_accept, rid -1; a web
  one is an open HTTP or websocket connection, the one asking included); a telnet
  session counts its bytes, a web one's counts are aiohttp's, not kept: empty.
- the keys conn_id (Node.conns), peer (the neighbour's bridge id), tport (its label),
  local, remote and url are for `show urls`.

`port_fds` gives the `show ports` rows (and so `show status`, `cost`, `reachable`,
`urls`) the fd of each transport's endpoint, as the manual's "the fd field is the
endpoint for the transport, usually a listener or a fd assigned to the transport": its
(lowest) listener; else its PGM group socket or a name service's multicast receive
socket; else, for a transport that only dials, its (lowest) connection. The manual
prints a mesh or an accepted connection as a port of its own with the connection's fd;
raims prints a transport once, so its connections' fds are in `show fds`, `show urls`
and `show routes` (a route's fd is its link's connection, console/show_routes.py).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol, cast

from raims_node.router.node import Node
from raims_node.transports.tcp import LinkProtocol

if TYPE_CHECKING:
    from raims_node.bridges.glue import BridgeServer
    from raims_node.transports.dialer import Running
    from raims_node.transports.link import RouterLink
    from raims_node.transports.name import NameService

FdRow = dict[str, object]


class Discovery(Protocol):
    @property
    def names(self) -> dict[str, NameService]: ...


class FdHost(Protocol):
    """What the fd table reads of the daemon."""

    node: Node
    running: dict[str, Running]
    links: dict[int, RouterLink]
    extra_ports: list[Callable[[], list[dict[str, object]]]]

    @property
    def discovery(self) -> Discovery: ...



def sock_fd(transport: asyncio.BaseTransport | None) -> int | None:
    """The OS fd of a transport's socket; None when it has none (closed)."""
    sock = transport.get_extra_info("socket") if transport is not None else None
    try:
        fd = sock.fileno() if sock is not None else -1
    except (OSError, ValueError):
        return None
    return fd if fd >= 0 else None


def addr(info: object) -> str:
    if isinstance(info, tuple) and len(info) >= 2:
        host = str(info[0])
        return f"[{host}]:{info[1]}" if ":" in host else f"{host}:{info[1]}"
    return str(info or "")


def _flags(reading: bool, rq: int, wq: int) -> str:
    return ("R" if reading else "") + ("W" if wq else "") + ("+" if rq else "")


def listener_rows(socks: Iterable[socket.socket], rid: int, tport: str, typ: str, kind: str,
                  accepts: int | None) -> list[FdRow]:
    rows: list[FdRow] = []
    short = kind.replace("_listen", "_list")
    for sock in socks:
        fd = sock.fileno()
        if fd < 0:
            continue
        rows.append({"fd": fd, "rid": rid, "ac": accepts, "rq": 0, "wq": 0, "fl": "L", "type": typ, "kind": kind,
                     "name": f"{tport}.{short}" + (f".{rid}" if rid >= 0 else ""),
                     "address": addr(sock.getsockname()), "tport": tport})
    return rows


def link_row(link: LinkProtocol, tport: str, typ: str, peer: bytes | None) -> FdRow | None:
    tr = link.transport
    fd = sock_fd(tr)
    if fd is None:
        return None
    rq, wq = link.unread, link.buffered
    kind, short = ("tcp_connect", "tcp_conn") if link.outbound else ("tcp_accept", "tcp_acc")
    return {"fd": fd, "rid": link.tport_id, "bs": link.bytes_out, "br": link.bytes_in, "ms": link.frames_out,
            "mr": link.frames_in, "rq": rq, "wq": wq, "fl": _flags(link.reading, rq, wq), "type": typ,
            "kind": kind, "name": f"{tport}.{short}.{link.tport_id}", "address": link.peer_addr,
            "wr": wq, "wmax": max(link.wr_peak, wq), "rd": rq, "rmax": max(link.rd_peak, rq),
            "send": link.bytes_out, "recv": link.bytes_in,
            "conn_id": link.conn_id, "peer": peer, "tport": tport, "local": link.local_addr,
            "remote": link.peer_addr, "url": f"{typ}://{link.peer_addr}" if link.outbound else None}


def bridge_rows(bridge: BridgeServer, rid: int, tport: str) -> list[FdRow]:
    """A bridge transport's listeners and clients (NATS, Redis, RV: glue.SessionProtocol;
    ipc: its unix socket and ipc_client.IpcClient)."""
    typ = bridge.kind
    socks: list[socket.socket] = [s for srv in bridge.servers for s in srv.sockets]
    own = getattr(bridge, "_sock", None)  # the ipc transport's unix listener
    rows = listener_rows(socks, rid, tport, typ, "tcp_listen", bridge.accepts)
    if isinstance(own, socket.socket):
        rows += listener_rows([own], rid, tport, typ, "unix_listen", bridge.accepts)
        for row in rows:
            row["address"] = row["address"] or ", ".join(bridge.bound)
    base = {"rid": rid, "type": typ, "kind": f"{typ}_accept", "name": f"{tport}.{typ}_acc.{rid}", "tport": tport}
    for proto in bridge.conns:
        session, tr = proto.session, proto.transport
        fd = sock_fd(tr)
        if session is None or fd is None:
            continue
        rq, wq = proto.unread, proto.unsent
        peer = tr.get_extra_info("peername") if tr is not None else None
        rows.append(base | {"fd": fd, "bs": session.bytes_out, "br": proto.bytes_in, "ms": session.msgs_out,
                            "mr": session.msgs_in, "rq": rq, "wq": wq, "fl": _flags(proto.reading, rq, wq),
                            "address": addr(peer), "wr": wq, "wmax": max(proto.wr_peak, wq), "rd": rq,
                            "rmax": max(proto.rd_peak, rq),
                            "send": session.bytes_out, "recv": proto.bytes_in})
    ipc_clients = getattr(bridge, "clients", {}).values() if typ == "ipc" else ()  # (rv's `clients` are counts)
    for client in ipc_clients:
        wq = client.buffered
        rows.append(base | {"fd": client.fd, "bs": client.bytes_out, "br": client.bytes_in, "ms": client.msgs_out,
                            "mr": client.msgs_in, "rq": 0, "wq": wq, "fl": _flags(True, 0, wq),
                            "address": ", ".join(bridge.bound), "wr": wq, "wmax": max(client.wr_peak, wq), "rd": 0,
                            "rmax": getattr(bridge.settings, "max_packet", 0) + 1, "send": client.bytes_out,
                            "recv": client.bytes_in})
    return rows


def session_row(session: object, tport: str, typ: str) -> FdRow | None:
    """A console connection: a telnet session (console/telnet.py, which counts its bytes
    and peaks) or a web one (aiohttp's request handler: no counts, wmax/rmax unknown)."""
    tr = getattr(session, "transport", None)  # duck-typed: uvloop's are not asyncio subclasses
    fd = sock_fd(cast(asyncio.BaseTransport, tr)) if hasattr(tr, "get_extra_info") else None
    if fd is None or tr is None:
        return None
    size = getattr(tr, "get_write_buffer_size", None)
    wq = int(size()) if callable(size) else 0
    bs, br = getattr(session, "bytes_out", None), getattr(session, "bytes_in", None)
    wr_peak, rd_peak = getattr(session, "wr_peak", None), getattr(session, "rd_peak", None)
    return {"fd": fd, "rid": -1, "bs": bs, "br": br, "rq": 0, "wq": wq, "fl": _flags(True, 0, wq), "type": typ,
            "kind": f"{typ}_accept", "name": f"{tport}.{typ}_acc", "address": addr(tr.get_extra_info("peername")),
            "wr": wq, "wmax": max(wr_peak, wq) if isinstance(wr_peak, int) else None, "rd": 0, "rmax": rd_peak,
            "send": bs, "recv": br, "tport": tport}


def _udp_row(sock: object, rid: int, tport: str, typ: str, kind: str, short: str) -> FdRow | None:
    """A UDP socket: a plain one, or an asyncio datagram transport's."""
    if isinstance(sock, asyncio.BaseTransport):
        sock = sock.get_extra_info("socket")
    try:
        fd, local = sock.fileno(), sock.getsockname()  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return None
    if fd < 0:
        return None
    return {"fd": fd, "rid": rid, "rq": 0, "wq": 0, "fl": "R" if kind != "mcast_send" else "", "type": typ,
            "kind": kind, "name": f"{tport}.{short}" + (f".{rid}" if rid >= 0 else ""), "address": addr(local),
            "tport": tport}


def run_rows(daemon: FdHost, name: str, run: Running) -> list[FdRow]:
    """One running transport's fds: listeners, links, bridge clients, PGM sockets."""
    rid, typ = run.tport_id, run.cfg.type
    if run.bridge is not None:
        return bridge_rows(run.bridge, rid, name)
    socks = [s for srv in run.servers for s in srv.sockets]
    rows = listener_rows(socks, rid, name, typ, "tcp_listen", run.accepts)
    if run.pgm is not None:
        group, inbox = run.pgm.transports()
        rows += [r for r in (_udp_row(group, rid, name, typ, "pgm_group", "pgm_grp"),
                             _udp_row(inbox, rid, name, typ, "pgm_inbox", "pgm_inbox")) if r is not None]
    for link in daemon.links.values():
        if link.tport_id == rid and isinstance(link, LinkProtocol):
            conn = daemon.node.conns.get(link.conn_id)
            row = link_row(link, name, typ, conn.peer if conn is not None else None)
            if row is not None:
                rows.append(row)
    return rows


_ENDPOINT_KINDS = ("pgm_group", "mcast_recv")  # a UDP transport's endpoint, when it has no listener


def _endpoint(rows: list[FdRow]) -> object:
    """The fd that stands for a transport in `show ports` (module docstring)."""
    for pick in (lambda r: str(r.get("kind", "")).endswith("_listen"), lambda r: r.get("kind") in _ENDPOINT_KINDS,
                 lambda r: True):
        fds = [int(str(r["fd"])) for r in rows if pick(r)]
        if fds:
            return min(fds)
    return None


def port_fds(ports: list[dict[str, object]], fds: list[FdRow]) -> list[dict[str, object]]:
    """The `show ports` rows with each one's real endpoint fd (module docstring); the
    port row of transport `name` with id `rid` is labelled `name.rid` (`name` when it
    has no id: telnet, web, a name service)."""
    by_label: dict[str, list[FdRow]] = {}
    for r in fds:
        rid = r.get("rid")
        label = f"{r.get('tport')}.{rid}" if isinstance(rid, int) and rid >= 0 else str(r.get("tport"))
        by_label.setdefault(label, []).append(r)
    for port in ports:
        port["fd"] = _endpoint(by_label.get(str(port.get("tport")), []))
    return ports


def daemon_fds(daemon: FdHost) -> list[FdRow]:
    """Every network fd of the daemon, by fd number (module docstring)."""
    rows: list[FdRow] = []
    for name, run in daemon.running.items():
        rows += run_rows(daemon, name, run)
    for device, names in daemon.discovery.names.items():
        recv, send = names.transports()
        rows += [r for r in (_udp_row(recv, -1, device, "name", "mcast_recv", "name_recv"),
                             _udp_row(send, -1, device, "name", "mcast_send", "name_send")) if r is not None]
    for extra in daemon.extra_ports:  # telnet and web listeners and their sessions (server.py)
        for port in extra():
            socks, sessions = port.get("sockets"), port.get("sessions")
            tport, typ = str(port.get("tport")), str(port.get("type"))
            if isinstance(socks, list):
                rows += listener_rows(socks, -1, tport, typ, f"{typ}_listen", None)
            if callable(sessions):
                rows += [r for s in sessions() if (r := session_row(s, tport, typ)) is not None]
    for row in rows:
        row.setdefault("zref", 0)
        row.setdefault("mall", 0)
        row.setdefault("pall", 0)
    return sorted(rows, key=lambda r: int(str(r["fd"])))
