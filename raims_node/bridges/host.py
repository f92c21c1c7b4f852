"""What the client-protocol bridges see of the node that hosts them.

The daemon implements `NodeHost`; the bridges are written against this interface and
never import the daemon, so a bridge can be driven by any host (the daemon, or a test's
stand-in) and the import graph stays one-way: daemon -> bridges -> host.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from raims_node.bloom.shard import Shard
from raims_node.config.tree import ConfigTree, TransportConfig
from raims_node.router.node import Node
from raims_node.wire.batch import Run


class RunningTransport(Protocol):
    """A transport the host runs: its configuration and the role it was started in."""

    @property
    def cfg(self) -> TransportConfig: ...

    @property
    def role(self) -> str | None: ...


class NameRequests(Protocol):
    """The node's name service (raims_node/names/glue.py) as the bus hands it requests."""

    def request(self, owner: object, prefix: str, subject: str, reply: str | None, headers: bytes | None,
                payload: bytes) -> int: ...

    def client_gone(self, owner: object) -> None: ...


class NodeHost(Protocol):
    """The node's driver as the bridges use it: local pub/sub with the clock applied,
    the configuration, and starting the link transports a bridge's network needs."""

    @property
    def node(self) -> Node: ...

    @property
    def tree(self) -> ConfigTree: ...

    @property
    def running(self) -> Mapping[str, RunningTransport]: ...

    @property
    def naming(self) -> NameRequests: ...

    def subscribe(self, owner: object, sid: str, subject: str, queue: str | None = None) -> None: ...

    def psubscribe(self, owner: object, sid: str, pattern: str, syntax: str = "rv",
                   queue: str | None = None, shard: Shard | None = None) -> None: ...

    def unsubscribe(self, owner: object, sid: str) -> None: ...

    def drop_owner(self, owner: object) -> None: ...

    def publish(self, subject: str, payload: bytes, reply: str | None = None, headers: bytes | None = None,
                no_echo: object | None = None) -> int: ...

    def publish_run(self, subject: str, payloads: Run, no_echo: object | None = None) -> int: ...

    def publish_acked(self, subject: str, payload: bytes, headers: bytes | None, no_echo: object | None,
                      kind: str, inbox: str) -> int: ...

    async def start_transport(self, name: str, listen: bool) -> object: ...

    async def start_link(self, cfg: TransportConfig, listen: bool, role: str | None = None) -> object: ...
