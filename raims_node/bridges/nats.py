"""The NATS transport (`type: nats`): NatsSession on asyncio sockets (issue 8 point 1).

Manual "NATS": a listener whose clients share the `service` namespace (default `_nats`).
The protocol is nats_session's; this module adds what needs a clock or a socket: the
INFO fields only known once bound (host, port, server id), and nats-server's ping timer
(PING_INTERVAL_S, one timer per transport rather than per connection; a client with
`max_pings_out` PINGs unanswered is closed as a stale connection), and its auth timer:
with credentials configured, a client that has not CONNECTed AUTH_TIMEOUT_S after
connecting gets `-ERR 'Authentication Timeout'` and is closed (the glue's handshake
deadline; /connz reason "Authentication Timeout"; nats-server 2.9.10 measured: 2 s, for
a silent client and for one whose CONNECT line never ends). Without credentials there is
no such timer, as on nats-server.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from raims_node.bridges.gate import BridgeSession
from raims_node.bridges.glue import BridgeServer, BridgeStartError, SessionProtocol

if TYPE_CHECKING:
    from raims_node.bridges.nats_monitor import NatsMonitor
from raims_node.bridges.nats_session import AUTH_TIMEOUT_S, NatsConfig, NatsSession

PING_INTERVAL_S = 120.0


class NatsProtocol(SessionProtocol):
    server: NatsServer

    def new_session(self, client_id: int, client_ip: str | None) -> BridgeSession:
        return NatsSession(self.server.bus, client_id, self.server.config,
                           client_ip=client_ip, wakeup=self.wakeup)


class NatsServer(BridgeServer):
    kind = "nats"
    default_service = "_nats"
    full_reply = b"-ERR 'maximum connections exceeded'\r\n"
    protocol = NatsProtocol
    handshake_timeout_name = "auth_timeout"

    config: NatsConfig
    _pinger: asyncio.TimerHandle | None = None
    monitor: NatsMonitor | None = None  # nats_monitor.py
    lame_duck_mode = False

    async def listen(self) -> list[str]:
        bound = await super().listen()
        s, node = self.settings, self.hub.host.node
        host, _, port = bound[0].rpartition(":")
        self.config = NatsConfig(
            server_id=self.hub.server_id(), server_name=f"{node.user}.{node.service}",
            host=host.strip("[]"), port=int(port), user=s.user, password=s.password, token=s.token,
            max_payload=self.hub.max_payload)
        if self.config.auth_required:  # nats-server's auth timer: CONNECT within AUTH_TIMEOUT_S
            self.handshake_timeout_s = AUTH_TIMEOUT_S
        self._pinger = asyncio.get_running_loop().call_later(PING_INTERVAL_S, self._ping)
        if s.http_port is not None:
            from raims_node.bridges.nats_monitor import NatsMonitor  # aiohttp only when asked for

            self.monitor = NatsMonitor(self)
            try:
                for addr in await self.monitor.start(host.strip("[]") or "127.0.0.1", s.http_port):
                    self.log.info("%s monitoring on http://%s", self.name, addr)
            except OSError as exc:
                self.close()
                raise BridgeStartError(f"transport {self.name!r} http_port {s.http_port}: {exc.strerror}") from None
        return bound

    def opened(self, proto: SessionProtocol) -> None:
        super().opened(proto)
        if self.monitor is not None:
            self.monitor.opened(proto)

    def closed(self, proto: SessionProtocol, session: BridgeSession) -> None:
        super().closed(proto, session)
        if self.monitor is not None:  # its ring of closed connections
            self.monitor.closed(proto, session)

    async def lame_duck(self, grace_s: float, duration_s: float) -> None:
        """nats-server's lame duck mode: stop accepting, tell every client (`ldm`), and
        after `grace_s` close the clients spread over `duration_s`."""
        self.lame_duck_mode = True
        for server in self.servers:
            server.close()
        for proto in list(self.conns):
            if isinstance(proto.session, NatsSession):
                proto.session.lame_duck()
                proto.flush()
        await asyncio.sleep(grace_s)
        conns = sorted(self.conns, key=lambda p: p.session.client_id if p.session else 0)
        step = duration_s / max(1, len(conns))
        for proto in conns:
            if self.monitor is not None:
                self.monitor.shutting_down(proto)
            proto.shutdown()  # what the client sent before it noticed is still carried out
            await asyncio.sleep(step)

    def _ping(self) -> None:
        self._pinger = asyncio.get_running_loop().call_later(PING_INTERVAL_S, self._ping)  # first
        for proto in list(self.conns):
            if isinstance(proto.session, NatsSession):
                proto.session.ping()

    def close(self) -> None:
        if self._pinger is not None:
            self._pinger.cancel()
            self._pinger = None
        if self.monitor is not None:
            asyncio.get_running_loop().create_task(self.monitor.stop())
            self.monitor = None
        super().close()
