"""Name services on the nodes of a simulated network (router/sim.py), for tests and the
benchmark: each node's `NameService` gets its node's peer and names events, its timers
run with the network's ticks, and its outputs become node calls (`publish`,
`send_names`) whose actions the network carries out.
"""

from __future__ import annotations

import json

from raims_node.names.replication import Flood, Unicast
from raims_node.names.service import NS, NameService, Out, Publish
from raims_node.names.table import Scope
from raims_node.router.actions import Action, NodeEvent
from raims_node.router.sim import SimNetwork

NAMES_PREFIX = "_NAMES."


class NamesSim:
    def __init__(self, net: SimNetwork, retry_ns: int = NS, beacon_ns: int = 30 * NS) -> None:
        self.net = net
        self.retry_ns = retry_ns
        self.beacon_ns = beacon_ns
        self.services: dict[str, NameService] = {}
        net.on_action = self._on_action
        net.tick_hooks.append(self._tick)

    def attach(self, name: str) -> NameService:
        """A new name service on node `name` (again after `net.restart(name)`)."""
        node = self.net.nodes[name].node
        svc = self.services[name] = NameService(node.bridge, node.user, self.net.now, self.retry_ns, self.beacon_ns)
        return svc

    def attach_all(self) -> None:
        for name in self.net.nodes:
            self.attach(name)

    def run(self, name: str, outs: list[Out]) -> None:
        sim = self.net.nodes[name]
        if not sim.alive:
            return
        node, now = sim.node, self.net.now
        for out in outs:
            if isinstance(out, Publish):
                self.net._apply(name, node.publish(out.subject, out.payload, now, out.reply, out.headers))
            elif isinstance(out, Flood):
                self.net._apply(name, node.send_names(None, out.data, now))
            elif isinstance(out, Unicast):
                self.net._apply(name, node.send_names(out.dest, out.data, now))

    def request(self, name: str, verb: str, body: dict[str, object] | bytes, reply: str | None = None,
                owner: object | None = None) -> None:
        """A client of node `name` publishes `body` to `_NAMES.<verb>` (no namespace)."""
        svc = self.services[name]
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.run(name, svc.request(owner if owner is not None else name, "", verb, reply, None, payload,
                                   self.net.now))

    def client_gone(self, name: str, owner: object) -> None:
        self.run(name, self.services[name].client_gone(owner))

    def _on_action(self, who: str, act: Action) -> None:
        if isinstance(act, NodeEvent):
            svc = self.services.get(who)
            if svc is not None and svc.node == self.net.nodes[who].node.bridge:
                self.run(who, svc.node_event(act.kind, act.peer, act.user, act.data, self.net.now))

    def _tick(self, now_ns: int) -> None:
        for name, svc in self.services.items():
            if self.net.nodes[name].alive:
                self.run(name, svc.tick(now_ns))

    def converged(self, names: list[str] | None = None) -> bool:
        """Every live node's table holds the same replicated publications (by node and key)."""
        live = [s.name for s in self.net.live() if names is None or s.name in names]
        tables = [{p.ident for p in self.services[n].table if p.scope != Scope.NODE} for n in live if n in self.services]
        return bool(tables) and all(t == tables[0] for t in tables)
