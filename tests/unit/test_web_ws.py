"""A websocket subscriber that stops reading is cut as a slow consumer by the bytes it
has not taken; one that reads gets every delivery in order."""

from __future__ import annotations

import asyncio
import json

from raims_node.router.actions import Deliver
from raims_node.web.admin import WS_BACKLOG_BYTES, _WsClient


class Socket:
    """A websocket whose sends complete only while `gate` is set (a peer that reads)."""

    def __init__(self, reading: bool) -> None:
        self.closed = False
        self.sent: list[str] = []
        self.gate = asyncio.Event()
        if reading:
            self.gate.set()

    async def send_str(self, text: str) -> None:
        await self.gate.wait()
        self.sent.append(text)


def _deliver(payload: bytes) -> Deliver:
    return Deliver(object(), "s", "subj", None, payload, bytes(16))


def test_a_websocket_that_stops_reading_is_cut_by_bytes_and_its_backlog_dropped() -> None:
    async def run() -> None:
        ws, aborted = Socket(reading=False), []
        client = _WsClient(ws, lambda: aborted.append(True))  # type: ignore[arg-type]
        big = _deliver(b"x" * 100_000)
        n = 0
        while not client.cut:
            client.on_deliver(big)
            n += 1
            await asyncio.sleep(0)
            assert n < 200
        assert aborted == [True] and n * 100_000 > WS_BACKLOG_BYTES >= (n - 2) * 100_000
        assert client.backlog == 0 and not client.queue
        client.on_deliver(big)  # after the cut: nothing queued
        assert not client.queue and ws.sent == []

    asyncio.run(run())


def test_a_reading_websocket_gets_every_delivery_in_order() -> None:
    async def run() -> None:
        ws = Socket(reading=True)
        client = _WsClient(ws, lambda: None)  # type: ignore[arg-type]
        for i in range(1000):
            client.on_deliver(_deliver(b"%d" % i))
        for _ in range(10):
            await asyncio.sleep(0)
        assert [json.loads(t)["data"] for t in ws.sent] == [str(i) for i in range(1000)]
        assert client.backlog == 0 and not client.cut

    asyncio.run(run())


def test_another_nodes_nats_503_status_is_no_reply_to_a_websocket_request() -> None:
    """A /ws client that publishes with an `_INBOX.` reply and listens on it: a node's
    NATS 503 (router/no_responders.py) is not an answer it can tell from an empty one,
    so it is not delivered (before: {"data": ""} arrived as the request's reply)."""
    from raims_node.router.no_responders import STATUS_503

    async def run() -> None:
        ws = Socket(reading=True)
        client = _WsClient(ws, lambda: None)  # type: ignore[arg-type]
        client.on_deliver(Deliver(object(), "s", "_INBOX.x", None, b"", bytes(16), headers=STATUS_503))
        client.on_deliver(_deliver(b"answer"))
        for _ in range(10):
            await asyncio.sleep(0)
        assert [json.loads(t)["data"] for t in ws.sent] == ["answer"]

    asyncio.run(run())
