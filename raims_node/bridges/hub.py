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
  protocol finds its peers. A multicast network (`eth0;239.192.0.1`, RV's) is a
  `type: pgm` transport on that group, its UDP port the service's number (RV service
  7500: port 7500; a service without one: the PGM default).
- Bridges of one service share the transport: the second one to start reuses it; a
  different network for a service whose transport already runs is refused.

`network` (manual "Services and Networks", "Connecting to Networks"): once the bridge
listens, it joins the network through a link transport found by the name protocol
(transports/name.py), which the hub starts (the naming and reuse rules above).
Formats, decisions where the manual is vague:
- `dev;mesh` a mesh, `dev;tcp.listen` / `dev;tcp.connect` TCP listeners and their
  connectors, `dev;any` or `dev` alone a connector to listeners and meshes; `;mesh` (no
  device) uses the host name; empty means no network. As in the reference, `dev;tcp` is
  `dev;tcp.listen` and `dev;mesh.listen` / `dev;mesh.connect` are `dev;mesh`.
- `dev;<IPv4 multicast group>` (or `dev;recv1,recv2;send`) is a PGM network, joined
  through a generated `type: pgm` transport (above), unless a transport of the
  network's name is configured (which the manual says wins over the network).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import socket
import time
from typing import TYPE_CHECKING

from raims_node.bridges.capacity import client_capacity
from raims_node.bridges.flow import OutputLedger, SessionOutput
from raims_node.bridges.gate import FlowGate
from raims_node.bridges.glue import BadNetwork, BridgeServer, BridgeStartError, ClientNetwork
from raims_node.bridges.host import NodeHost
from raims_node.bridges.registry import server_class
from raims_node.bridges.router_bus import InvalidService, RouterBus
from raims_node.config.errors import ConfigError
from raims_node.config.tree import TransportConfig
from raims_node.transports.idle_busy import IdleBusy
from raims_node.wire.subjects import bridge_b64

if TYPE_CHECKING:
    from raims_node.kv import NodeKV
    from raims_node.kv.commands import Engine

log = logging.getLogger("raims.bridge")

SOFT_CHECK_S = 1.0
MAX_PAYLOAD_LIMIT = 32 * 1024 * 1024  # half the wire frame limit: any message with its subjects fits
NETWORK_TPORT_PREFIX = "net_"


def network_tport(service: str) -> str:
    """The name of the link transport that joins `service`'s network."""
    return f"{NETWORK_TPORT_PREFIX}{service}"


