"""The bridges of one daemon: their buses by service, client ids, the flow gate, and the
networks they join.

Manual "Services and Networks": bridge transports with the same `service` share one
`RouterBus`, so a NATS and a Redis transport configured alike exchange messages. Client
ids are unique in the daemon (NATS INFO `client_id`, Redis CLIENT ID), so that clients
of two transports on one bus never collide.

A bridge with a `network` (glue.py parses it) joins it through the link transport named
`net_<service>` (the reference's name for a client's network). Discovery matches
transports by name, so every node whose bridges give one service a network names that
transport alike, whatever the bridge transports are called. Decisions:
- When the configuration has a transport of that name, it is started instead and the
  network is ignored (manual: "When a service already is configured, then it is used
  instead and the network parameters are ignored"): as a connector when it has `connect`
  addresses, else as a listener.
- Otherwise the hub generates it: `type: mesh` or `tcp` with `device` set to the
  network's device (the host name when the network has none), no listen or connect
  address: it listens on the device's address on an ephemeral port and the name
  protocol finds its peers.
- Bridges of one service share the transport: the second one to start reuses it; a
  different network for a service whose transport already runs is refused.
"""

from __future__ import annotations

import itertools
import logging
import socket
from typing import TYPE_CHECKING

from raims_node.bridges.glue import (
    BadNetwork,
    BridgeServer,
    BridgeSettings,
    BridgeStartError,
    ClientNetwork,
    FlowGate,
)
from raims_node.bridges.nats import NatsServer
from raims_node.bridges.redis import RedisServer
from raims_node.bridges.router_bus import InvalidService, RouterBus
from raims_node.config.errors import ConfigError
from raims_node.config.tree import TransportConfig
from raims_node.wire.subjects import bridge_b64

if TYPE_CHECKING:
    from raims_node.daemon import Daemon

log = logging.getLogger("raims.bridge")

SERVERS: dict[str, type[BridgeServer]] = {"nats": NatsServer, "redis": RedisServer}
NETWORK_TPORT_PREFIX = "net_"


def network_tport(service: str) -> str:
    """The name of the link transport that joins `service`'s network."""
    return f"{NETWORK_TPORT_PREFIX}{service}"


class BridgeHub:
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.buses: dict[str, RouterBus] = {}
        self.gate = FlowGate()
        self._ids = itertools.count(1)

    @property
    def buffered(self) -> int:
        """Bytes held for the bridge clients: unsent output and unparsed input."""
        return sum(proto.buffered for proto in self.gate.conns)

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
        except (InvalidService, ConfigError, BadNetwork) as exc:
            raise BridgeStartError(f"transport {cfg.tport!r}: {exc}") from None
        await server.listen()
        return server

    async def join_network(self, bridge: str, service: str, network: ClientNetwork) -> None:
        """Start (or reuse) the link transport that joins `network` for `service`
        (module docstring); raises BridgeStartError or the daemon's DaemonError."""
        daemon = self.daemon
        name = network_tport(service)
        configured = next((t for t in daemon.tree.transports if t.tport == name), None)
        run = daemon.running.get(name)
        if configured is not None:
            if run is None:
                log.info("transport %s: network %s ignored, transport %s is configured", bridge, network, name)
                await daemon.start_transport(name, listen=not configured.connect)
            return
        try:
            network.check_joinable()
        except BadNetwork as exc:
            raise BadNetwork(f"transport {bridge!r}: {exc}") from None
        device = network.device or socket.gethostname()
        if run is not None:
            if (run.cfg.type, run.cfg.device, run.role) != (network.tport_type, device, network.role):
                raise BridgeStartError(f"transport {bridge!r}: service {service!r} already joined a network "
                                       f"through {name!r} ({run.cfg.type} {run.role} on {run.cfg.device}), "
                                       f"not {network}")
            return
        cfg = TransportConfig(name, network.tport_type, {"device": device})
        log.info("transport %s: joining network %s through %s", bridge, network, name)
        await daemon.start_link(cfg, network.listen, network.role)
