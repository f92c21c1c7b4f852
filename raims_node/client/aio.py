"""The asyncio face of the client: the same connection (client/sync.py) with awaitable
calls; messages reach coroutines through asyncio queues fed from the reader thread.

    async with await aconnect(error_cb=on_error) as c:
        sub = await c.subscribe("rows/*")    # pending_msgs_limit=, pending_bytes_limit=
        await c.wait_visible("rows/x")
        await c.publish("rows/x", b"p")
        msg = await sub.next(timeout=5)      # or: async for msg in sub

Publishing sends straight on the socket (a packet is taken whole or refused; the call
blocks only while the node's flood control holds its publishers). Calls that wait for
the node (connect, flush, wait_visible, request) run in the loop's default executor.

Pending limits and slow consumers as in client/sync.py, with the same semantics: the
reader thread admits a message against the subscription's limits (client/pending.py)
before it schedules the message onto the loop, so a message counts as pending from then
until `next()` / `async for` takes it out, also while it waits in the loop's ready queue
(which would otherwise be the unbounded part). Drops count in the subscription's and the
client's `dropped`. `error_cb` runs on the loop (a coroutine function's result becomes a
task), once per episode; without one the client logs the rate-limited warning. A
connection the node cut (a slow consumer) or lost is reported to `error_cb` on the loop
too (`SlowConsumerCut`, `ConnectionLost`; counted in `cuts`, `cut_dropped`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

from raims_node.client.pending import (
    DEFAULT_PENDING_BYTES_LIMIT,
    DEFAULT_PENDING_MSGS_LIMIT,
    Limited,
    Pending,
)
from raims_node.client.sync import (
    DEFAULT_RECONNECT_S,
    Client,
    ClientError,
    Message,
    Subscription,
)


class AsyncSubscription(Limited):
    def __init__(self, loop: asyncio.AbstractEventLoop, client: Client, pattern: bytes, pending: Pending) -> None:
        self._loop = loop
        self._client = client
        self.pattern = pattern
        # with the messages scheduled by _put, at most pending.msgs_limit (and the None that ends it)
        self.queue: asyncio.Queue[Message | None] = asyncio.Queue()
        self.pending = pending
        self.sub: Subscription | None = None

    def _put(self, msg: Message) -> None:
        """The reader thread's delivery: scheduled onto the loop if it fits, else dropped."""
        if self._admit(msg, self._client):
            self._loop.call_soon_threadsafe(self.queue.put_nowait, msg)

    def _end(self) -> None:
        """The client closed or lost its node for good (reader thread): iteration ends."""
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            self._loop.call_soon_threadsafe(self.queue.put_nowait, None)

    async def next(self, timeout: float | None = None) -> Message:
        try:
            msg = self._take(await asyncio.wait_for(self.queue.get(), timeout))
        except TimeoutError:
            raise ClientError(f"no message within {timeout} s") from None
        if msg is None:
            self.queue.put_nowait(None)  # the end stays for the next call
            raise ClientError("subscription closed")
        return msg

    async def __aiter__(self) -> AsyncIterator[Message]:
        while True:
            msg = self._take(await self.queue.get())
            if msg is None:
                self.queue.put_nowait(None)  # the end stays for the next call
                return
            yield msg

    async def unsubscribe(self) -> None:
        if self.sub is not None:
            self.sub.unsubscribe()
            self.queue.put_nowait(None)


class AsyncClient:
    def __init__(self, client: Client) -> None:
        self.sync = client

    @property
    def dropped(self) -> int:
        """Messages dropped by all the client's subscriptions (client/sync.py)."""
        return self.sync.dropped

    @property
    def cuts(self) -> int:
        """Slow-consumer cuts of this client by the node (client/errors.py)."""
        return self.sync.cuts

    @property
    def cut_dropped(self) -> int:
        """Messages the node said it dropped with those cuts."""
        return self.sync.cut_dropped

    async def publish(self, subject: str | bytes, payload: bytes = b"") -> None:
        self.sync.publish(subject, payload)

    async def subscribe(self, pattern: str | bytes, *, pending_msgs_limit: int | None = None,
                        pending_bytes_limit: int | None = None) -> AsyncSubscription:
        """Messages on `pattern` for `next()` / `async for`, within the pending limits (the
        client's unless given)."""
        key = pattern.encode("utf-8", "surrogateescape") if isinstance(pattern, str) else pattern
        asub = AsyncSubscription(asyncio.get_running_loop(), self.sync, key,
                                 self.sync._pending(pending_msgs_limit, pending_bytes_limit))
        asub.sub = self.sync.subscribe(key, callback=asub._put, confirm=False)
        asub.sub.on_end = asub._end
        await self.flush()  # as the sync client's subscribe, without blocking the loop
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


def _on_loop(loop: asyncio.AbstractEventLoop, error_cb: Callable[[ClientError], Any]) -> Callable[[ClientError], None]:
    """`error_cb` moved from the reader thread onto the loop; a coroutine becomes a task
    (held here until done, so that it is not collected while it runs)."""
    tasks: set[asyncio.Future[Any]] = set()

    def run(err: ClientError) -> None:
        result = error_cb(err)
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    def hand_over(err: ClientError) -> None:
        loop.call_soon_threadsafe(run, err)

    return hand_over


async def aconnect(node: str | None = None, path: str | None = None, flood: tuple[str, ...] = (),
                   reconnect_s: float = DEFAULT_RECONNECT_S, *,
                   pending_msgs_limit: int = DEFAULT_PENDING_MSGS_LIMIT,
                   pending_bytes_limit: int = DEFAULT_PENDING_BYTES_LIMIT,
                   error_cb: Callable[[ClientError], Any] | None = None) -> AsyncClient:
    """The asyncio client (client/sync.py's `connect`); `error_cb` may be a coroutine function."""
    loop = asyncio.get_running_loop()
    cb = None if error_cb is None else _on_loop(loop, error_cb)
    client = await loop.run_in_executor(None, lambda: Client(
        node, path, flood, reconnect_s, pending_msgs_limit=pending_msgs_limit,
        pending_bytes_limit=pending_bytes_limit, error_cb=cb))
    return AsyncClient(client)