class BridgeHub:
    def __init__(self, host: NodeHost, idle: IdleBusy | None = None) -> None:
        self.host = host
        self.buses: dict[str, RouterBus] = {}
        self.gate = FlowGate()
        self.idle = idle or IdleBusy(0)  # told of every client read (the daemon's idle_busy)
        self.ledger = OutputLedger(on_over=self._over_budget)
        self.max_clients = client_capacity()  # connections past it are refused (capacity.py)
        self._cutting = False
        self._soft_timer: asyncio.TimerHandle | None = None
        self._ids = itertools.count(1)
        self.kv: Engine | None = None  # the node's key-value map (the Redis data commands)
        self.node_kv: NodeKV | None = None  # its file and clock (open_kv)
        self.map_args: tuple[str | None, str | None] = (None, None)  # the daemon's map file and db_num
        self._kv_buses: dict[str, RouterBus] = {}

    def open_kv(self) -> None:
        """The node's key-value map (`-m`, at the daemon's start) or, without one, its empty
        read-only store (at the first Redis transport): a node with neither never imports
        the map (bench/startup_bench.py); BridgeStartError."""
        from raims_node.kv import KVError, NodeKV

        try:
            self.node_kv = NodeKV(*self.map_args)
        except KVError as exc:
            raise BridgeStartError(str(exc)) from None
        self.kv = self.node_kv.engine

    def kv_notifications(self, bus: RouterBus) -> None:
        """Publish the map's keyspace notifications into `bus`'s service as well."""
        if self.kv is None:
            return
        self._kv_buses[bus.service] = bus
        self.kv.publish = self._kv_publish

    def _kv_publish(self, channel: str, payload: bytes) -> int:
        """The receivers reached (a script's PUBLISH answers it)."""
        return sum(bus.publish(None, channel, None, None, payload) for bus in self._kv_buses.values())

    @property
    def max_payload(self) -> int:
        """The `max_payload` parameter: the largest message a client may publish (NATS
        INFO `max_payload`, Redis proto-max-bulk-len); BridgeStartError past the limit."""
        try:
            size = self.host.tree.parameters.size("max_payload")
        except ConfigError as exc:
            raise BridgeStartError(f"parameter max_payload: {exc}") from None
        if not 0 < size <= MAX_PAYLOAD_LIMIT:
            raise BridgeStartError(f"parameter max_payload {size} must be between 1 and {MAX_PAYLOAD_LIMIT} "
                                   "(a message must fit a frame between nodes)")
        return size

    @property
    def buffered(self) -> int:
        """Bytes held for the bridge clients: unsent output and unparsed input."""
        return sum(proto.buffered for proto in self.gate.conns)

    def output_over_budget(self) -> bool:
        """The clients' output passed the budget and the cut has not run yet: a link gives
        the loop a turn before it reads on, so that the cut comes first (transports/tcp.py)."""
        return self.ledger.over

    def _over_budget(self) -> None:
        if not self._cutting:
            self._cutting = True
            asyncio.get_running_loop().call_soon(self._cut_slow)

    def _cut_slow(self) -> None:
        """The clients' queued output passed the budget: cut the consumers above their
        low-water mark, largest first, until it is under half the budget."""
        self._cutting = False
        ledger = self.ledger
        ledger.rearm()
        if ledger.total <= ledger.budget:
            return
        conns = sorted((p for p in self.gate.conns if p.session is not None),
                       key=lambda p: p.session.buffered if p.session is not None else 0, reverse=True)
        for proto in conns:
            session = proto.session
            if ledger.total <= ledger.budget // 2 or session is None:
                break
            if isinstance(session, SessionOutput) and session.buffered > session.limits.low_water:
                session.cut()
                proto.flush()

    def check_soft_limits(self) -> None:
        """Once a second: consumers above their soft limit for too long are cut (the next
        check is scheduled first, so that a failure in this one cannot end them)."""
        self._soft_timer = asyncio.get_running_loop().call_later(SOFT_CHECK_S, self.check_soft_limits)
        now = time.monotonic()
        for proto in list(self.gate.conns):
            session = proto.session
            if isinstance(session, SessionOutput) and session.limits.soft_limit:
                session.check_soft_limit(now)
                if session.closing:
                    proto.flush()

    def close(self) -> None:
        if self._soft_timer is not None:
            self._soft_timer.cancel()
            self._soft_timer = None
        if self.node_kv is not None:  # the map's log synced and closed
            self.node_kv.close()

    def next_client_id(self) -> int:
        return next(self._ids)

    def server_id(self) -> str:
        return bridge_b64(self.host.node.bridge)

    def bus(self, service: str) -> RouterBus:
        bus = self.buses.get(service)
        if bus is None:
            bus = self.buses[service] = RouterBus(self.host, service)
        return bus

    async def start(self, cfg: TransportConfig) -> BridgeServer:
        """Start transport `cfg` (of a type in CLIENT_PROTOCOLS) listening; raise BridgeStartError."""
        cls = server_class(cfg.type)
        if cfg.type == "redis" and self.node_kv is None:
            self.open_kv()
        try:
            server = cls(self, cfg.tport, cls.settings_of(self, cfg))
        except (InvalidService, ConfigError, BadNetwork) as exc:
            raise BridgeStartError(f"transport {cfg.tport!r}: {exc}") from None
        await server.listen()
        if self._soft_timer is None:
            self._soft_timer = asyncio.get_running_loop().call_later(SOFT_CHECK_S, self.check_soft_limits)
        return server

    async def join_network(self, bridge: str, service: str, network: ClientNetwork,
                           tport: str | None = None) -> None:
        """Start (or reuse) the link transport that joins `network` for `service`
        (module docstring), named `tport` when the bridge has its own name for it (RV:
        `rv_<service>`); raises BridgeStartError or the host's own start error."""
        host = self.host
        name = tport or network_tport(service)
        configured = next((t for t in host.tree.transports if t.tport == name), None)
        run = host.running.get(name)
        if configured is not None:
            if run is None:
                log.info("transport %s: network %s ignored, transport %s is configured", bridge, network, name)
                await host.start_transport(name, listen=not configured.connect)
            return
        device = network.device or socket.gethostname()
        if network.kind == "pgm":  # the group on the device; the service's number is the UDP port
            from raims_node.transports.pgm import DEFAULT_PORT as PGM_PORT

            digits = re.search(r"\d+$", service)
            cfg = TransportConfig(name, "pgm", {"listen": f"{network.device};{network.group}",
                                                "port": int(digits.group()) if digits else PGM_PORT})
            wanted: tuple[object, ...] = ("pgm", cfg.listen)
        else:
            cfg = TransportConfig(name, network.tport_type, {"device": device})
            wanted = (network.tport_type, device, network.role)
        if run is not None:
            have = ("pgm", run.cfg.listen) if run.cfg.type == "pgm" else (run.cfg.type, run.cfg.device, run.role)
            if have != wanted:
                raise BridgeStartError(f"transport {bridge!r}: service {service!r} already joined a network "
                                       f"through {name!r} ({run.cfg.type} {run.role} on {run.cfg.device}), "
                                       f"not {network}")
            return
        log.info("transport %s: joining network %s through %s", bridge, network, name)
        await host.start_link(cfg, network.listen, network.role)
