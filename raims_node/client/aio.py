"""The asyncio face of the client: the same connection (client/sync.py) with awaitable
calls; messages reach coroutines through asyncio queues fed from the reader thread.

    async with await aconnect() as c:
        sub = await c.subscribe("rows/*")
        await c.wait_visible("rows/x")
        await c.publish("rows/x", b"p")
        msg = await sub.next(timeout=5)      # or: async for msg in sub

Publishing sends straight on the socket (a packet is taken whole or refused; the call
blocks only while the node's flood control holds its publishers). Calls that wait for
the node (connect, flush, wait_visible, request) run in the loop's default executor.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from raims_node.client.sync import DEFAULT_RECONNECT_S, Client, ClientError, Message, Subscription


class AsyncSubscription:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.queue: asyncio.Queue[Message | None] = asyncio.Queue()
        self.sub: Subscription | None = None

    def _put(self, msg: Message | None) -> None:
        self._loop.call_soon_threadsafe(self.queue.put_nowait, msg)

    async def next(self, timeout: float | None = None) -> Message:
        try:
            msg = await asyncio.wait_for(self.queue.get(), timeout)
        except TimeoutError:
            raise ClientError(f"no message within {timeout} s") from None
        if msg is None:
            raise ClientError("subscription closed")
        return msg

    async def __aiter__(self) -> AsyncIterator[Message]:
        while True:
            msg = await self.queue.get()
            if msg is None:
                return
            yield msg

    async def unsubscribe(self) -> None:
        if self.sub is not None:
            self.sub.unsubscribe()
            self.queue.put_nowait(None)


class AsyncClient:
    def __init__(self, client: Client) -> None:
        self.sync = client

    async def publish(self, subject: str | bytes, payload: bytes = b"") -> None:
        self.sync.publish(subject, payload)

    async def subscribe(self, pattern: str | bytes) -> AsyncSubscription:
        asub = AsyncSubscription(asyncio.get_running_loop())
        asub.sub = self.sync.subscribe(pattern, callback=asub._put)
        return asub

    async def flush(self, timeout: float = 10.0) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.sync.flush, timeout)

    async def wait_visible(self, subject: str | bytes, timeout: float = 30.0) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.sync.wait_visible, subject, timeout)

    async def request(self, subject: str | bytes, payload: bytes = b"", timeout: float = 10.0) -> Message:
        return await asyncio.get_running_loop().run_in_executor(None, self.sync.request, subject, payload, timeout)

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.sync.close)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def aconnect(node: str | None = None, path: str | None = None, flood: tuple[str, ...] = (),
                   reconnect_s: float = DEFAULT_RECONNECT_S) -> AsyncClient:
    loop = asyncio.get_running_loop()
    client = await loop.run_in_executor(None, lambda: Client(node, path, flood, reconnect_s))
    return AsyncClient(client)
