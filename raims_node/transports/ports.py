"""The `show ports` row of a link transport (tcp, mesh, pgm): its links' byte and frame
counts summed, the latency of the peers on them (the last ping's, the lowest) and how
long since one of them last sent a frame (`idle`, the manual's "last time a message
event occurred"), the flags of the manual's `show ports` (L listen, C connect, D device,
M multicast, N not encrypted) and its addresses."""

from __future__ import annotations

from raims_node.router.node import Node
from raims_node.transports.dialer import Running
from raims_node.transports.link import RouterLink


def link_port_row(name: str, run: Running, links: list[RouterLink], encrypted: bool, node: Node,
                  now_ns: int) -> dict[str, object]:
    linked = [(lk, c) for lk in links if (c := node.conns.get(lk.conn_id)) is not None and c.peer is not None]
    conns = [c for _, c in linked]
    lats = [p.latency_ns for p in (node.peers.get(c.peer) for c in conns if c.peer) if p is not None and p.latency_ns]
    row: dict[str, object] = {
        "tport": f"{name}.{run.tport_id}", "type": run.cfg.type, "cost": run.cfg.cost[0],
        "fd": None, "conns": len(links),  # fd: its endpoint's (transports/fds.py port_fds)
        "bs": sum(lk.bytes_out for lk in links), "br": sum(lk.bytes_in for lk in links),
        "ms": sum(lk.frames_out for lk in links), "mr": sum(lk.frames_in for lk in links),
        "lat": min(lats) if lats else "",
        "idle": max(0, now_ns - max(c.last_recv_ns for c in conns)) if conns else "",
        "fl": ("L" if run.listen else "") + ("C" if run.connect else "") + ("D" if run.device_ip else "")
              + ("M" if run.pgm is not None else "") + ("" if encrypted and run.pgm is None else "N"),
        "address": ", ".join(run.bound) or ", ".join(lk.peer_addr for lk in links),
    }
    row["status"] = run.error if run.error and not linked else row["address"]  # show status
    # show routes: the address of each neighbour at the other end of one of these links
    row["peer_addrs"] = {c.peer: lk.peer_addr for lk, c in linked if lk.peer_addr}
    if run.pgm is not None:  # show urls: each peer's unicast inbox
        row["urls"] = run.pgm.urls()
        row["pgm"] = run.pgm.counters()
    return row
