"""A websocket subscriber that stops reading is closed as a slow consumer."""

from __future__ import annotations

import asyncio

from raims_node.router.actions import Deliver
from raims_node.web.admin import WS_BACKLOG_LIMIT, _WsClient


class StuckSocket:
    """A websocket whose peer never reads: sends never complete."""

    def __init__(self) -> None:
        self.closed = False
        self.close_code: int | None = None
        self.gate = asyncio.Event()

    async def send_json(self, obj: object) -> None:
        await self.gate.wait()

    async def close(self, code: int, message: bytes) -> None:
        self.closed, self.close_code = True, code


def test_slow_websocket_consumer_is_closed() -> None:
    async def run() -> None:
        ws = StuckSocket()
        client = _WsClient(ws)  # type: ignore[arg-type]
        msg = Deliver(object(), "s", "subj", None, b"x", bytes(16))
        for _ in range(WS_BACKLOG_LIMIT):
            client.on_deliver(msg)
        await asyncio.sleep(0)
        assert client.backlog == WS_BACKLOG_LIMIT and not ws.closed
        client.on_deliver(msg)
        await asyncio.sleep(0)
        assert ws.closed and ws.close_code == 1013
        ws.gate.set()  # the stuck sends finish; the backlog drains
        for _ in range(5):
            await asyncio.sleep(0)
        assert client.backlog == 0

    asyncio.run(run())
