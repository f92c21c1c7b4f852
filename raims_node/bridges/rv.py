"""The RV transport (`type: rv`): RvSession on asyncio sockets (issue 25 point 1).

Manual "Tib RV": a listener (default port 7500) for TIBCO Rendezvous clients, RV5 and
RV6+ styles; rv_session.py has the protocol. Fields (manual's table): `listen`,
`port`, `use_service_prefix` (default true), `no_permanent`, `no_mcast`, `no_fakeip`,
plus raims's `service`.

Services and networks (decisions):
- A client names its service (`7500` when it gives none). With `use_service_prefix`
  its subjects live in the namespace `_rv_<service>` (RouterBus adds `_rv_7500.` to
  them), so RV services are apart from each other and from NATS/Redis clients; a NATS
  or Redis transport configured with `service: _rv_7500` shares the namespace (the
  RV <-> NATS path). With `use_service_prefix: false` every RV service uses the
  transport's `service` (default `_rv`).
- The network: a transport named `rv_<service>` in the configuration takes
  precedence (manual: the client's network is then ignored) and is started when the
  first client opens the service. Otherwise a client network (glue.parse_network's
  formats) is joined through a generated link transport named `rv_<service>` (the
  name the manual's `ports` shows); an empty network joins nothing and uses the links
  already running, as does a multicast (PGM) network under `no_mcast`. A service
  written `tcp:7500` or `udp:7500` is 7500. A multicast network (`eth0;239.192.0.1`) is
  a generated PGM transport on the group, its UDP port the service's number. A
  network that cannot be parsed is refused with RVD.INITREFUSED. The join runs in the
  background: the client is answered at once and its messages flow once the links
  are up.
- The INITRESP `ipaddr` is a random address (the session and inbox names then do
  not depend on the host's address), or with `no_fakeip` the listener's IPv4
  address.
- Advisories: `_RV.INFO.SYSTEM.HOST.START.<ip hex>` into a service's namespace when
  it gets its first client, HOST.STOP when its last one leaves (the sessions send the
  SESSION, LISTEN, RVD.CONNECTED and DATALOSS ones).
- `no_permanent`: the daemon exits once its last RV client has gone (rvd's
  `-no-permanent`); `on_idle` is the server's hook for that.
- Handshake deadline (2026-11-27, half-open): a client must complete its handshake
  (version and info records, both `I` messages: RvSession.established) within the
  `tcp_auth_timeout` parameter (default 10 s, the bound of the node's own links that
  have not authenticated), or it is closed, counted (`handshake_timeouts`, and in
  `error_closes`) and logged (rate-limited: 5 lines per 10 s, then a count). Measured
  before: 500 clients that connected and sent nothing, or only a version record, were
  held indefinitely (500 descriptors, nothing logged; the only bound the descriptor
  reserve of capacity.py). An RV library sends its handshake at once, in milliseconds.
  The reference (sassrv's EvRvService) has no such deadline, nor does TIBCO's rvd
  documentation name one; nats-server's auth timer is the model. Once established a
  client is never timed out for being idle: an rvd keeps idle listeners (a subscriber
  may hear nothing for hours), and the daemon side of RV has no ping to ask it with.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from raims_node.bridges.bus import Bus
from raims_node.bridges.errors import BridgeError
from raims_node.bridges.glue import (
    BridgeServer,
    BridgeSession,
    BridgeSettings,
    ClientNetwork,
    HubView,
    SessionProtocol,
    parse_network,
)
from raims_node.bridges.router_bus import check_service
from raims_node.bridges.rv_session import INFO_SYSTEM, RvConfig, RvRefused, RvSession, advisory
from raims_node.config.tree import TransportConfig

RV_TPORT_PREFIX = "rv_"
NAMESPACE_PREFIX = "_rv_"
MAX_SERVICE_LEN = 255  # a port number or a name from the services database, far shorter
HANDSHAKE_PARAMETER = "tcp_auth_timeout"  # the handshake deadline (module docstring)


def _flag(value: object) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes", "on")


@dataclass(frozen=True, slots=True)
class RvSettings(BridgeSettings):
    """A `type: rv` record: the bridge fields and the manual's RV flags."""

    use_service_prefix: bool = True
    no_mcast: bool = False
    no_fakeip: bool = False
    no_permanent: bool = False


class RvProtocol(SessionProtocol):
    server: RvServer

    def new_session(self, client_id: int, client_ip: str | None) -> BridgeSession:
        session = RvSession(self.server, client_id, self.server.config, wakeup=self.wakeup,
                            loss_timer=self._loss_timer)
        self._rv = session
        return session

    def _loss_timer(self, delay: float) -> None:
        asyncio.get_running_loop().call_later(max(0.0, delay), self._flush_loss)

    def _flush_loss(self) -> None:
        if self.transport is not None:
            self._rv.flush_loss()


def _service_name(service: str) -> str:
    """The service as a namespace part: `tcp:7500` / `udp:7500` are 7500. RvRefused for
    one longer than MAX_SERVICE_LEN: every subject of the service carries it."""
    for head in ("tcp:", "udp:"):
        if service.startswith(head):
            service = service[len(head):] or "7500"
    if len(service) > MAX_SERVICE_LEN:
        raise RvRefused(f"service name of {len(service)} characters: at most {MAX_SERVICE_LEN}")
    return service


