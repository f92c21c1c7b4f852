"""The NATS transport (`type: nats`): NatsSession on asyncio sockets (issue 8 point 1).

Manual "NATS": a listener whose clients share the `service` namespace (default `_nats`).
The protocol is nats_session's; this module adds what needs a clock or a socket: the
INFO fields only known once bound (host, port, server id), and nats-server's ping timer
(PING_INTERVAL_S, one timer per transport rather than per connection; a client with
`max_pings_out` PINGs unanswered is closed as a stale connection).
"""

from __future__ import annotations

import asyncio

from raims_node.bridges.glue import BridgeServer, BridgeSession, SessionProtocol
from raims_node.bridges.nats_session import NatsConfig, NatsSession

PING_INTERVAL_S = 120.0


class NatsProtocol(SessionProtocol):
    server: NatsServer

    def new_session(self, client_id: int, client_ip: str | None) -> BridgeSession:
        return NatsSession(self.server.bus, client_id, self.server.config,
                           client_ip=client_ip, wakeup=self.wakeup)


class NatsServer(BridgeServer):
    kind = "nats"
    default_service = "_nats"
    protocol = NatsProtocol

    config: NatsConfig
    _pinger: asyncio.TimerHandle | None = None

    async def listen(self) -> list[str]:
        bound = await super().listen()
        s, node = self.settings, self.hub.daemon.node
        host, _, port = bound[0].rpartition(":")
        self.config = NatsConfig(
            server_id=self.hub.server_id(), server_name=f"{node.user}.{node.service}",
            host=host.strip("[]"), port=int(port), user=s.user, password=s.password, token=s.token,
            max_payload=self.hub.max_payload)
        self._pinger = asyncio.get_running_loop().call_later(PING_INTERVAL_S, self._ping)
        return bound

    def _ping(self) -> None:
        for proto in list(self.conns):
            if isinstance(proto.session, NatsSession):
                proto.session.ping()
        self._pinger = asyncio.get_running_loop().call_later(PING_INTERVAL_S, self._ping)

    def close(self) -> None:
        if self._pinger is not None:
            self._pinger.cancel()
            self._pinger = None
        super().close()
