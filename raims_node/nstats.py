"""`_N.` statistics subjects (manual "System subjects": "link and peer statistics like
messages sent or received, bytes sent or received ... not sent unless there are
subscriptions open").

Subjects, as the authors' ms_server names them (its sub_const.h / stats.cpp):
- `_N.PEER.<user>.<uid>`: one per peer this node knows (uid 0: itself), fields
  user, peer, uid, sub_cnt (subscriptions of that peer known here), latency (last ping
  round trip, "1.2ms" style), cost (path 0 route cost to it).
- `_N.PORT.<user>.<tport>.<tport_id>`: one per link transport with links, fields user,
  tport, tport_id, fd_cnt (links), uid_cnt (peers), bs/br/ms/mr (bytes and frames
  sent / received since the last publish) and bs_tot/br_tot/ms_tot/mr_tot (totals).
- `_N.ALL.<user>`: the sum over the ports, same fields without tport.
- `_N.ADJ.<user>`: an adjacency notification, in the first round after this node's
  link state changed (its link_seqno), fields user, link_seqno, neighbors (the users
  with a direct link).

Decisions: the payload is JSON (what NATS, Redis and sbus clients read as text), not
ms_server's binary field message. Published every STATS_HEARTBEATS heartbeats. Before
building a message the node's `interest` (its local subscriptions and the peers' bloom
filters) is asked about the subject; with no one subscribed it is not built or sent, and
counted as skipped (`show counters`: n_stats_sent / n_stats_skipped).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from raims_node.router.actions import Action
from raims_node.router.node import Node

STATS_HEARTBEATS = 2  # publish every this many heartbeats


class LinkCounts(Protocol):
    """What a port's statistics read of a link (transports/tcp.py LinkProtocol)."""

    bytes_in: int
    bytes_out: int
    frames_in: int
    frames_out: int


class LinkPort(LinkCounts, Protocol):
    """A link with the id of the transport it belongs to (the daemon's links)."""

    tport_id: int


class PortRun(Protocol):
    """A running transport as the daemon holds it (transports/dialer.py Running)."""

    @property
    def tport_id(self) -> int: ...

    @property
    def bridge(self) -> object | None: ...


@dataclass
class PortTotals:
    bs: int = 0
    br: int = 0
    ms: int = 0
    mr: int = 0

    def add(self, other: PortTotals) -> None:
        self.bs += other.bs
        self.br += other.br
        self.ms += other.ms
        self.mr += other.mr

    def minus(self, other: PortTotals) -> PortTotals:
        return PortTotals(self.bs - other.bs, self.br - other.br, self.ms - other.ms, self.mr - other.mr)


@dataclass
class NodeStats:
    """Builds and publishes the `_N.` messages of one node."""

    node: Node
    sent: int = 0
    skipped: int = 0
    last_ns: int = 0
    last: dict[str, PortTotals] = field(default_factory=dict)  # per port key and "*": totals at the last publish
    out: list[tuple[str, bytes]] = field(default_factory=list)
    adj_seqno: int = 0  # the link_seqno of the last adjacency notification

    def due(self, now_ns: int, heartbeat_ns: int) -> bool:
        if now_ns - self.last_ns < STATS_HEARTBEATS * heartbeat_ns:
            return False
        self.last_ns = now_ns
        return True

    def counters(self) -> dict[str, int]:
        return {"n_stats_sent": self.sent, "n_stats_skipped": self.skipped}

    def _wanted(self, subject: str) -> bool:
        local, remote = self.node.interest(subject)
        if local or remote:
            return True
        self.skipped += 1
        return False

    def _send(self, subject: str, fields: dict[str, object], now_ns: int) -> None:
        self.sent += 1
        self.out.append((subject, json.dumps({"stamp": now_ns, **fields}).encode()))

    def publish(self, now_ns: int, running: Mapping[str, PortRun], links: Mapping[int, LinkPort],
                apply: Callable[[list[Action]], None]) -> None:
        """Every few heartbeats, the round `build` makes, published on the node (the
        daemon's tick); `running` the daemon's transports, `links` its links by conn id."""
        if not self.due(now_ns, self.node.params.heartbeat_ns):
            return
        ports = [(name, run.tport_id, [lk for lk in links.values() if lk.tport_id == run.tport_id])
                 for name, run in running.items() if run.bridge is None]
        for subject, payload in self.build(now_ns, ports):
            apply(self.node.publish(subject, payload, now_ns))

    def build(self, now_ns: int, ports: Iterable[tuple[str, int, Sequence[LinkCounts]]]) -> list[tuple[str, bytes]]:
        """One round: (subject, payload) of the peers' and the ports' messages someone
        wants, for the caller to publish. `ports`: (transport name, id, its links)."""
        node = self.node
        self.out = []
        me = node.user
        uids = node.state.uids  # the console's uids (router/uids.py)
        if node.link_seqno != self.adj_seqno:
            self.adj_seqno = node.link_seqno
            subject = f"_N.ADJ.{me}"
            if self._wanted(subject):
                near = sorted(p.user for p in node.peers.values() if p.neighbor)
                self._send(subject, {"user": me, "link_seqno": node.link_seqno, "neighbors": near}, now_ns)
        subject = f"_N.PEER.{me}.0"
        if self._wanted(subject):
            self._send(subject, {"user": me, "peer": me, "uid": 0, "sub_cnt": len(node.subs),
                                 "latency": "0", "cost": 0}, now_ns)
        for bridge, peer in list(node.peers.items()):
            uid = uids.assign(bridge)  # every live peer has its uid already: this reads it
            subject = f"_N.PEER.{me}.{uid}"
            if not self._wanted(subject):
                continue
            cost = node.routes.path_cost(bridge, 0)
            self._send(subject, {"user": me, "peer": peer.user, "uid": uid,
                                 "sub_cnt": len(peer.subjects) + len(peer.patterns),
                                 "latency": _latency(peer.latency_ns), "cost": cost}, now_ns)
        everything = PortTotals()
        uid_cnt = len(node.peers)
        for name, tport_id, links in ports:
            if not links:
                continue
            total = PortTotals()
            for lk in links:
                total.add(PortTotals(lk.bytes_out, lk.bytes_in, lk.frames_out, lk.frames_in))
            everything.add(total)
            key = f"{name}.{tport_id}"
            rate = total.minus(self.last.get(key, PortTotals()))
            self.last[key] = total
            subject = f"_N.PORT.{me}.{name}.{tport_id}"
            if self._wanted(subject):
                self._send(subject, {"user": me, "tport": name, "tport_id": tport_id, "fd_cnt": len(links),
                                     "uid_cnt": uid_cnt, **_fields(rate, total)}, now_ns)
        rate = everything.minus(self.last.get("*", PortTotals()))
        self.last["*"] = everything
        subject = f"_N.ALL.{me}"
        if self._wanted(subject):
            self._send(subject, {"user": me, "uid_cnt": uid_cnt, **_fields(rate, everything)}, now_ns)
        return self.out


def _fields(rate: PortTotals, total: PortTotals) -> dict[str, object]:
    return {"bs": rate.bs, "br": rate.br, "ms": rate.ms, "mr": rate.mr,
            "bs_tot": total.bs, "br_tot": total.br, "ms_tot": total.ms, "mr_tot": total.mr}


def _latency(ns: int) -> str:
    """A round trip as ms_server shows it: 3 digits and us / ms / s."""
    if ns <= 0:
        return ""
    us = ns / 1000
    if us < 1000:
        return f"{us:.3g}us"
    if us < 1_000_000:
        return f"{us / 1000:.3g}ms"
    return f"{us / 1_000_000:.3g}s"
