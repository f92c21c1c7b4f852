"""The Redis transport (`type: redis`): RedisSession on asyncio sockets (issue 8 point 2).

Manual "Redis": a pub/sub listener whose clients share the `service` namespace (default
`_redis`). Everything protocol is redis_session's; the glue is glue.py's. The data
commands run on the node's key-value map (the hub's `kv`, raims_node/kv), whose keyspace
notifications are published into this transport's service.
"""

from __future__ import annotations

import asyncio
from typing import Protocol, cast

from raims_node.bridges.glue import (
    BridgeServer,
    BridgeSession,
    BridgeSettings,
    HubView,
    SessionProtocol,
)
from raims_node.bridges.redis_admin import RedisHost
from raims_node.bridges.redis_config import RedisConfig, redis_limits
from raims_node.bridges.redis_session import RedisSession
from raims_node.bridges.router_bus import RouterBus
from raims_node.kv.commands import Engine

TICK_S = 1.0  # redis-server checks idle clients about once a second too


class KVHub(HubView, Protocol):
    """The hub as the Redis bridge sees it: with the node's key-value map."""

    kv: Engine | None

    def kv_notifications(self, bus: RouterBus) -> None: ...


class RedisProtocol(SessionProtocol):
    server: RedisServer

    def new_session(self, client_id: int, client_ip: str | None) -> BridgeSession:
        transport = self.transport
        assert transport is not None
        sock = transport.get_extra_info("socket")
        return RedisSession(self.server.bus, client_id, self.server.config, wakeup=self.wakeup,
                            kv=cast(KVHub, self.server.hub).kv, host=self.server.host,
                            addr=_address(transport.get_extra_info("peername")),
                            laddr=_address(transport.get_extra_info("sockname")),
                            fd=sock.fileno() if sock is not None else -1)


def _address(addr: object) -> str:
    """redis-server's `ip:port` (`[ip6]:port`) of a socket address."""
    if isinstance(addr, tuple) and len(addr) >= 2:
        host = str(addr[0])
        return f"[{host}]:{addr[1]}" if ":" in host else f"{host}:{addr[1]}"
    return ""


class RedisServer(BridgeServer):
    kind = "redis"
    default_service = "_redis"
    full_reply = b"-ERR max number of clients reached\r\n"
    protocol = RedisProtocol
    config = RedisConfig()

    def __init__(self, hub: HubView, name: str, settings: BridgeSettings) -> None:
        super().__init__(hub, name, settings)
        self.host = RedisHost(sessions=self._sessions)
        self._tick: asyncio.TimerHandle | None = None

    @property
    def keepalive_s(self) -> float:
        """The transport's CONFIG `tcp-keepalive` (the parameter at listen; redis_ops.py)."""
        return float(self.host.ops.tcp_keepalive)

    @keepalive_s.setter
    def keepalive_s(self, value: float) -> None:
        self.host.ops.tcp_keepalive = round(value)

    def _sessions(self) -> list[RedisSession]:
        """The live sessions, for CLIENT LIST / KILL and INFO."""
        return [p.session for p in self.conns if isinstance(p.session, RedisSession)]

    async def listen(self) -> list[str]:
        cast(KVHub, self.hub).kv_notifications(self.bus)
        bound = await super().listen()
        if self.servers and self.servers[0].sockets:
            self.host.port = self.servers[0].sockets[0].getsockname()[1]
        kv = cast(KVHub, self.hub).kv
        self.config = redis_limits(self.hub.max_payload, data=kv is not None and kv.store.writable)
        loop = asyncio.get_running_loop()
        self.host.ops.schedule = loop.call_later
        self._tick = loop.call_later(TICK_S, self._on_tick)
        return bound

    def _on_tick(self) -> None:
        """Once a second: idle clients past `timeout`, the end of a CLIENT PAUSE (redis_ops.py)."""
        self._tick = asyncio.get_running_loop().call_later(TICK_S, self._on_tick)
        self.host.ops.tick(self._sessions(), self.host.monitors)

    def close(self) -> None:
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        self.host.ops.schedule = None
        super().close()
