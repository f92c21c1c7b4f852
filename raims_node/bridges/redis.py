"""The Redis transport (`type: redis`): RedisSession on asyncio sockets (issue 8 point 2).

Manual "Redis": a pub/sub listener whose clients share the `service` namespace (default
`_redis`). Everything protocol is redis_session's; the glue is glue.py's. The key-value
data commands of the manual (a shared-memory map) are not part of this bridge: they get
redis-server's unknown-command error.
"""

from __future__ import annotations

from raims_node.bridges.glue import BridgeServer, BridgeSession, SessionProtocol
from raims_node.bridges.redis_session import RedisConfig, RedisSession, redis_limits


class RedisProtocol(SessionProtocol):
    server: RedisServer

    def new_session(self, client_id: int, client_ip: str | None) -> BridgeSession:
        return RedisSession(self.server.bus, client_id, self.server.config, wakeup=self.wakeup)


class RedisServer(BridgeServer):
    kind = "redis"
    default_service = "_redis"
    protocol = RedisProtocol
    config = RedisConfig()

    async def listen(self) -> list[str]:
        bound = await super().listen()
        self.config = redis_limits(self.hub.max_payload)
        return bound
