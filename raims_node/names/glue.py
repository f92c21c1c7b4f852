"""A running daemon's name service: the `_NAMES.*` requests of its bridge clients, the
router's peer and names events, and a timer (issue 21).

Interception (decision): a client's publish to `_NAMES.<verb>` is taken by its own
node's bus (bridges/router_bus.py) before any routing and handed to `request` with the
client's namespace prefix; such subjects never enter the network, and every node
answers its own clients. The bus also reports `has_interest` for them (NATS
no-responders) and calls `client_gone` when a client's connection closes, which
withdraws its names and ends its topology subscriptions.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from raims_node.names.replication import Flood, Unicast
from raims_node.names.service import PREFIX, NameService, Out, Publish
from raims_node.router.actions import Action, NodeEvent
from raims_node.router.node import Node

Publisher = Callable[[str, bytes, "str | None", "bytes | None"], int]


class NamesGlue:
    """`publish(subject, payload, reply, headers)` is the daemon's local publish and
    `apply(actions)` carries out the node's actions (the daemon's, which never imports
    this module's users: the glue gets callables, not the daemon)."""

    def __init__(self, node: Node, publish: Publisher, apply: Callable[[list[Action]], None]) -> None:
        self.node = node
        self.publish = publish
        self.apply = apply
        # dumps are asked again after a heartbeat's RPC timeout; a beacon every 3 heartbeats
        self.service = NameService(node.bridge, node.user, time.time_ns(), retry_ns=node.params.rpc_timeout_ns,
                                   beacon_ns=3 * node.params.heartbeat_ns)

    @staticmethod
    def handles(subject: str) -> bool:
        return subject.startswith(PREFIX)

    def request(self, owner: object, prefix: str, subject: str, reply: str | None, headers: bytes | None,
                payload: bytes) -> int:
        """A client's publish to `_NAMES.*`; 1 (the name service received it)."""
        self.run(self.service.request(owner, prefix, subject[len(PREFIX):], reply, headers, payload,
                                      time.time_ns()))
        return 1

    def client_gone(self, owner: object) -> None:
        self.run(self.service.client_gone(owner))

    def on_event(self, ev: NodeEvent) -> None:
        self.run(self.service.node_event(ev.kind, ev.peer, ev.user, ev.data, time.time_ns()))

    def tick(self) -> None:
        self.run(self.service.tick(time.time_ns()))

    def run(self, outs: list[Out]) -> None:
        for out in outs:
            if isinstance(out, Publish):
                self.publish(out.subject, out.payload, out.reply, out.headers)
            elif isinstance(out, Flood):
                self.apply(self.node.send_names(None, out.data, time.time_ns()))
            elif isinstance(out, Unicast):
                self.apply(self.node.send_names(out.dest, out.data, time.time_ns()))
