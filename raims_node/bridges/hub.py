"""The bridges of one daemon: their buses by service, client ids and the flow gate.

Manual "Services and Networks": bridge transports with the same `service` share one
`RouterBus`, so a NATS and a Redis transport configured alike exchange messages. Client
ids are unique in the daemon (NATS INFO `client_id`, Redis CLIENT ID), so that clients
of two transports on one bus never collide.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from raims_node.bridges.glue import BridgeServer, BridgeSettings, BridgeStartError, FlowGate
from raims_node.bridges.nats import NatsServer
from raims_node.bridges.redis import RedisServer
from raims_node.bridges.router_bus import InvalidService, RouterBus
from raims_node.config.errors import ConfigError
from raims_node.wire.subjects import bridge_b64

if TYPE_CHECKING:
    from raims_node.config.tree import TransportConfig
    from raims_node.daemon import Daemon

SERVERS: dict[str, type[BridgeServer]] = {"nats": NatsServer, "redis": RedisServer}


class BridgeHub:
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.buses: dict[str, RouterBus] = {}
        self.gate = FlowGate()
        self._ids = itertools.count(1)

    def next_client_id(self) -> int:
        return next(self._ids)

    def server_id(self) -> str:
        return bridge_b64(self.daemon.node.bridge)

    def bus(self, service: str) -> RouterBus:
        bus = self.buses.get(service)
        if bus is None:
            bus = self.buses[service] = RouterBus(self.daemon, service)
        return bus

    async def start(self, cfg: TransportConfig) -> BridgeServer:
        """Start transport `cfg` (of a type in SERVERS) listening; raise BridgeStartError."""
        cls = SERVERS[cfg.type]
        try:
            server = cls(self, cfg.tport, BridgeSettings.of(cfg, cls.default_service))
        except (InvalidService, ConfigError) as exc:
            raise BridgeStartError(f"transport {cfg.tport!r}: {exc}") from None
        await server.listen()
        return server
