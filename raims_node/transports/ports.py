"""The `show ports` row of a link transport (tcp, mesh, pgm): its links' byte and frame
counts summed, the flags of the manual's `show ports` (L listen, C connect, D device,
M multicast, N not encrypted) and its addresses."""

from __future__ import annotations

from raims_node.transports.dialer import Running
from raims_node.transports.link import RouterLink


def link_port_row(name: str, run: Running, links: list[RouterLink], encrypted: bool) -> dict[str, object]:
    row: dict[str, object] = {
        "tport": f"{name}.{run.tport_id}", "type": run.cfg.type, "cost": run.cfg.cost[0],
        "fd": len(links),
        "bs": sum(lk.bytes_out for lk in links), "br": sum(lk.bytes_in for lk in links),
        "ms": sum(lk.frames_out for lk in links), "mr": sum(lk.frames_in for lk in links),
        "lat": "", "idle": "",
        "fl": ("L" if run.listen else "") + ("C" if run.connect else "") + ("D" if run.device_ip else "")
              + ("M" if run.pgm is not None else "") + ("" if encrypted and run.pgm is None else "N"),
        "address": ", ".join(run.bound) or ", ".join(lk.peer_addr for lk in links),
    }
    if run.pgm is not None:  # show urls: each peer's unicast inbox
        row["urls"] = run.pgm.urls()
        row["pgm"] = run.pgm.counters()
    return row
