"""A small asyncio helper for applications: service names through a node's NATS bridge
(issue 21), over a connected nats-py client (nats-py is an optional dependency; the
helper only calls `request`, `publish`, `subscribe` and `new_inbox` on it).

    names = NamesClient(nc)
    bound = await names.bind(17, 0, 9)              # messages arrive on bound.sub
    where = await names.lookup(17, 5)               # {"port": 1, "node": "B", ...}
    await names.send(17, 5, b"hello")               # to the port a lookup chooses
    async for ev in await names.subscribe(17, 0, 99):   # {"event": "published", ...}
        ...

Errors from the node come back as `NamesRequestError`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from raims_node.names.errors import NamesError
from raims_node.names.topology import FOREVER

DEFAULT_TIMEOUT_S = 5.0


class NamesRequestError(NamesError):
    """The node answered a `_NAMES.*` request with an error."""


@dataclass
class Bound:
    port: int
    key: int
    node: str
    inbox: str
    sub: Any  # the nats-py subscription on `inbox`: the messages sent to the name


class TopologySubscription:
    """Events of a topology subscription, as dicts (topology.py's body)."""

    def __init__(self, sub_id: int, sub: Any) -> None:
        self.sub_id = sub_id
        self.sub = sub

    async def next(self, timeout: float = DEFAULT_TIMEOUT_S) -> dict[str, Any]:
        msg = await self.sub.next_msg(timeout=timeout)
        return dict(json.loads(msg.data))

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._events()

    async def _events(self) -> AsyncIterator[dict[str, Any]]:
        async for msg in self.sub.messages:
            yield dict(json.loads(msg.data))


class NamesClient:
    def __init__(self, nc: Any, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.nc = nc
        self.timeout = timeout

    async def _call(self, verb: str, body: dict[str, object], timeout: float | None = None) -> dict[str, Any]:
        msg = await self.nc.request(f"_NAMES.{verb}", json.dumps(body).encode(), timeout=timeout or self.timeout)
        answer = json.loads(msg.data)
        if "error" in answer:
            raise NamesRequestError(str(answer["error"]))
        return dict(answer)

    async def bind(self, type_: int, lower: int, upper: int | None = None, scope: str = "cluster",
                   inbox: str | None = None) -> Bound:
        inbox = inbox or self.nc.new_inbox()
        sub = await self.nc.subscribe(inbox)
        body = {"type": type_, "lower": lower, "upper": lower if upper is None else upper, "scope": scope,
                "inbox": inbox}
        answer = await self._call("BIND", body)
        return Bound(int(answer["port"]), int(answer["key"]), str(answer["node"]), inbox, sub)

    async def unbind(self, port: int) -> int:
        return int((await self._call("UNBIND", {"port": port}))["withdrawn"])

    async def lookup(self, type_: int, instance: int, domain: str | None = None) -> dict[str, Any]:
        body: dict[str, object] = {"type": type_, "instance": instance}
        if domain is not None:
            body["domain"] = domain
        return await self._call("LOOKUP", body)

    async def inquire(self, type_: int, instance: int, timeout_ms: int) -> dict[str, Any]:
        """Wait until {type_, instance} is published (`found` true) or `timeout_ms` passed."""
        wait = None if timeout_ms == FOREVER else timeout_ms / 1000 + self.timeout
        return await self._call("INQUIRE", {"type": type_, "instance": instance, "timeout_ms": timeout_ms},
                                timeout=wait or 365 * 86400.0)

    async def subscribe(self, type_: int, lower: int = 0, upper: int = 0xFFFFFFFF,
                        timeout_ms: int = FOREVER) -> TopologySubscription:
        inbox = self.nc.new_inbox()
        sub = await self.nc.subscribe(inbox)
        answer = await self._call("SUBSCRIBE", {"type": type_, "lower": lower, "upper": upper,
                                                "timeout_ms": timeout_ms, "inbox": inbox})
        return TopologySubscription(int(answer["sub"]), sub)

    async def send(self, type_: int, instance: int, data: bytes, reply: str = "") -> None:
        await self.nc.publish(f"_NAMES.TO.{type_}.{instance}", data, reply=reply)

    async def mcast(self, type_: int, lower: int, upper: int, data: bytes) -> None:
        await self.nc.publish(f"_NAMES.MCAST.{type_}.{lower}.{upper}", data)