class RvServer(BridgeServer):
    kind = "rv"
    default_service = "_rv"
    protocol = RvProtocol
    handshake_timeout_name = HANDSHAKE_PARAMETER

    settings: RvSettings

    def __init__(self, hub: HubView, name: str, settings: BridgeSettings) -> None:
        super().__init__(hub, name, settings)
        flags = settings if isinstance(settings, RvSettings) else RvSettings(settings.hosts, settings.port,
                                                                             settings.service)
        self.use_prefix = flags.use_service_prefix
        self.no_mcast = flags.no_mcast
        self.no_fakeip = flags.no_fakeip
        self.no_permanent = flags.no_permanent
        self.config = RvConfig(max_payload=hub.max_payload)
        self.ipaddr = os.urandom(4)
        self.port = 0
        self.daemon_gob = f"{time.time_ns():X}"
        self.on_idle: Callable[[], None] | None = None
        self.joins: dict[str, asyncio.Task[None]] = {}  # service -> its network join
        self.clients: dict[str, int] = {}  # service -> open sessions

    @classmethod
    def settings_of(cls, hub: HubView, cfg: TransportConfig) -> BridgeSettings:
        base = BridgeSettings.of(cfg, cls.default_service)
        route = cfg.route
        return RvSettings(base.hosts, base.port, base.service, base.network, base.user, base.password, base.token,
                          base.http_port, use_service_prefix=_flag(route.get("use_service_prefix", True)),
                          no_mcast=_flag(route.get("no_mcast", False)),
                          no_fakeip=_flag(route.get("no_fakeip", False)),
                          no_permanent=_flag(route.get("no_permanent", False)))

    async def listen(self) -> list[str]:
        self.handshake_timeout_s = self.hub.host.tree.parameters.time(HANDSHAKE_PARAMETER)
        bound = await super().listen()
        if self.servers and self.servers[0].sockets:
            addr = self.servers[0].sockets[0].getsockname()
            self.port = addr[1]
            if self.no_fakeip:
                try:
                    ip = ipaddress.ip_address(addr[0])
                    self.ipaddr = ip.packed if ip.version == 4 else bytes(4)
                except ValueError:
                    pass
        return bound

    # ------------------------------------------------------------ RvHost

    def namespace(self, service: str) -> str:
        return f"{NAMESPACE_PREFIX}{service}" if self.use_prefix else self.settings.service

    def open_service(self, service: str, network: str) -> Bus:
        """The bus of `service`, its network joined (in the background); RvRefused
        when the service or network cannot be opened."""
        try:
            service = _service_name(service)
            namespace = self.namespace(service)
            check_service(namespace)
            net = parse_network(network)
            if net is not None and self.no_mcast and net.kind == "pgm":
                net = None  # `no_mcast`: a multicast network is ignored, the links running are used
            name = RV_TPORT_PREFIX + service
            configured = any(t.tport == name for t in self.hub.host.tree.transports)
        except RvRefused:
            raise
        except BridgeError as exc:  # a network or a service name that cannot be used
            raise RvRefused(f"service {service!r} network {network!r}: {exc}") from None
        bus = self.hub.bus(namespace)
        self.clients[service] = self.clients.get(service, 0) + 1
        if self.clients[service] == 1:
            self._host_advisory(bus, "START")
        if (configured or net is not None) and service not in self.joins:
            self.joins[service] = asyncio.get_running_loop().create_task(
                self._join(service, namespace, net or ClientNetwork("", "any"), name))
        return bus

    def _host_advisory(self, bus: Bus, what: str) -> None:
        """`_RV.INFO.SYSTEM.HOST.START.<ip hex>` when a service gets its first client,
        STOP when its last one leaves (the reference's host advisories)."""
        iphex = self.ipaddr.hex().upper()
        name = f"HOST.{what}.{iphex}"
        bus.publish(None, INFO_SYSTEM + name, None, None,
                    advisory(name, hostaddr=ipaddress.ip_address(self.ipaddr).compressed,
                             sn=self.daemon_gob, ver="5.4.2"))

    async def _join(self, service: str, namespace: str, net: ClientNetwork, tport: str) -> None:
        try:
            await self.hub.join_network(self.name, namespace, net, tport=tport)
        except Exception as exc:  # logged, the client stays on the links already running
            self.log.warning("%s: service %s cannot join network %s: %s", self.name, service, net, exc)
            self.joins.pop(service, None)

    def closed_service(self, service: str) -> None:
        service = _service_name(service)
        left = self.clients.get(service, 0) - 1
        if left > 0:
            self.clients[service] = left
        elif self.clients.pop(service, None) is not None:
            self._host_advisory(self.hub.bus(self.namespace(service)), "STOP")
        if not self.clients and self.no_permanent and self.on_idle is not None:
            self.on_idle()

    def port_row(self, label: str) -> dict[str, Any]:
        """The `show ports` row, with the `show hosts` (`rv_hosts`) and `show rvsub`
        (`rv_subs`) rows of its sessions, which the console's RV tables read."""
        row = super().port_row(label)
        hosts: list[dict[str, object]] = []
        subs: list[dict[str, object]] = []
        for proto in self.conns:
            s = proto.session
            if not isinstance(s, RvSession) or not s.session:
                continue
            who = {"svc": _service_name(s.service), "session": s.session, "user": s.userid}
            hosts.append({**who, "port": self.port, "start": s.started_ns, "cl": self.clients.get(who["svc"], 0),
                          "bs": s.bytes_out, "br": proto.bytes_in, "ms": s.msgs_out, "mr": s.msgs_in,
                          "idl": s.lost_in, "odl": 0})
            for subject in s.subscriptions():
                tokens = subject.split(".")
                wild = "*" in tokens or tokens[-1] == ">"
                subs.append({**who, "p": "p" if wild else "", "subject": subject})
        row["rv_hosts"], row["rv_subs"] = hosts, subs
        return row

    def close(self) -> None:
        for task in self.joins.values():
            task.cancel()
        self.joins.clear()
        super().close()
